package podimage

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
)

// runAgnhost implements the agnhost subcommands that Kubernetes tests use to
// see which pod answered.
func runAgnhost(ctx context.Context, args []string, name string) error {
	// The command may start with the binary itself (["/agnhost", "netexec"]).
	if len(args) > 0 && strings.Contains(path.Base(args[0]), "agnhost") {
		args = args[1:]
	}
	if len(args) == 0 {
		return idle(ctx)
	}
	switch args[0] {
	case "netexec":
		return netexec(ctx, args[1:], name)
	case "serve-hostname":
		return serveHostname(ctx, args[1:], name)
	default:
		fmt.Printf("podimage: agnhost %s is not implemented; idling\n", args[0])
		return idle(ctx)
	}
}

func netexec(ctx context.Context, args []string, name string) error {
	fs := flag.NewFlagSet("netexec", flag.ContinueOnError)
	httpPort := fs.Int("http-port", 8080, "HTTP port")
	udpPort := fs.Int("udp-port", -1, "UDP port (-1: none)")
	fs.Int("sctp-port", -1, "ignored")
	if err := fs.Parse(args); err != nil {
		return err
	}
	exit := make(chan int, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "NOW: %v", time.Now())
	})
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) })
	mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.RemoteAddr) })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.URL.Query().Get("msg")) })
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(http.StatusNoContent)
		select {
		case exit <- code:
		default:
		}
	})
	if err := serveHTTP(ctx, *httpPort, mux); err != nil {
		return err
	}
	if *udpPort > 0 {
		if err := serveUDP(ctx, *udpPort, func(msg string, from net.Addr) string {
			switch cmd, arg, _ := strings.Cut(strings.TrimSpace(msg), " "); cmd {
			case "hostname":
				return name
			case "echo":
				return arg
			case "clientip":
				return from.String()
			default:
				return "unknown command " + cmd
			}
		}); err != nil {
			return err
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case code := <-exit:
		// Let the /exit response reach the client first.
		time.Sleep(100 * time.Millisecond)
		return exitError(code)
	}
}

func serveHostname(ctx context.Context, args []string, name string) error {
	fs := flag.NewFlagSet("serve-hostname", flag.ContinueOnError)
	port := fs.Int("port", 9376, "port")
	tcp := fs.Bool("tcp", false, "serve raw TCP")
	udp := fs.Bool("udp", false, "serve UDP")
	httpOn := fs.Bool("http", true, "serve HTTP")
	fs.Bool("close", false, "ignored")
	if err := fs.Parse(args); err != nil {
		return err
	}
	addr := fmt.Sprintf(":%d", *port)
	switch {
	case *tcp:
		if err := echoserver.Serve(ctx, "tcp", addr, name); err != nil {
			return err
		}
	case *httpOn:
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) })
		if err := serveHTTP(ctx, *port, mux); err != nil {
			return err
		}
	}
	if *udp {
		if err := echoserver.Serve(ctx, "udp", addr, name); err != nil {
			return err
		}
	}
	return idle(ctx)
}

// runEcho runs the image mcs-kube-proxy/echoserver (test/echoserver.Main).
func runEcho(ctx context.Context, args []string, name string) error {
	// The command may start with the binary itself (["/echoserver", "ask"]).
	if len(args) > 0 && strings.Contains(path.Base(args[0]), "echoserver") {
		args = args[1:]
	}
	return echoserver.Main(ctx, args, name, os.Stdout)
}

// serveHTTP serves h on port until ctx is done; it returns once listening.
func serveHTTP(ctx context.Context, port int, h http.Handler) error {
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	go func() { _ = srv.Serve(l) }()
	return nil
}

// serveUDP answers each datagram with answer(datagram) until ctx is done.
func serveUDP(ctx context.Context, port int, answer func(msg string, from net.Addr) string) error {
	conn, err := net.ListenPacket("udp", fmt.Sprintf(":%d", port))
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); _ = conn.Close() }()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			_, _ = conn.WriteTo([]byte(answer(string(buf[:n]), from)), from)
		}
	}()
	return nil
}

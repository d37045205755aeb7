package echoserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Main is the image mcs-kube-proxy/echoserver: with no subcommand it serves
// name on TCP and UDP --port (what a pod of a tested Service runs); "ask"
// and "dig" are what a test runs inside a client pod (by exec, in the
// pod's network namespace, or through --run-port) to see, from there, who
// answers an address and what a DNS server says. Results go to out, one
// line per answer. "traffic" asks targets continuously and counts what
// answered (a rollout's measure, hack/kind-e2e.sh --rollout-only).
func Main(ctx context.Context, args []string, name string, out io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "ask":
			return askMain(args[1:], out)
		case "dig":
			return digMain(args[1:], out)
		case "hold":
			return holdMain(args[1:], out)
		case "traffic":
			return trafficMain(ctx, args[1:], out)
		case "serve":
			args = args[1:]
		}
	}
	fs := flag.NewFlagSet("echoserver", flag.ContinueOnError)
	port := fs.Int("port", 8080, "TCP and UDP port to answer on")
	runPort := fs.Int("run-port", 0, "TCP port of an HTTP endpoint running ask and dig in this process (RunPath), for a test that reaches the pod through its apiserver's pod proxy rather than by exec; 0: none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	addr := fmt.Sprintf(":%d", *port)
	for _, network := range []string{"tcp", "udp"} {
		if err := Serve(ctx, network, addr, name); err != nil {
			return err
		}
	}
	if *runPort != 0 {
		if err := serveRun(ctx, fmt.Sprintf(":%d", *runPort), name); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// RunPath is where --run-port takes a POST whose body is a JSON array of
// arguments, ask or dig and theirs, and answers a RunResult. An exec
// costs the node a runtime process per question (the kubelet, the
// container runtime and its shim); this costs one HTTP request.
const RunPath = "/run"

// RunResult is what RunPath answers: what the subcommand printed, and
// its error, if any.
type RunResult struct {
	Output string `json:"output"`
	Error  string `json:"error,omitempty"`
}

func serveRun(ctx context.Context, addr, name string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+RunPath, func(w http.ResponseWriter, r *http.Request) {
		var args []string
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || len(args) == 0 || args[0] != "ask" && args[0] != "dig" && args[0] != "hold" {
			http.Error(w, `want a JSON array of arguments: ["ask", ...], ["dig", ...] or ["hold", ...]`, http.StatusBadRequest)
			return
		}
		var out bytes.Buffer
		result := RunResult{}
		if err := Main(r.Context(), args, name, &out); err != nil {
			result.Error = err.Error()
		}
		result.Output = out.String()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(result)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}

// askMain: ask [--network tcp|udp] [--count N] ADDR prints, for each of N
// requests, the name that answered or "-" for none.
func askMain(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("ask", flag.ContinueOnError)
	network := fs.String("network", "tcp", "tcp or udp")
	count := fs.Int("count", 1, "requests to send, one after the other")
	timeout := fs.Duration("timeout", time.Second, "how long to wait for each answer")
	interval := fs.Duration("interval", 0, "pause between requests")
	// Short by default: a VIP without rules drops the SYN, and a check
	// that it is silent should not wait long. A count of answers that
	// must all come waits as a client does.
	dialTimeout := fs.Duration("dial-timeout", 300*time.Millisecond, "how long to wait for each connection")
	during := fs.Duration("for", 0, "keep asking this long instead of --count times, printing each answer after the milliseconds since the start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("ask needs one address (host:port), got %v", fs.Args())
	}
	start := time.Now()
	for i := 0; *during > 0 && time.Since(start) < *during || *during == 0 && i < *count; i++ {
		at := time.Since(start)
		name := "-"
		// A host name is resolved for every request, as a client without
		// a DNS cache of its own would.
		if c, err := net.DialTimeout(*network, fs.Arg(0), *dialTimeout); err == nil {
			if got, err := AskOn(c, *network, *timeout); err == nil {
				name = got
			}
		}
		line := name
		if *during > 0 {
			line = fmt.Sprintf("%d %s", at.Milliseconds(), name)
		}
		if _, err := fmt.Fprintln(out, line); err != nil {
			return err
		}
		time.Sleep(*interval)
	}
	return nil
}

// digMain: dig --server IP NAME TYPE prints the Answer as JSON.
func digMain(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("dig", flag.ContinueOnError)
	server := fs.String("server", "", "DNS server address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	typ, ok := QueryTypes[fs.Arg(1)]
	if fs.NArg() != 2 || *server == "" || !ok {
		return fmt.Errorf("usage: dig --server IP NAME A|AAAA|SRV|PTR")
	}
	c, err := net.DialTimeout("udp", net.JoinHostPort(*server, "53"), 2*time.Second)
	if err != nil {
		return err
	}
	answer, err := Query(c, fs.Arg(0), typ)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(answer)
}

// holdMain: hold --until-silent ADDR2 [--interval D] [--for D] ADDR keeps
// one TCP connection to ADDR and asks on it every interval, printing
// "MS NAME" per answer (MS since the start), or "MS -" for none, which
// ends it. Meanwhile it connects to ADDR2 anew each interval; once ADDR2
// has not answered three times in a row it prints "MS silent" and asks the
// held connection once more. A test holds a connection across a change
// that takes ADDR2's rules away (kube-proxy restarted without them) and
// sees whether the connection made before it is still answered after it.
// --for bounds the whole.
func holdMain(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("hold", flag.ContinueOnError)
	untilSilent := fs.String("until-silent", "", "host:port whose silence to new connections ends the hold")
	interval := fs.Duration("interval", 200*time.Millisecond, "pause between asks")
	during := fs.Duration("for", 2*time.Minute, "the longest the hold lasts")
	// Long enough for a loaded node's slow answer and a retransmission or
	// two: a held connection that is reset fails at once, one whose
	// packets are dropped (or sent to another endpoint) never answers.
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for each answer on the held connection")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *untilSilent == "" {
		return fmt.Errorf("usage: hold --until-silent HOST:PORT [--interval D] [--for D] HOST:PORT")
	}
	start := time.Now()
	c, err := net.DialTimeout("tcp", fs.Arg(0), 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	ask := func() bool {
		_ = c.SetDeadline(time.Now().Add(*timeout))
		line, err := r.ReadString('\n')
		name := strings.TrimSpace(line)
		if err != nil || name == "" {
			// "-", then why: reset, EOF or the timeout.
			_, _ = fmt.Fprintf(out, "%d - %v\n", time.Since(start).Milliseconds(), err)
			return false
		}
		_, _ = fmt.Fprintf(out, "%d %s\n", time.Since(start).Milliseconds(), name)
		_, err = c.Write([]byte("again\n"))
		return err == nil
	}
	for silent := 0; time.Since(start) < *during; {
		if !ask() {
			return nil
		}
		if _, err := Ask("tcp", *untilSilent, 300*time.Millisecond); err != nil {
			silent++
		} else {
			silent = 0
		}
		if silent == 3 {
			_, _ = fmt.Fprintf(out, "%d silent\n", time.Since(start).Milliseconds())
			ask()
			return nil
		}
		time.Sleep(*interval)
	}
	return nil
}

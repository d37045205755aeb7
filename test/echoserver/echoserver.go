// Package echoserver is the smallest server that tells a client who
// answered: it writes its name to every TCP connection, and again for
// everything the client sends on it, and answers every UDP datagram with
// its name. Tests count names to see where traffic went.
package echoserver

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"
)

// Serve answers on network ("tcp", "tcp6", "udp", ...) at addr with name
// until ctx is done. It returns once the socket is open.
func Serve(ctx context.Context, network, addr, name string) error {
	switch network {
	case "udp", "udp4", "udp6":
		conn, err := net.ListenPacket(network, addr)
		if err != nil {
			return err
		}
		go func() { <-ctx.Done(); _ = conn.Close() }()
		go func() {
			buf := make([]byte, 1500)
			for {
				_, from, err := conn.ReadFrom(buf)
				if err != nil {
					return
				}
				_, _ = conn.WriteTo([]byte(name+"\n"), from)
			}
		}()
		return nil
	default:
		l, err := net.Listen(network, addr)
		if err != nil {
			return err
		}
		go func() { <-ctx.Done(); _ = l.Close() }()
		go ServeListener(l, name)
		return nil
	}
}

// ServeListener writes name to every connection l accepts until l is
// closed; for listeners opened elsewhere, e.g. inside a network namespace.
// A client may read the name and close, or hold the connection and send
// something to be answered again (the image's "hold"): a connection that
// outlives a change of the rules in between.
func ServeListener(l net.Listener, name string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go serveConn(c, name)
	}
}

// heldIdle is how long a connection may stay silent before the server
// closes it.
const heldIdle = 2 * time.Minute

func serveConn(c net.Conn, name string) {
	defer c.Close()
	answer := []byte(name + "\n")
	buf := make([]byte, 256)
	for {
		if _, err := c.Write(answer); err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(heldIdle))
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// Ask connects to addr and returns the name of whoever answered.
func Ask(network, addr string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return "", err
	}
	return AskOn(c, network, timeout)
}

// AskOn asks over a connection already made (e.g. dialled from inside a
// network namespace), waiting at most timeout, and closes it. Over UDP it
// sends "hostname", which agnhost netexec also answers.
func AskOn(c net.Conn, network string, timeout time.Duration) (string, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if network == "udp" || network == "udp4" || network == "udp6" {
		if _, err := c.Write([]byte("hostname")); err != nil {
			return "", err
		}
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if name := strings.TrimSpace(string(buf[:n])); name != "" {
		return name, nil
	}
	if err == nil {
		err = errors.New("empty answer")
	}
	return "", err
}

package netns

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Add creates a named network namespace (as `ip netns add` does) with
// loopback up, and deletes it when the test ends.
func Add(t testing.TB, name string) {
	t.Helper()
	_, _ = Output("ip", "netns", "del", name) // left over from a crashed run
	Run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _, _ = Output("ip", "netns", "del", name) })
	Run(t, "ip", "-n", name, "link", "set", "lo", "up")
}

// Output runs a command and returns its combined output.
func Output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Do runs f on a thread that is in the named network namespace. Sockets f
// opens stay in that namespace after Do returns, so a listener opened here
// serves that namespace and a connection dialled here leaves from it.
func Do(name string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := os.Open(filepath.Join("/var/run/netns", name))
	if err != nil {
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering network namespace %s: %w", name, err)
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// A thread stuck in the wrong namespace must not be reused.
			panic(fmt.Sprintf("returning from network namespace %s: %v", name, err))
		}
	}()
	return f()
}

// Listen opens a listener inside the named namespace.
func Listen(name, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := Do(name, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Dial connects from inside the named namespace.
func Dial(name, network, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := Do(name, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, timeout)
		return err
	})
	return c, err
}

// Forward makes target, an address in the caller's namespace, reachable at
// listenAddr inside the named namespace: a process there (kube-proxy in a
// node namespace) reaches an apiserver on the host's loopback this way,
// without any route out of the namespace.
func Forward(ctx context.Context, name, listenAddr, target string) error {
	l, err := Listen(name, "tcp", listenAddr)
	if err != nil {
		return err
	}
	relay(ctx, l, func() (net.Conn, error) { return net.Dial("tcp", target) })
	return nil
}

// Expose makes target, an address inside the named namespace, reachable
// at listenAddr in the caller's namespace (Forward's reverse): a test on
// the host reaches a port a process binds on a node namespace's loopback
// (kube-proxy's metrics) this way, without any route into the namespace.
func Expose(ctx context.Context, name, target, listenAddr string) error {
	l, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return err
	}
	relay(ctx, l, func() (net.Conn, error) { return Dial(name, "tcp", target, 5*time.Second) })
	return nil
}

// relay splices every connection l accepts with one dial makes, until ctx
// ends (which closes l): Forward's and Expose's loop, whichever side of
// the namespace each end is on.
func relay(ctx context.Context, l net.Listener, dial func() (net.Conn, error)) {
	go func() { <-ctx.Done(); _ = l.Close() }()
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := dial()
				if err != nil {
					return
				}
				defer out.Close()
				Splice(in, out)
			}()
		}
	}()
}

// Splice copies between a and b both ways until both directions have
// ended, passing a half-close on (TCP and Unix connections), and closes
// neither: the caller does.
func Splice(a, b io.ReadWriter) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(a, b)
		closeWrite(a)
	}()
	_, _ = io.Copy(b, a)
	closeWrite(b)
	<-done
}

func closeWrite(c io.ReadWriter) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

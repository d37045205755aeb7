package echoserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestImage runs the image as a pod and as a client would: the server
// answers its name on TCP and UDP, "ask" prints one line per request and
// "-" where nobody answered.
func TestImage(t *testing.T) {
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Main(ctx, []string{"--port=" + port}, "web-1", nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	for _, network := range []string{"tcp", "udp"} {
		var out bytes.Buffer
		deadline := time.Now().Add(5 * time.Second)
		for {
			out.Reset()
			if err := Main(context.Background(), []string{"ask", "--network=" + network, "--count=3", addr}, "client", &out); err != nil {
				t.Fatal(err)
			}
			if out.String() == "web-1\nweb-1\nweb-1\n" || time.Now().After(deadline) {
				break
			}
		}
		if out.String() != "web-1\nweb-1\nweb-1\n" {
			t.Errorf("ask over %s: %q, want web-1 three times", network, out.String())
		}
	}

	var out bytes.Buffer
	if err := Main(context.Background(), []string{"ask", "--count=2", freeAddr(t)}, "client", &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "-\n-\n" {
		t.Errorf("ask to a closed port: %q, want - twice", out.String())
	}
	// Asking for a while, by host name: each answer after its time.
	out.Reset()
	_, port2, _ := net.SplitHostPort(addr)
	if err := Main(context.Background(), []string{"ask", "--for=300ms", "--interval=50ms", "localhost:" + port2}, "client", &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 || len(lines) > 7 {
		t.Errorf("ask --for=300ms --interval=50ms: %d answers, want about 6: %q", len(lines), out.String())
	}
	for _, l := range lines {
		if ms, name, ok := strings.Cut(l, " "); !ok || name != "web-1" || strings.Trim(ms, "0123456789") != "" {
			t.Errorf("ask --for: line %q, want \"<ms> web-1\"", l)
		}
	}
	for _, args := range [][]string{{"ask"}, {"ask", "a:1", "b:2"}, {"dig", "name", "A"}, {"dig", "--server=127.0.0.1", "name", "MX"}} {
		if err := Main(context.Background(), args, "client", &out); err == nil {
			t.Errorf("%v: no error", args)
		} else if !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v does not say what is wrong with %s", args, err, args[0])
		}
	}
}

// TestRunPort: a pod started with --run-port answers ask and dig over
// HTTP as they print when run by exec, their errors included, and runs
// nothing else.
func TestRunPort(t *testing.T) {
	echoAddr, runAddr := freeAddr(t), freeAddr(t)
	_, port, _ := net.SplitHostPort(echoAddr)
	_, runPort, _ := net.SplitHostPort(runAddr)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Main(ctx, []string{"--port=" + port, "--run-port=" + runPort}, "client-1", nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	run := func(args ...string) (int, RunResult) {
		t.Helper()
		body, _ := json.Marshal(args)
		var resp *http.Response
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; {
			if resp, err = http.Post("http://"+runAddr+RunPath, "application/json", bytes.NewReader(body)); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var result RunResult
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&result); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, result
	}
	// The pod asks its own echo port: it answers its own name.
	if code, got := run("ask", "--count=2", echoAddr); code != http.StatusOK || got != (RunResult{Output: "client-1\nclient-1\n"}) {
		t.Errorf("ask over --run-port: %d %+v, want 200 and client-1 twice", code, got)
	}
	if code, got := run("ask", "--count=2", freeAddr(t)); code != http.StatusOK || got != (RunResult{Output: "-\n-\n"}) {
		t.Errorf("ask to a closed port over --run-port: %d %+v, want 200 and - twice", code, got)
	}
	if code, got := run("dig", "name", "A"); code != http.StatusOK || !strings.Contains(got.Error, "dig") {
		t.Errorf("dig without a server over --run-port: %d %+v, want its usage error", code, got)
	}
	for _, args := range [][]string{{"serve", "--port=1"}, {}, {"--port=1"}} {
		if code, _ := run(args...); code != http.StatusBadRequest {
			t.Errorf("%q over --run-port: %d, want 400 (only ask and dig run)", args, code)
		}
	}
}

func TestReverseName(t *testing.T) {
	for addr, want := range map[string]string{
		"10.250.0.7":     "7.0.250.10.in-addr.arpa.",
		"fd00:10:250::7": "7.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.5.2.0.0.1.0.0.0.0.d.f.ip6.arpa.",
	} {
		if got, err := ReverseName(addr); err != nil || got != want {
			t.Errorf("ReverseName(%s) = %q, %v; want %q", addr, got, err, want)
		}
	}
}

// TestHold holds a connection while another address goes silent: every
// answer on the held connection comes from the server it was made to, the
// silence is said, and the held connection is asked once more after it; a
// held connection the server drops is said as "-" and ends the hold.
func TestHold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := freeAddr(t)
	if err := Serve(ctx, "tcp", held, "web-1"); err != nil {
		t.Fatal(err)
	}
	other := freeAddr(t)
	otherCtx, stopOther := context.WithCancel(ctx)
	if err := Serve(otherCtx, "tcp", other, "gone-1"); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(time.Second, stopOther)
	var out bytes.Buffer
	if err := Main(ctx, []string{"hold", "--until-silent=" + other, "--interval=50ms", held}, "client", &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	silentAt := -1
	for i, l := range lines {
		_, what, _ := strings.Cut(l, " ")
		switch {
		case what == "silent":
			silentAt = i
		case what != "web-1":
			t.Errorf("line %d of the hold: %q, want web-1 answering", i, l)
		}
	}
	if silentAt < 5 || silentAt != len(lines)-2 {
		t.Errorf("hold printed %q: want answers for a second, the silence, and one answer after it", lines)
	}

	// A held connection that is dropped.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = c.Write([]byte("web-2\n"))
			c.Close()
		}
		l.Close()
	}()
	out.Reset()
	if err := Main(ctx, []string{"hold", "--until-silent=" + held, "--interval=50ms", l.Addr().String()}, "client", &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out.String()); len(got) != 5 || got[1] != "web-2" || got[3] != "-" || got[4] != "EOF" {
		t.Errorf("a dropped held connection printed %q, want web-2 then - EOF", out.String())
	}
}

package echoserver

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestTraffic runs "traffic" against a server that answers, stops and
// answers again: requests on new connections and on the held one are
// counted as answered, then failed, the held connection is counted broken
// when its server goes, the failures are counted by how they failed
// (refused, with nobody listening), the outage is as long as the server
// was away, and a reset zeroes everything.
func TestTraffic(t *testing.T) {
	serverAddr, statsAddr := freeAddr(t), freeAddr(t)
	_, statsPort, _ := net.SplitHostPort(statsAddr)
	serve := func() (stop func()) {
		l, err := net.Listen("tcp", serverAddr)
		if err != nil {
			t.Fatal(err)
		}
		conns := make(chan net.Conn, 16)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				conns <- c
				go serveConn(c, "web-1")
			}
		}()
		return func() {
			l.Close()
			for len(conns) > 0 {
				(<-conns).Close()
			}
		}
	}
	stopServer := serve()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, []string{"traffic", "--target=web=" + serverAddr, "--interval=20ms", "--timeout=200ms", "--stats-port=" + statsPort}, "client", nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	stats := func(path, method string) TrafficStats {
		t.Helper()
		var got map[string]TrafficStats
		deadline := time.Now().Add(10 * time.Second)
		for {
			req, _ := http.NewRequest(method, "http://"+statsAddr+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
			}
			if err == nil {
				return got["web"]
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait := func(what string, ok func(TrafficStats) bool) TrafficStats {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := stats(TrafficPath, http.MethodGet)
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait("answers on new and held connections", func(s TrafficStats) bool { return s.New.OK >= 5 && s.Held.OK >= 5 })
	if s := stats(TrafficPath+"/reset", http.MethodPost); s.New.Failed != 0 || s.Held.Failed != 0 || s.Held.Broken != 0 {
		t.Errorf("while the server answers: %+v, want nothing failed", s)
	}
	stopServer()
	away := time.Now()
	wait("failures while the server is away", func(s TrafficStats) bool { return s.New.Failed >= 3 && s.Held.Failed >= 3 && s.Held.Broken >= 1 })
	time.Sleep(300 * time.Millisecond)
	stopServer = serve()
	back := time.Since(away)
	t.Cleanup(stopServer)
	s := wait("answers again", func(s TrafficStats) bool { return s.New.OK >= 3 && s.Held.OK >= 3 })
	for kind, c := range map[string]TrafficCounts{"new": s.New, "held": s.Held} {
		if c.LongestOutageMS < 300 || c.LongestOutageMS > back.Milliseconds()+1000 {
			t.Errorf("%s connections: the longest outage is %d ms, want about the %v the server was away", kind, c.LongestOutageMS, back)
		}
	}
	if s := stats(TrafficPath+"/reset", http.MethodPost); s.Held.Broken == 0 {
		t.Errorf("the held connection was not counted broken: %+v", s)
	} else if s.New.Errors["refused"] == 0 || s.Held.Errors["refused"]+s.Held.Errors["closed"]+s.Held.Errors["reset"] == 0 {
		// Nobody listens while the server is away: new connections are
		// refused; the held one was closed or reset, then refused.
		t.Errorf("how the requests failed: new %v, held %v, want refusals counted", s.New.Errors, s.Held.Errors)
	}
	if s := stats(TrafficPath, http.MethodGet); s.New.Failed != 0 || s.Held.Broken != 0 || s.New.LongestOutageMS != 0 || len(s.New.Errors) > 0 {
		t.Errorf("after a reset: %+v, want zeroes", s)
	}
}

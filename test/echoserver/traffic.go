package echoserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TrafficPath is where "traffic" answers its counts (GET, a JSON object of
// TrafficStats by target name) and zeroes them (POST TrafficPath+"/reset").
const TrafficPath = "/stats"

// TrafficStats count what one target answered since the last reset:
// requests each on a new connection, and requests on one held
// connection, asked again on it until it breaks.
type TrafficStats struct {
	New  TrafficCounts `json:"new"`
	Held TrafficCounts `json:"held"`
}

// TrafficCounts are the requests answered and failed, the held
// connections that broke (each dialled again), and the longest run of
// failures, from the first failed request to the next answered one (or
// to now, while it lasts).
type TrafficCounts struct {
	OK              int64 `json:"ok"`
	Failed          int64 `json:"failed"`
	Broken          int64 `json:"broken,omitempty"`
	LongestOutageMS int64 `json:"longestOutageMs"`
	// Errors are the failed requests by how they failed (failureKind):
	// a refusal says no rule or no endpoint, a timeout a packet lost.
	Errors map[string]int64 `json:"errors,omitempty"`

	failingSince time.Time
}

func (c *TrafficCounts) record(err error, now time.Time) {
	if err == nil {
		c.OK++
		if !c.failingSince.IsZero() {
			c.LongestOutageMS = max(c.LongestOutageMS, now.Sub(c.failingSince).Milliseconds())
			c.failingSince = time.Time{}
		}
		return
	}
	c.Failed++
	if c.Errors == nil {
		c.Errors = map[string]int64{}
	}
	c.Errors[failureKind(err)]++
	if c.failingSince.IsZero() {
		c.failingSince = now
	}
}

// failureKind names how a request failed: refused (a reject rule, or no
// listener), reset, timeout, closed (the peer closed before answering),
// or other.
func failureKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF) || errors.Is(err, errEmptyAnswer):
		return "closed"
	}
	return "other"
}

// errEmptyAnswer is an answer with no name in it.
var errEmptyAnswer = errors.New("empty answer")

// snapshot is c as read at now: an outage still going counts to now.
func (c TrafficCounts) snapshot(now time.Time) TrafficCounts {
	if !c.failingSince.IsZero() {
		c.LongestOutageMS = max(c.LongestOutageMS, now.Sub(c.failingSince).Milliseconds())
	}
	c.failingSince = time.Time{}
	c.Errors = maps.Clone(c.Errors)
	return c
}

// trafficMain: traffic --target NAME=HOST:PORT... [--interval D]
// [--stats-port P] asks every target every interval, on a new TCP
// connection and on one held connection, and counts what answered, until
// ctx ends. What a rollout is measured with: a client per node, its
// counts read (and zeroed) between the steps.
func trafficMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("traffic", flag.ContinueOnError)
	var targets []string
	fs.Func("target", "NAME=HOST:PORT to ask (repeated)", func(v string) error {
		name, addr, ok := strings.Cut(v, "=")
		if !ok || name == "" || addr == "" {
			return fmt.Errorf("want NAME=HOST:PORT, not %q", v)
		}
		targets = append(targets, name, addr)
		return nil
	})
	interval := fs.Duration("interval", 100*time.Millisecond, "pause between two requests of one kind to one target")
	timeout := fs.Duration("timeout", time.Second, "how long one request may take")
	statsPort := fs.Int("stats-port", 9000, "TCP port of the counts (GET "+TrafficPath+", POST "+TrafficPath+"/reset)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(targets) == 0 {
		return fmt.Errorf("usage: traffic --target NAME=HOST:PORT... [--interval D] [--stats-port P]")
	}
	t := &traffic{stats: map[string]*TrafficStats{}}
	for i := 0; i < len(targets); i += 2 {
		name, addr := targets[i], targets[i+1]
		t.stats[name] = &TrafficStats{}
		go t.askNew(ctx, name, addr, *interval, *timeout)
		go t.askHeld(ctx, name, addr, *interval, *timeout)
	}
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", *statsPort))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+TrafficPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(t.read(false))
	})
	mux.HandleFunc("POST "+TrafficPath+"/reset", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(t.read(true))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if out != nil {
		_, _ = fmt.Fprintf(out, "asking %d targets every %v; counts on :%d%s\n", len(t.stats), *interval, *statsPort, TrafficPath)
	}
	if err := srv.Serve(l); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

type traffic struct {
	mu    sync.Mutex
	stats map[string]*TrafficStats
}

// read returns the counts; with reset it zeroes them too.
func (t *traffic) read(reset bool) map[string]TrafficStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	out := map[string]TrafficStats{}
	for name, s := range t.stats {
		out[name] = TrafficStats{New: s.New.snapshot(now), Held: s.Held.snapshot(now)}
		if reset {
			*s = TrafficStats{}
		}
	}
	return out
}

func (t *traffic) count(name string, held bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &t.stats[name].New
	if held {
		c = &t.stats[name].Held
	}
	c.record(err, time.Now())
}

func (t *traffic) countBroken(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats[name].Held.Broken++
}

func (t *traffic) askNew(ctx context.Context, name, addr string, interval, timeout time.Duration) {
	for ctx.Err() == nil {
		_, err := Ask("tcp", addr, timeout)
		t.count(name, false, err)
		sleep(ctx, interval)
	}
}

// askHeld asks on one connection while it answers; a request that fails
// on it breaks it (counted), and the next request dials again.
func (t *traffic) askHeld(ctx context.Context, name, addr string, interval, timeout time.Duration) {
	var c net.Conn
	var r *bufio.Reader
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for ctx.Err() == nil {
		var err error
		if c == nil {
			var conn net.Conn
			if conn, err = net.DialTimeout("tcp", addr, timeout); err == nil {
				c, r = conn, bufio.NewReader(conn)
			}
		} else if _, err = c.Write([]byte("again\n")); err != nil {
			c.Close()
			c = nil
			t.countBroken(name)
		}
		if c != nil {
			_ = c.SetReadDeadline(time.Now().Add(timeout))
			var line string
			line, err = r.ReadString('\n')
			if err == nil && strings.TrimSpace(line) == "" {
				err = errEmptyAnswer
			}
			if err != nil {
				c.Close()
				c = nil
				t.countBroken(name)
			}
		}
		t.count(name, true, err)
		sleep(ctx, interval)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

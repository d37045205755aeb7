package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// measureRestart restarts the controller over a converged clusterset: the
// time until it is ready (/readyz: every member's caches synced), and
// every write request each member's apiserver served from its start until
// settle after that. Nothing is out of date, so every write but the source
// Leases' renewals is one the restart need not have made.
func measureRestart(ctx context.Context, members []*member, controller string, args []string, log io.Writer, settle time.Duration) error {
	before, err := writeSnapshot(ctx, members)
	if err != nil {
		return err
	}
	r, err := startReplica(controller, args, log)
	if err != nil {
		return err
	}
	defer r.stop(syscall.SIGKILL)
	ready, err := r.waitReady(true, 5*time.Minute)
	if err != nil {
		return err
	}
	time.Sleep(settle)
	w, err := writesSince(ctx, members, before)
	if err != nil {
		return err
	}
	fmt.Printf("restart: ready in %s (every member's caches synced); in %s from start, %s\n",
		ready.Round(time.Millisecond), (ready + settle).Round(time.Second), w.describe(len(members)))
	return nil
}

// replica is one mcs-controller process of the benchmark.
type replica struct {
	cmd     *exec.Cmd
	readyz  string
	started time.Time
}

// startReplica starts the controller with args, its health, metrics and
// secure port on ports of its own (replicas run side by side), and extra
// flags.
func startReplica(controller string, args []string, log io.Writer, extra ...string) (*replica, error) {
	var ports [3]int
	for i := range ports {
		var err error
		if ports[i], err = framework.FreePort(); err != nil {
			return nil, err
		}
	}
	healthz, metrics := ports[0], ports[1]
	extra = append([]string{"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2])}, extra...)
	args = slices.Clone(args)
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--healthz-bind-address="):
			args[i] = fmt.Sprintf("--healthz-bind-address=127.0.0.1:%d", healthz)
		case strings.HasPrefix(a, "--metrics-bind-address="):
			args[i] = fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics)
		}
	}
	cmd := exec.Command(controller, append(args, extra...)...)
	cmd.Stdout, cmd.Stderr = log, log
	r := &replica{cmd: cmd, readyz: fmt.Sprintf("http://127.0.0.1:%d/readyz", healthz), started: time.Now()}
	return r, cmd.Start()
}

// waitReady waits until the replica's /readyz answers 200, as the leader
// with every member's caches synced if leading, and returns how long
// after its start that was.
func (r *replica) waitReady(leading bool, timeout time.Duration) (time.Duration, error) {
	for {
		if time.Since(r.started) > timeout {
			return 0, fmt.Errorf("controller (pid %d) not ready after %s", r.cmd.Process.Pid, timeout)
		}
		if resp, err := http.Get(r.readyz); err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && (!leading || !strings.Contains(string(body), "standby")) {
				return time.Since(r.started), nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *replica) stop(sig os.Signal) {
	_ = r.cmd.Process.Signal(sig)
	_ = r.cmd.Wait()
}

// writeSnapshot is every member's requests by verb and resource.
func writeSnapshot(ctx context.Context, members []*member) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	for _, m := range members {
		_, by, err := writeRequestsBy(ctx, m)
		if err != nil {
			return nil, err
		}
		out[m.id] = by
	}
	return out, nil
}

// writes are the write requests the members' apiservers served in a
// phase, Leases (renewals of source and leader Leases, the apiservers'
// own) apart from the rest.
type writes struct {
	leases, others int
	by             map[string]int
}

// writesSince counts the members' write requests since before.
func writesSince(ctx context.Context, members []*member, before map[string]map[string]int) (writes, error) {
	w := writes{by: map[string]int{}}
	after, err := writeSnapshot(ctx, members)
	if err != nil {
		return w, err
	}
	for id, by := range after {
		for k, n := range by {
			verb, resource, _ := strings.Cut(k, " ")
			d := n - before[id][k]
			if d <= 0 || verb == "GET" || verb == "LIST" || verb == "WATCH" {
				continue
			}
			w.by[k] += d
			if resource == "leases" {
				w.leases += d
			} else {
				w.others += d
			}
		}
	}
	return w, nil
}

func (w writes) describe(members int) string {
	var parts []string
	for k, n := range w.by {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%d writes other than Leases (%.1f per member) and %d Lease writes (%.1f per member, the apiservers' own included): %s",
		w.others, float64(w.others)/float64(members), w.leases, float64(w.leases)/float64(members), strings.Join(parts, ", "))
}

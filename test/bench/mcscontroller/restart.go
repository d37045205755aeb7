package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// measureRestart restarts the controller over a converged clusterset: the
// time until it is ready (/readyz: every member's caches synced), and
// every write request each member's apiserver served from its start until
// settle after that. Nothing is out of date, so every write but the source
// Leases' renewals is one the restart need not have made.
func measureRestart(ctx context.Context, members []*member, controller string, args []string, log io.Writer, settle time.Duration) error {
	port, err := framework.FreePort()
	if err != nil {
		return err
	}
	args = slices.Clone(args)
	for i, a := range args {
		if strings.HasPrefix(a, "--healthz-bind-address=") {
			args[i] = fmt.Sprintf("--healthz-bind-address=127.0.0.1:%d", port)
		}
	}
	before := map[string]map[string]int{}
	for _, m := range members {
		if _, before[m.id], err = writeRequestsBy(ctx, m); err != nil {
			return err
		}
	}
	cmd := exec.Command(controller, args...)
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	var ready time.Duration
	for ready == 0 {
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("restarted controller not ready after 5 minutes")
		}
		if resp, err := http.Get(readyz); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready = time.Since(start)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(settle)
	writes := map[string]int{}
	leases, others := 0, 0
	for _, m := range members {
		_, after, err := writeRequestsBy(ctx, m)
		if err != nil {
			return err
		}
		for k, n := range after {
			verb, resource, _ := strings.Cut(k, " ")
			if d := n - before[m.id][k]; d > 0 && verb != "GET" && verb != "LIST" && verb != "WATCH" {
				writes[k] += d
				if resource == "leases" {
					leases += d
				} else {
					others += d
				}
			}
		}
	}
	var parts []string
	for k, n := range writes {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(parts)
	fmt.Printf("restart: ready in %s (every member's caches synced); in %s from start, %d writes other than source Leases (%.1f per member) and %d Lease writes (%.1f per member, the apiservers' own included): %s\n",
		ready.Round(time.Millisecond), (ready + settle).Round(time.Second), others, float64(others)/float64(len(members)),
		leases, float64(leases)/float64(len(members)), strings.Join(parts, ", "))
	return nil
}

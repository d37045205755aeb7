package framework

import (
	"context"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

const (
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 10 * time.Second
)

// childProcess is a control-plane process (etcd, kube-apiserver,
// kube-controller-manager) logging to a file; test/process starts it so
// that it dies with the test even when the test is killed.
type childProcess struct {
	*process.Process
	logPath string
}

// startProcess runs binary with args, appending its output to logPath.
func startProcess(name, binary string, args []string, logPath string) (*childProcess, error) {
	p, err := process.Start(process.Options{Name: name, Argv: append([]string{binary}, args...), Log: logPath})
	if err != nil {
		return nil, err
	}
	return &childProcess{Process: p, logPath: logPath}, nil
}

// Stop sends SIGTERM, then SIGKILL after stopGrace, and waits for the exit.
func (p *childProcess) Stop() { p.Process.Stop(stopGrace) }

// waitReady probes until the process is ready; see process.WaitReady.
func (p *childProcess) waitReady(ctx context.Context, timeout time.Duration, probe func(context.Context) error) error {
	return p.WaitReady(ctx, timeout, probe)
}

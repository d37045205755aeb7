package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// logTailLines is how much of a child's log a start-up error carries.
	logTailLines = 20
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 10 * time.Second
	// pollInterval is how often readiness is probed during start-up.
	pollInterval = 100 * time.Millisecond
)

// process is a child process whose stdout and stderr go to a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd

	exited  chan struct{} // closed once cmd.Wait has returned
	waitErr error         // valid after exited is closed

	stopOnce sync.Once
}

// startProcess runs binary with args, appending its output to logPath.
func startProcess(name, binary string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// A header per start, so that a retried start is told apart in the log.
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))

	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// The child must not outlive the test (or harness) process, even when that
	// is killed without a chance to call Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startOnLockedThread(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	// The child holds its own copy of the descriptor.
	logFile.Close()

	p := &process{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

// startOnLockedThread starts cmd from one goroutine that stays locked to its
// OS thread for the life of the process. Pdeathsig fires when the *thread*
// that forked the child exits, not the process (golang/go#27505), and the Go
// runtime ends a thread when a goroutine that locked it returns without
// unlocking, as network-namespace code does. Forking from a thread that
// never exits keeps Pdeathsig tied to the death of the whole process.
func startOnLockedThread(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked, on purpose
			for req := range spawnRequests {
				req.result <- req.cmd.Start()
			}
		}()
	})
	result := make(chan error, 1)
	spawnRequests <- spawnRequest{cmd: cmd, result: result}
	return <-result
}

// Stop sends SIGTERM, then SIGKILL after stopGrace, and waits for the
// process to exit. It is safe to call more than once.
func (p *process) Stop() {
	p.stopOnce.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// waitReady calls probe every pollInterval until it returns nil. It gives up
// when the process exits, ctx ends or timeout passes, returning an error that
// carries the last probe error and the tail of the process's log.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		probeCtx, probeCancel := context.WithTimeout(ctx, 5*time.Second)
		lastErr = probe(probeCtx)
		probeCancel()
		if lastErr == nil {
			return nil
		}
		select {
		case <-p.exited:
			return p.failure(fmt.Errorf("exited during start-up (%v)", p.waitErr))
		case <-ctx.Done():
			return p.failure(fmt.Errorf("not ready: %w (last probe: %v)", ctx.Err(), lastErr))
		case <-ticker.C:
		}
	}
}

// failure wraps err with the process name and the tail of its log.
func (p *process) failure(err error) error {
	return fmt.Errorf("%s: %w\n--- last %d lines of %s ---\n%s", p.name, err, logTailLines, p.logPath, tailFile(p.logPath, logTailLines))
}

// tailFile returns the last n lines of the file at path.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

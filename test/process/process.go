// Package process runs the child processes of the local clusterset harness
// (kube-proxy, CoreDNS, pod processes): each logs to a file, can be started
// inside a named network namespace, and dies with the harness even when the
// harness is killed without a chance to stop it.
package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options describes a child process.
type Options struct {
	// Name names the process in errors, e.g. "cluster-a kube-proxy".
	Name string
	// Argv is the command and its arguments.
	Argv []string
	// Netns, when set, runs the command in that named network namespace
	// (through `ip netns exec`, which also bind-mounts the files of
	// /etc/netns/<Netns>/ over /etc, e.g. a pod's resolv.conf).
	Netns string
	// Env is the environment (nil: the harness's own).
	Env []string
	// Log receives stdout and stderr; the file is appended to, after a
	// line naming the command.
	Log string
	// Stdout and Stderr, when set, receive the output instead of Log (a
	// container runtime's log writer); Log then only names it in errors.
	Stdout, Stderr io.Writer
	// Stdin is the process's standard input (nil: /dev/null).
	Stdin *os.File
}

// Process is a running child.
type Process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	stop    sync.Once
}

// Start starts a child process. It is put in its own process group so that
// a Ctrl-C in the terminal reaches only the harness, which then stops its
// children in order.
func Start(opts Options) (*Process, error) {
	if len(opts.Argv) == 0 {
		return nil, errors.New("process " + opts.Name + ": empty command")
	}
	argv := opts.Argv
	if opts.Netns != "" {
		argv = append([]string{"ip", "netns", "exec", opts.Netns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = opts.Env
	if opts.Stdin != nil {
		cmd.Stdin = opts.Stdin
	}
	if opts.Stdout != nil {
		cmd.Stdout, cmd.Stderr = opts.Stdout, opts.Stderr
		// A descendant that keeps the output open must not hold up Wait.
		cmd.WaitDelay = time.Second
	} else {
		logFile, err := os.OpenFile(opts.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer logFile.Close() // the child holds its own copy
		fmt.Fprintf(logFile, "=== %s %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
		cmd.Stdout, cmd.Stderr = logFile, logFile
	}
	// `ip netns exec` execs the command in place, so the signal set here
	// still reaches the real process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := startOnLockedThread(cmd); err != nil {
		return nil, fmt.Errorf("starting %s: %w", opts.Name, err)
	}
	p := &Process{name: opts.Name, logPath: opts.Log, cmd: cmd, exited: make(chan struct{})}
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

// startOnLockedThread forks from one thread that never exits: Pdeathsig
// fires when the forking *thread* ends (golang/go#27505), and the Go
// runtime ends threads whose goroutine exits while locked, as
// network-namespace code can.
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

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogFile returns the path of the process's log.
func (p *Process) LogFile() string { return p.logPath }

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitCode returns the exit code once Exited is closed (-1 if killed by a
// signal).
func (p *Process) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// Stop sends SIGTERM, then SIGKILL after grace, and waits for the exit. It
// is safe to call more than once and after the process has exited.
func (p *Process) Stop(grace time.Duration) {
	p.stop.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// Kill ends the process with SIGKILL, as a crash would (no graceful
// shutdown), and waits for the exit. Like Stop, it is safe to call more
// than once and after the process has exited.
func (p *Process) Kill() {
	p.stop.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}

// WaitReady calls probe every 100ms until it returns nil, giving up when the
// process exits, ctx ends or timeout passes. Its error names the process
// and carries the last lines of its log.
func (p *Process) WaitReady(parent context.Context, timeout time.Duration, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		probeCtx, probeCancel := context.WithTimeout(ctx, 5*time.Second)
		err := probe(probeCtx)
		probeCancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return p.Failure(fmt.Errorf("exited during start-up (%v)", p.waitErr))
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("%s: start-up interrupted: %w", p.name, parent.Err())
			}
			return p.Failure(fmt.Errorf("not ready after %v: %v", timeout, err))
		case <-ticker.C:
		}
	}
}

// Failure wraps err with the process name and the tail of its log.
func (p *Process) Failure(err error) error {
	out := fmt.Errorf("%s: %w\n--- last lines of %s ---\n%s", p.name, err, p.logPath, Tail(p.logPath, 20))
	if head := crashHead(p.logPath, 12); head != "" {
		// A Go crash's reason is at its head, which a long trace pushes
		// out of the last lines.
		out = fmt.Errorf("%w\n--- how it crashed ---\n%s", out, head)
	}
	return out
}

// crashHead returns the first lines of a Go crash in the file at path
// (from its "panic: " or "fatal error: " line), n of them; empty when it
// holds none.
func crashHead(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(data, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("panic: ")) || bytes.HasPrefix(l, []byte("fatal error: ")) {
			return string(bytes.Join(lines[i:min(i+n, len(lines))], []byte("\n")))
		}
	}
	return ""
}

// Tail returns the last n lines of the file at path.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// containerRun is one process of a container as the kubelet API sees it:
// what it ran with, where its output went, and whether it still runs.
type containerRun struct {
	id     string
	pid    int
	env    []string
	log    *containerLog
	exited <-chan struct{}
	// stdin is the write end of the process's standard input, for attach
	// (nil unless the container asks for stdin).
	stdin *os.File
}

func (r *containerRun) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// target is the pod and container a kubelet API request is about,
// resolved once when the request arrives.
type target struct {
	pod, uid, container string
	netns               string
	// run is the container's current process, previous the one before.
	run, previous *containerRun
}

// lookup resolves the request's pod (and container) among the pods this
// kubelet runs, answering 404 as a kubelet does when there is none.
func (k *Kubelet) lookup(w http.ResponseWriter, r *http.Request) (*target, bool) {
	ns, name, uid, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("uid"), r.PathValue("container")
	k.mu.Lock()
	var worker *podWorker
	for _, pw := range k.workers {
		pod, gone := pw.snapshot()
		if gone || pod.Namespace != ns || pod.Name != name || uid != "" && string(pod.UID) != uid {
			continue
		}
		// A pod being replaced (a StatefulSet's) runs next to its
		// successor for a moment: the newer one is meant.
		if worker == nil || pod.CreationTimestamp.After(worker.latest.CreationTimestamp.Time) {
			worker = pw
		}
	}
	k.mu.Unlock()
	if worker == nil {
		http.Error(w, fmt.Sprintf("pod does not exist: %s/%s", ns, name), http.StatusNotFound)
		return nil, false
	}
	worker.mu.Lock()
	defer worker.mu.Unlock()
	t := &target{pod: worker.latest.Name, uid: string(worker.uid), container: container, netns: worker.netns}
	if container == "" { // port-forward is about the pod
		return t, true
	}
	for _, c := range worker.containers {
		if c.spec.Name == container {
			t.run, t.previous = c.run, c.previous
			return t, true
		}
	}
	http.Error(w, fmt.Sprintf("container not found (%q)", container), http.StatusNotFound)
	return nil, false
}

// ExecInContainer runs cmd as a container runtime would: in the container
// process's network and mount namespaces (its resolv.conf, /etc/hosts and
// volumes, such as its service account token) with the container's
// environment. The file system is otherwise the host's, so a debug image's
// tools (curl, dig, nc, sh) are the host's.
func (t *target) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, stderr io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	if t.run == nil || !t.run.running() || t.netns == "" {
		return fmt.Errorf("container %s is not running", t.container)
	}
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	c := exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(t.run.pid), "--mount", "--net", "--"}, cmd...)...)
	c.Env, c.Dir = t.run.env, "/"
	attrs := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	if tty {
		err = execWithTTY(c, attrs, in, out, resize)
	} else {
		c.SysProcAttr = attrs
		if in != nil {
			c.Stdin = in
		}
		if out != nil {
			c.Stdout = out
		}
		if stderr != nil {
			c.Stderr = stderr
		}
		err = c.Run()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return utilexec.CodeExitError{Err: err, Code: exit.ExitCode()}
	}
	return err
}

func execWithTTY(c *exec.Cmd, attrs *syscall.SysProcAttr, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize) error {
	// A client with a terminal (kubectl exec -t) sends its size as soon as
	// the streams are open: the command starts at that size, so that it
	// never sees a 0x0 terminal. A client that sends none is not waited
	// for long.
	var initial *pty.Winsize
	select {
	case size, ok := <-resize:
		if ok {
			initial = &pty.Winsize{Rows: size.Height, Cols: size.Width}
		}
	case <-time.After(time.Second):
	}
	terminal, err := pty.StartWithAttrs(c, initial, attrs)
	if err != nil {
		return err
	}
	defer terminal.Close()
	go func() {
		for size := range resize {
			_ = pty.Setsize(terminal, &pty.Winsize{Rows: size.Height, Cols: size.Width})
		}
	}()
	if in != nil {
		go func() { _, _ = io.Copy(terminal, in) }()
	}
	if out != nil {
		// Ends with EIO once the command has exited and closed the terminal.
		_, _ = io.Copy(out, terminal)
	}
	return c.Wait()
}

// AttachContainer streams the container's output from now on (and its
// stdin, when the container has one) until the process exits or the
// client goes away.
func (t *target) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, stderr io.WriteCloser,
	_ bool, _ <-chan remotecommand.TerminalSize) error {
	if t.run == nil || !t.run.running() {
		return fmt.Errorf("container %s is not running", t.container)
	}
	gone := make(chan struct{})
	var once sync.Once
	a := &attachment{}
	if out != nil {
		a.stdout = goneOnError{out, gone, &once}
	}
	if stderr != nil {
		a.stderr = goneOnError{stderr, gone, &once}
	}
	defer t.run.log.attach(a)()
	if in != nil && t.run.stdin != nil {
		go func() { _, _ = io.Copy(t.run.stdin, in) }()
	}
	select {
	case <-ctx.Done():
	case <-t.run.exited:
	case <-gone:
	}
	return nil
}

// goneOnError notices a client that stopped reading.
type goneOnError struct {
	w    io.Writer
	gone chan struct{}
	once *sync.Once
}

func (g goneOnError) Write(p []byte) (int, error) {
	n, err := g.w.Write(p)
	if err != nil {
		g.once.Do(func() { close(g.gone) })
	}
	return n, err
}

// PortForward connects to port on the pod's loopback, as container
// runtimes do, and copies both ways.
func (t *target) PortForward(_ context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	if t.netns == "" {
		return fmt.Errorf("pod %s has no network", t.pod)
	}
	conn, err := netns.Dial(t.netns, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), 5*time.Second)
	if err != nil {
		return fmt.Errorf("pod %s port %d: %w", t.pod, port, err)
	}
	defer conn.Close()
	// As container runtimes do, the forward ends when the pod's side has
	// said all it will; closing both then ends the other copy.
	go func() {
		_, _ = io.Copy(conn, stream)
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
	}()
	_, _ = io.Copy(stream, conn)
	return nil
}

// serveContainerLogs answers `kubectl logs` with the kubelet's own log
// reader over the container's CRI log: follow, previous, timestamps,
// tailLines, limitBytes, sinceSeconds and sinceTime as a kubelet takes them.
func (k *Kubelet) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	t, ok := k.lookup(w, r)
	if !ok {
		return
	}
	opts, previous, err := logOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	run := t.run
	switch {
	case previous && t.previous == nil:
		http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", t.container, t.pod), http.StatusBadRequest)
		return
	case previous:
		run = t.previous
	case run == nil:
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", t.container, t.pod), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	out := flushWriter{w: w, rc: http.NewResponseController(w)}
	if err := logs.ReadLogs(r.Context(), run.log.path, run.id, opts, runState{run: run}, out, out); err != nil && r.Context().Err() == nil {
		k.log.Printf("logs of %s/%s: %v", t.pod, t.container, err)
	}
}

func logOptions(r *http.Request) (opts *logs.LogOptions, previous bool, err error) {
	q := r.URL.Query()
	flag := func(name string) (bool, error) {
		if v := q.Get(name); v != "" {
			return strconv.ParseBool(v)
		}
		return false, nil
	}
	count := func(name string) (*int64, error) {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%s: %q is not a non-negative integer", name, v)
			}
			return &n, nil
		}
		return nil, nil
	}
	opts = &logs.LogOptions{}
	if opts.Follow, err = flag("follow"); err != nil {
		return nil, false, err
	}
	if opts.Timestamp, err = flag("timestamps"); err != nil {
		return nil, false, err
	}
	if previous, err = flag("previous"); err != nil {
		return nil, false, err
	}
	if opts.TailLines, err = count("tailLines"); err != nil {
		return nil, false, err
	}
	if opts.LimitBytes, err = count("limitBytes"); err != nil {
		return nil, false, err
	}
	since, err := count("sinceSeconds")
	if err != nil {
		return nil, false, err
	}
	if since != nil {
		opts.Since = time.Now().Add(-time.Duration(*since) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		if opts.Since, err = time.Parse(time.RFC3339, v); err != nil {
			return nil, false, fmt.Errorf("sinceTime: %w", err)
		}
	}
	return opts, previous, nil
}

// flushWriter sends each piece of a followed log as it comes.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}

// runState answers the one question the kubelet's log reader asks the
// container runtime while following: does the container still run? It
// calls nothing else of the runtime service (left nil).
type runState struct {
	internalapi.RuntimeService
	run *containerRun
}

func (s runState) ContainerStatus(context.Context, string, bool) (*runtimeapi.ContainerStatusResponse, error) {
	state := runtimeapi.ContainerState_CONTAINER_EXITED
	if s.run.running() {
		state = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: s.run.id, State: state}}, nil
}

package fakekubelet

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

// container is one container of a pod and the process that runs it now.
type container struct {
	spec       v1.Container
	proc       *process.Process
	stopProber context.CancelFunc
	startedAt  metav1.Time
	restarts   int32
	// probeReady is the readiness probe's verdict for the current process.
	probeReady atomic.Bool
	// last is how the previous process ended, once one has.
	last *v1.ContainerStateTerminated
	// run and previous are the current and the previous process for the
	// kubelet API, guarded by the pod worker's mu.
	run, previous *containerRun
}

// begin records a freshly started process.
func (c *container) begin(p *process.Process) {
	c.proc = p
	c.startedAt = metav1.Now()
	c.probeReady.Store(false)
}

func (c *container) running() bool {
	if c.proc == nil {
		return false
	}
	select {
	case <-c.proc.Exited():
		return false
	default:
		return true
	}
}

// ready follows the process, and its readiness probe when it has one.
func (c *container) ready() bool {
	if !c.running() {
		return false
	}
	if p := c.spec.ReadinessProbe; p != nil && (p.HTTPGet != nil || p.TCPSocket != nil) {
		return c.probeReady.Load()
	}
	return true
}

// exited returns how the current process ended, or nil while it runs.
func (c *container) exited() *v1.ContainerStateTerminated {
	if c.proc == nil || c.running() {
		return nil
	}
	code := c.proc.ExitCode()
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	return &v1.ContainerStateTerminated{
		ExitCode:    int32(code),
		Reason:      reason,
		StartedAt:   c.startedAt,
		FinishedAt:  c.startedAt, // the exit time is not tracked; keeps status stable
		ContainerID: c.id(),
	}
}

// willRestart reports whether the restart policy restarts the exited
// process.
func (c *container) willRestart(policy v1.RestartPolicy) bool {
	t := c.exited()
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return t != nil && t.ExitCode != 0
	default:
		return true
	}
}

// dueForRestart reports whether the exited process should restart now: the
// back-off doubles from one second with each restart, as CrashLoopBackOff's
// does (capped lower here).
func (c *container) dueForRestart(policy v1.RestartPolicy) bool {
	if c.running() || !c.willRestart(policy) {
		return false
	}
	backoff := min(time.Second<<min(c.restarts, 4), maxBackoff)
	return time.Since(c.startedAt.Time) > backoff
}

func (c *container) stop(grace time.Duration) {
	if c.stopProber != nil {
		c.stopProber()
	}
	c.proc.Stop(grace)
}

func (c *container) id() string {
	if c.proc == nil {
		return ""
	}
	return fmt.Sprintf("fakekubelet://%d", c.proc.Pid())
}

// status is the container's entry in the pod status.
func (c *container) status(policy v1.RestartPolicy) v1.ContainerStatus {
	st := v1.ContainerStatus{
		Name:         c.spec.Name,
		Image:        c.spec.Image,
		ImageID:      "fakekubelet://" + c.spec.Image,
		RestartCount: c.restarts,
	}
	started := c.running()
	st.Started = &started
	st.Ready = c.ready()
	switch t := c.exited(); {
	case c.proc == nil:
		st.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
	case t == nil:
		st.ContainerID = c.id()
		st.State.Running = &v1.ContainerStateRunning{StartedAt: c.startedAt}
	case c.willRestart(policy):
		st.State.Waiting = &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		st.LastTerminationState.Terminated = t
		return st
	default:
		st.ContainerID = c.id()
		st.State.Terminated = t
	}
	if c.last != nil {
		st.LastTerminationState.Terminated = c.last
	}
	return st
}

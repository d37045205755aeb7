package fakekubelet

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/podimage"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

const (
	// tick bounds how long a restart or a status change waits when nothing
	// wakes the worker.
	tick = 500 * time.Millisecond
	// maxGrace caps a pod's termination grace period: pod processes here
	// exit on SIGTERM at once, and a slow delete only slows tests down.
	maxGrace = 5 * time.Second
	// maxBackoff caps the delay before restarting a container that exited.
	maxBackoff = 10 * time.Second
)

// podWorker owns one pod from its first sight to its deletion, like the
// real kubelet's pod workers: the informer only hands it the latest Pod.
type podWorker struct {
	k   *Kubelet
	uid types.UID

	mu     sync.Mutex
	latest *v1.Pod
	gone   bool
	wake   chan struct{}
	// netns and each container's run and previous are what the kubelet
	// API reads; run writes them under mu.
	netns string

	// Owned by run.
	sandbox    *sandbox
	sandboxErr string
	volumes    map[string]string // prepared volumes' directories by name
	containers []*container
	startTime  metav1.Time
	terminated bool
	conditions map[v1.PodConditionType]v1.PodCondition
	written    *v1.PodStatus
}

func newPodWorker(k *Kubelet, pod *v1.Pod) *podWorker {
	w := &podWorker{k: k, uid: pod.UID, latest: pod, wake: make(chan struct{}, 1), conditions: map[v1.PodConditionType]v1.PodCondition{}}
	for _, c := range pod.Spec.Containers {
		w.containers = append(w.containers, &container{spec: c})
	}
	return w
}

// update records the latest Pod (gone: it was removed from the API) and
// wakes the worker.
func (w *podWorker) update(pod *v1.Pod, gone bool) {
	w.mu.Lock()
	w.latest, w.gone = pod, w.gone || gone
	w.mu.Unlock()
	w.poke()
}

func (w *podWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *podWorker) snapshot() (*v1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest, w.gone
}

func (w *podWorker) run(ctx context.Context) {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		pod, gone := w.snapshot()
		switch {
		case gone:
			// Force-deleted by someone else: only the processes remain.
			w.teardown(pod, 0)
			return
		case pod.DeletionTimestamp != nil:
			w.teardown(pod, grace(pod))
			w.finishDeletion(ctx, pod)
			return
		case !w.terminated:
			w.runPod(ctx, pod)
		}
		w.syncStatus(ctx, pod)
		select {
		case <-ctx.Done():
			w.teardown(pod, time.Second)
			return
		case <-w.wake:
		case <-ticker.C:
		}
	}
}

// runPod makes the sandbox, starts containers that are due to (re)start and
// ends the pod when no container will run again.
func (w *podWorker) runPod(ctx context.Context, pod *v1.Pod) {
	if w.sandbox == nil {
		s, err := w.k.createSandbox(pod)
		if err != nil {
			w.sandboxErr = err.Error()
			w.k.log.Printf("pod %s/%s: creating its network: %v", pod.Namespace, pod.Name, err)
			return
		}
		w.sandbox, w.sandboxErr = s, ""
		w.mu.Lock()
		w.netns = s.netns
		w.mu.Unlock()
		w.startTime = metav1.Now()
		w.k.log.Printf("pod %s/%s: network namespace %s, IPs %v", pod.Namespace, pod.Name, s.netns, s.ips)
	}
	if w.volumes == nil {
		volumes, err := w.k.prepareVolumes(ctx, pod)
		if err != nil {
			w.sandboxErr = err.Error()
			w.k.log.Printf("pod %s/%s: %v", pod.Namespace, pod.Name, err)
			return
		}
		w.volumes, w.sandboxErr = volumes, ""
	}
	done := 0
	for _, c := range w.containers {
		switch {
		case c.running():
			continue
		case c.proc == nil || c.dueForRestart(pod.Spec.RestartPolicy):
			if err := w.start(ctx, pod, c); err != nil {
				w.k.log.Printf("pod %s/%s: starting container %s: %v", pod.Namespace, pod.Name, c.spec.Name, err)
			}
		case !c.willRestart(pod.Spec.RestartPolicy):
			done++
		}
	}
	if done == len(w.containers) {
		// Every container has finished for good: the pod is Succeeded or
		// Failed, and its network goes, as a real kubelet's sandbox does.
		w.terminated = true
		w.stopAll(0)
		w.k.destroySandbox(w.sandbox)
		w.mu.Lock()
		w.netns = ""
		w.mu.Unlock()
		w.k.log.Printf("pod %s/%s: terminated", pod.Namespace, pod.Name)
	}
}

// start runs container c as a process in the pod's network namespace,
// its output going to a CRI log of its own (one per restart, as a
// runtime's) and to attached clients.
func (w *podWorker) start(ctx context.Context, pod *v1.Pod, c *container) error {
	args := append(append([]string{}, c.spec.Command...), c.spec.Args...)
	// The container's environment, which `kubectl exec` also gets; the
	// process itself also gets podimage's variables saying what to play.
	path := os.Getenv("PATH")
	if dir := w.k.cfg.ImageBinDir; dir != "" {
		path = dir + string(os.PathListSeparator) + path
	}
	containerEnv := append([]string{"PATH=" + path, "HOSTNAME=" + hostname(pod)}, w.containerEnv(pod, c.spec)...)
	image, err := podimage.Env(c.spec.Image, args)
	if err != nil {
		return err
	}
	mountEnv, err := podimage.MountEnv(mounts(c.spec, w.volumes))
	if err != nil {
		return err
	}
	env := append(append(image, mountEnv), containerEnv...)
	restart := c.restarts
	if c.proc != nil {
		restart++
	}
	clog, err := newContainerLog(containerLogPath(w.k.cfg.LogDir, pod, c.spec.Name, restart))
	if err != nil {
		return err
	}
	stdout, stderr := clog.stream("stdout"), clog.stream("stderr")
	var stdin, stdinWriter *os.File
	if c.spec.Stdin {
		if stdin, stdinWriter, err = os.Pipe(); err != nil {
			clog.close()
			return err
		}
	}
	proc, err := process.Start(process.Options{
		Name:   fmt.Sprintf("pod %s/%s container %s", pod.Namespace, pod.Name, c.spec.Name),
		Argv:   []string{w.k.cfg.Executable},
		Netns:  w.sandbox.netns,
		Env:    env,
		Log:    clog.path,
		Stdout: stdout,
		Stderr: stderr,
		Stdin:  stdin,
	})
	if stdin != nil {
		stdin.Close() // the process has its own copy
	}
	if err != nil {
		clog.close()
		if stdinWriter != nil {
			stdinWriter.Close()
		}
		return err
	}
	if c.proc != nil {
		c.last = c.exited()
		c.restarts++
	}
	c.begin(proc)
	w.mu.Lock()
	c.previous = c.run
	c.run = &containerRun{id: c.id(), pid: proc.Pid(), env: containerEnv, log: clog, exited: proc.Exited(), stdin: stdinWriter}
	w.mu.Unlock()
	proberCtx, stopProber := context.WithCancel(ctx)
	c.stopProber = stopProber
	go func() {
		<-proc.Exited()
		// Exited follows the end of the output copies: nothing writes
		// the streams any more.
		stdout.flush()
		stderr.flush()
		clog.close()
		if stdinWriter != nil {
			stdinWriter.Close()
		}
		stopProber()
		w.poke()
	}()
	if probe := c.spec.ReadinessProbe; probe != nil {
		go w.k.runProber(proberCtx, probe, w.sandbox.ips[0].String(), c, w.poke)
	}
	return nil
}

// hostname is the pod's host name: spec.hostname when set (a StatefulSet's
// pods have theirs), else its name, as a kubelet gives it.
func hostname(pod *v1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	if len(pod.Name) > 63 {
		return pod.Name[:63]
	}
	return pod.Name
}

// masterServiceEnv is what a kubelet tells every container about the
// `kubernetes` Service (in-cluster clients find the apiserver by it),
// unless the pod is in the host network (never, here).
func (k *Kubelet) masterServiceEnv(pod *v1.Pod) []string {
	svc, err := k.cfg.Client.CoreV1().Services(metav1.NamespaceDefault).Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil || len(svc.Spec.Ports) == 0 || svc.Spec.ClusterIP == "" {
		k.log.Printf("pod %s/%s: no kubernetes Service for its environment (%v)", pod.Namespace, pod.Name, err)
		return nil
	}
	host, port := svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port)
	url := "tcp://" + net.JoinHostPort(host, port)
	return []string{
		"KUBERNETES_SERVICE_HOST=" + host,
		"KUBERNETES_SERVICE_PORT=" + port,
		"KUBERNETES_SERVICE_PORT_HTTPS=" + port,
		"KUBERNETES_PORT=" + url,
		"KUBERNETES_PORT_" + port + "_TCP=" + url,
		"KUBERNETES_PORT_" + port + "_TCP_PROTO=tcp",
		"KUBERNETES_PORT_" + port + "_TCP_PORT=" + port,
		"KUBERNETES_PORT_" + port + "_TCP_ADDR=" + host,
	}
}

// containerEnv is the container's environment: its literal values and the
// downward-API fields pods most often use, plus what the images need.
func (w *podWorker) containerEnv(pod *v1.Pod, c v1.Container) []string {
	env := w.k.masterServiceEnv(pod)
	env = append(env,
		podimage.PodNameEnv+"="+pod.Name,
		"POD_NAMESPACE="+pod.Namespace,
		"POD_IP="+w.sandbox.ips[0].String(),
		"NODE_NAME="+w.k.cfg.NodeName,
		"CLUSTER_NAME="+w.k.cfg.ClusterName,
	)
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				value = pod.Name
			case "metadata.namespace":
				value = pod.Namespace
			case "status.podIP":
				value = w.sandbox.ips[0].String()
			case "status.podIPs":
				var ips []string
				for _, ip := range w.sandbox.ips {
					ips = append(ips, ip.String())
				}
				value = strings.Join(ips, ",")
			case "spec.nodeName":
				value = w.k.cfg.NodeName
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return env
}

// teardown stops every process and removes the network.
func (w *podWorker) teardown(pod *v1.Pod, grace time.Duration) {
	w.stopAll(grace)
	if w.sandbox != nil && !w.terminated {
		w.k.destroySandbox(w.sandbox)
	}
	w.sandbox = nil
	w.mu.Lock()
	w.netns = ""
	w.mu.Unlock()
	if pod != nil && w.volumes != nil {
		_ = os.RemoveAll(filepath.Dir(w.k.volumeDir(pod)))
		w.volumes = nil
	}
	if pod != nil {
		w.k.log.Printf("pod %s/%s: stopped", pod.Namespace, pod.Name)
	}
}

func (w *podWorker) stopAll(grace time.Duration) {
	var wg sync.WaitGroup
	for _, c := range w.containers {
		if c.proc != nil {
			wg.Go(func() { c.stop(grace) })
		}
	}
	wg.Wait()
}

// finishDeletion removes the pod object once its processes are gone, as
// the kubelet's status manager does with a zero-grace delete.
func (w *podWorker) finishDeletion(ctx context.Context, pod *v1.Pod) {
	zero := int64(0)
	err := w.k.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.k.log.Printf("pod %s/%s: finishing deletion: %v", pod.Namespace, pod.Name, err)
		return
	}
	w.k.log.Printf("pod %s/%s: deleted", pod.Namespace, pod.Name)
}

// grace is how long the pod's processes get between SIGTERM and SIGKILL.
func grace(pod *v1.Pod) time.Duration {
	seconds := int64(v1.DefaultTerminationGracePeriodSeconds)
	if pod.DeletionGracePeriodSeconds != nil {
		seconds = *pod.DeletionGracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		seconds = *pod.Spec.TerminationGracePeriodSeconds
	}
	return min(time.Duration(seconds)*time.Second, maxGrace)
}

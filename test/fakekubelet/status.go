package fakekubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podStatus is what the kubelet reports for pod now. Times come from the
// worker's state, so an unchanged pod yields an identical status and no
// write.
func (w *podWorker) podStatus(pod *v1.Pod) v1.PodStatus {
	st := v1.PodStatus{
		// The apiserver sets the QoS class at creation and refuses changes.
		QOSClass:           pod.Status.QOSClass,
		ObservedGeneration: pod.Generation,
		HostIP:             w.k.cfg.NodeIPs[0],
		Phase:              v1.PodPending,
	}
	for _, ip := range w.k.cfg.NodeIPs {
		st.HostIPs = append(st.HostIPs, v1.HostIP{IP: ip})
	}
	if w.sandbox != nil {
		st.StartTime = &w.startTime
		st.PodIP = w.sandbox.ips[0].String()
		for _, ip := range w.sandbox.ips {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip.String()})
		}
	}
	allReady, anyRunning, allSucceeded := true, false, true
	for _, c := range w.containers {
		cs := c.status(pod.Spec.RestartPolicy)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		allReady = allReady && cs.Ready
		anyRunning = anyRunning || cs.State.Running != nil
		allSucceeded = allSucceeded && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
	}
	switch {
	case w.terminated && allSucceeded:
		st.Phase = v1.PodSucceeded
	case w.terminated:
		st.Phase = v1.PodFailed
	case anyRunning || w.sandbox != nil && w.started():
		st.Phase = v1.PodRunning
	}
	if w.sandboxErr != "" {
		st.Message = w.sandboxErr
	}
	ready := allReady && !w.terminated
	st.Conditions = []v1.PodCondition{
		w.condition(v1.PodReadyToStartContainers, w.sandbox != nil && !w.terminated),
		w.condition(v1.PodInitialized, true),
		w.condition(v1.ContainersReady, ready),
		w.condition(v1.PodReady, ready),
		w.condition(v1.PodScheduled, true),
	}
	// Conditions others own (e.g. DisruptionTarget) stay.
	for _, c := range pod.Status.Conditions {
		if _, ours := w.conditions[c.Type]; !ours {
			st.Conditions = append(st.Conditions, c)
		}
	}
	return st
}

// started reports whether every container has been started once.
func (w *podWorker) started() bool {
	for _, c := range w.containers {
		if c.proc == nil {
			return false
		}
	}
	return true
}

// condition returns a condition, keeping its transition time while its
// status does not change.
func (w *podWorker) condition(t v1.PodConditionType, ok bool) v1.PodCondition {
	status := v1.ConditionFalse
	if ok {
		status = v1.ConditionTrue
	}
	prev, seen := w.conditions[t]
	if seen && prev.Status == status {
		return prev
	}
	c := v1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.Now()}
	w.conditions[t] = c
	return c
}

// syncStatus writes the pod's status when it differs from what was last
// written.
func (w *podWorker) syncStatus(ctx context.Context, pod *v1.Pod) {
	st := w.podStatus(pod)
	if w.written != nil && apiequality.Semantic.DeepEqual(*w.written, st) {
		return
	}
	pods := w.k.cfg.Client.CoreV1().Pods(pod.Namespace)
	update := pod.DeepCopy()
	for range 5 {
		update.Status = st
		_, err := pods.UpdateStatus(ctx, update, metav1.UpdateOptions{})
		switch {
		case err == nil:
			w.written = &st
			return
		case apierrors.IsNotFound(err) || ctx.Err() != nil:
			return
		case apierrors.IsConflict(err):
			// The informer's copy is stale; write over the current one.
			if update, err = pods.Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
				return
			}
			if update.UID != pod.UID {
				return
			}
		default:
			w.k.log.Printf("pod %s/%s: updating status: %v", pod.Namespace, pod.Name, err)
			return
		}
	}
}

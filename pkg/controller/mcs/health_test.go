package mcs

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
)

// A bound address is not ready until its TCP port answers, and again
// after FailureThreshold failures in a row; each change of verdict asks
// for the catalog to be resolved again.
func TestHealthChecker(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	var changes atomic.Int32
	h := newHealthChecker(func() { changes.Add(1) })
	b := &catalogv1alpha1.ServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "vms"},
		Spec: catalogv1alpha1.ServiceBindingSpec{
			Endpoints:   []catalogv1alpha1.BoundEndpoint{{Address: "127.0.0.1"}},
			Ports:       []catalogv1alpha1.BoundPort{{Name: "admin", Port: 9}, {Name: "http", Port: 80, TargetPort: int32(port)}},
			HealthCheck: &catalogv1alpha1.HealthCheck{Port: "http", FailureThreshold: 2},
		},
	}
	targets := healthTargets(b)
	if len(targets) != 1 || targets[0].Port != int32(port) || targets[0].Period != 10*time.Second || targets[0].Threshold != 2 {
		t.Fatalf("targets %+v", targets)
	}
	targets[0].Period = 0
	h.set(targets)
	if h.healthy("team-a/vms", "127.0.0.1") {
		t.Fatal("healthy before any probe")
	}
	probe := func() {
		h.probeDue(context.Background())
		deadline := time.Now().Add(5 * time.Second)
		for {
			h.mu.Lock()
			busy := h.state["team-a/vms/127.0.0.1"].inflight
			h.mu.Unlock()
			if !busy {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("probe never finished")
			}
			time.Sleep(time.Millisecond)
		}
	}
	probe()
	if !h.healthy("team-a/vms", "127.0.0.1") || changes.Load() != 1 {
		t.Fatalf("after a probe of an open port: healthy %v, %d changes", h.healthy("team-a/vms", "127.0.0.1"), changes.Load())
	}
	l.Close()
	probe()
	if !h.healthy("team-a/vms", "127.0.0.1") {
		t.Error("unhealthy after one failure, threshold 2")
	}
	probe()
	if h.healthy("team-a/vms", "127.0.0.1") || changes.Load() != 2 {
		t.Errorf("after two failures: healthy %v, %d changes", h.healthy("team-a/vms", "127.0.0.1"), changes.Load())
	}
	if st := h.status("team-a/vms", b); len(st) != 1 || st[0].Healthy || st[0].Message == "" || st[0].LastTransitionTime.IsZero() {
		t.Errorf("status %+v", st)
	}
	// A binding that goes takes its state with it.
	h.set(nil)
	if h.healthy("team-a/vms", "127.0.0.1") || len(h.state) != 0 {
		t.Error("state of a removed target kept")
	}
}

package catalogmodel

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
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
	h := NewChecker(func() { changes.Add(1) })
	b := &catalogv1alpha1.ServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "vms"},
		Spec: catalogv1alpha1.ServiceBindingSpec{
			Endpoints:   []catalogv1alpha1.BoundEndpoint{{Address: "127.0.0.1"}},
			Ports:       []catalogv1alpha1.BoundPort{{Name: "admin", Port: 9}, {Name: "http", Port: 80, TargetPort: int32(port)}},
			HealthCheck: &catalogv1alpha1.HealthCheck{Port: "http", FailureThreshold: 2},
		},
	}
	targets := targetsOf(b)
	if len(targets) != 1 || targets[0].Port != int32(port) || targets[0].Period != 10*time.Second || targets[0].Threshold != 2 {
		t.Fatalf("targets %+v", targets)
	}
	targets[0].Period, targets[0].Timeout = 0, 100*time.Millisecond
	h.Set(targets)
	if h.Probes()["team-a/vms/127.0.0.1"].Healthy {
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
	if !h.Probes()["team-a/vms/127.0.0.1"].Healthy || changes.Load() != 1 {
		t.Fatalf("after a probe of an open port: healthy %v, %d changes", h.Probes()["team-a/vms/127.0.0.1"].Healthy, changes.Load())
	}
	l.Close()
	probe()
	if !h.Probes()["team-a/vms/127.0.0.1"].Healthy {
		t.Error("unhealthy after one failure, threshold 2")
	}
	probe()
	if h.Probes()["team-a/vms/127.0.0.1"].Healthy || changes.Load() != 2 {
		t.Errorf("after two failures: healthy %v, %d changes", h.Probes()["team-a/vms/127.0.0.1"].Healthy, changes.Load())
	}
	if st, unprobed, _ := endpointHealth(b, h.Probes(), nil); len(st) != 1 || st[0].Healthy || st[0].Message == "" || st[0].LastTransitionTime.IsZero() || unprobed != 0 {
		t.Errorf("status %+v, %d unprobed", st, unprobed)
	}
	// A binding that goes takes its state with it.
	h.Set(nil)
	if h.Probes()["team-a/vms/127.0.0.1"].Healthy || len(h.state) != 0 {
		t.Error("state of a removed target kept")
	}
}

// A team's bindings, however many and however large, have at most the
// per-team limit of addresses probed, and all teams together the global
// one; the oldest bindings keep their probes, whatever order the
// bindings are listed in.
func TestLimitHealthTargets(t *testing.T) {
	type binding struct {
		name  string // team/name
		age   int
		addrs []string
	}
	targetsOf := func(bs []binding) []Target {
		var out []Target
		for _, b := range bs {
			team, _, _ := strings.Cut(b.name, "/")
			for _, a := range b.addrs {
				out = append(out, Target{Binding: b.name, Team: team, Created: time.Unix(int64(b.age), 0), Address: a})
			}
		}
		return out
	}
	for _, tc := range []struct {
		name           string
		bindings       []binding
		perTeam, total int
		// probed are the ids probed; unprobed maps the others to the
		// limit that stopped them ("team" or "total").
		probed   []string
		unprobed map[string]string
	}{{
		name: "under the limits",
		bindings: []binding{
			{"team-a/vms", 0, []string{"192.0.2.1", "192.0.2.2"}},
			{"team-b/vms", 1, []string{"192.0.2.1"}},
		},
		perTeam: 2, total: 3,
		probed: []string{"team-a/vms/192.0.2.1", "team-a/vms/192.0.2.2", "team-b/vms/192.0.2.1"},
	}, {
		// A sweep of a network, split over bindings: the per-team limit
		// holds across them, and the older binding keeps its probes.
		name: "one team's sweep",
		bindings: []binding{
			{"team-a/sweep-2", 2, []string{"10.9.0.3", "10.9.0.4"}},
			{"team-a/sweep-1", 1, []string{"10.9.0.1", "10.9.0.2"}},
			{"team-a/db", 0, []string{"192.0.2.10"}},
		},
		perTeam: 3, total: 100,
		probed:   []string{"team-a/db/192.0.2.10", "team-a/sweep-1/10.9.0.1", "team-a/sweep-1/10.9.0.2"},
		unprobed: map[string]string{"team-a/sweep-2/10.9.0.3": "team", "team-a/sweep-2/10.9.0.4": "team"},
	}, {
		// Many teams: the global limit holds, oldest first; a team under
		// its own limit is stopped by the global one.
		name: "many teams",
		bindings: []binding{
			{"team-a/vms", 0, []string{"192.0.2.1", "192.0.2.2"}},
			{"team-b/vms", 1, []string{"192.0.2.3", "192.0.2.4"}},
			{"team-c/vms", 2, []string{"192.0.2.5"}},
		},
		perTeam: 2, total: 3,
		probed:   []string{"team-a/vms/192.0.2.1", "team-a/vms/192.0.2.2", "team-b/vms/192.0.2.3"},
		unprobed: map[string]string{"team-b/vms/192.0.2.4": "total", "team-c/vms/192.0.2.5": "total"},
	}, {
		name:     "an address listed twice counts once",
		bindings: []binding{{"team-a/vms", 0, []string{"192.0.2.1", "192.0.2.1", "192.0.2.2"}}},
		perTeam:  2, total: 2,
		probed: []string{"team-a/vms/192.0.2.1", "team-a/vms/192.0.2.2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, reversed := range []bool{false, true} {
				bs := slices.Clone(tc.bindings)
				if reversed {
					slices.Reverse(bs)
				}
				probed, unprobed := limitTargets(targetsOf(bs), tc.perTeam, tc.total)
				var ids []string
				for _, p := range probed {
					ids = append(ids, p.ID())
				}
				slices.Sort(ids)
				if !slices.Equal(ids, tc.probed) {
					t.Errorf("reversed %v: probed %v, want %v", reversed, ids, tc.probed)
				}
				if len(unprobed) != len(tc.unprobed) {
					t.Errorf("reversed %v: unprobed %v, want %v", reversed, unprobed, tc.unprobed)
				}
				for id, limit := range tc.unprobed {
					want := map[string]string{"team": "limit per team", "total": "probes " + strconv.Itoa(tc.total) + " addresses"}[limit]
					if !strings.Contains(unprobed[id], want) {
						t.Errorf("reversed %v: %s not probed because %q, want the %s limit", reversed, id, unprobed[id], limit)
					}
				}
			}
		})
	}
}

// The status a team reads says whether an address answers and nothing
// of how its dial failed, nor when: a refused connection is recorded
// at the probe's timeout, as a silent address is, so that a team cannot
// map which hosts exist behind the controller.
func TestHealthStatusSaysOnlyWhetherAnAddressAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // refused from now on
	h := NewChecker(func() {})
	b := &catalogv1alpha1.ServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "scan"},
		Spec: catalogv1alpha1.ServiceBindingSpec{
			Endpoints:   []catalogv1alpha1.BoundEndpoint{{Address: "127.0.0.1"}},
			Ports:       []catalogv1alpha1.BoundPort{{Name: "ssh", Port: int32(port)}},
			HealthCheck: &catalogv1alpha1.HealthCheck{FailureThreshold: 1},
		},
	}
	targets := targetsOf(b)
	const timeout = 300 * time.Millisecond
	targets[0].Period, targets[0].Timeout = time.Hour, timeout
	h.Set(targets)
	start := time.Now()
	h.probeDue(context.Background())
	for {
		h.mu.Lock()
		busy := h.state["team-a/scan/127.0.0.1"].inflight
		h.mu.Unlock()
		if !busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if took := time.Since(start); took < timeout {
		t.Errorf("a refused connection was recorded after %v, before the timeout %v: the timing tells it from a silent address", took, timeout)
	}
	st, _, _ := endpointHealth(b, h.Probes(), nil)
	want := "TCP port " + strconv.Itoa(port) + " not answering"
	if len(st) != 1 || st[0].Healthy || st[0].Message != want {
		t.Errorf("status %+v, want unhealthy with message %q only", st, want)
	}
	for _, leak := range []string{"refused", "dial", "connect", "timeout"} {
		if len(st) == 1 && strings.Contains(st[0].Message, leak) {
			t.Errorf("the status tells how the dial failed: %q", st[0].Message)
			break
		}
	}
}

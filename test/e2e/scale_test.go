package e2e

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// sliceWatch records when each address became ready, or stopped being
// ready, in the EndpointSlices a label selector picks: a Service's own in
// the source cluster (the moment the endpoint change happened), or the
// MCS slices the controller wrote into the importing cluster.
type sliceWatch struct {
	mu      sync.Mutex
	slices  map[string]map[string]bool // slice name -> ready addresses
	ready   map[string]bool
	added   map[string]time.Time
	removed map[string]time.Time
}

func watchSlices(t *testing.T, c *clusterset.Cluster, ns, selector string) *sliceWatch {
	t.Helper()
	w, err := c.API.Client().DiscoveryV1().EndpointSlices(ns).Watch(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	sw := &sliceWatch{slices: map[string]map[string]bool{}, ready: map[string]bool{}, added: map[string]time.Time{}, removed: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			slice, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			now := time.Now()
			addrs := map[string]bool{}
			if ev.Type != watch.Deleted {
				for _, e := range slice.Endpoints {
					if e.Conditions.Ready != nil && *e.Conditions.Ready {
						for _, a := range e.Addresses {
							addrs[a] = true
						}
					}
				}
			}
			sw.mu.Lock()
			sw.slices[slice.Name] = addrs
			ready := map[string]bool{}
			for _, as := range sw.slices {
				for a := range as {
					ready[a] = true
				}
			}
			for a := range ready {
				if !sw.ready[a] {
					sw.added[a] = now
				}
			}
			for a := range sw.ready {
				if !ready[a] {
					sw.removed[a] = now
				}
			}
			sw.ready = ready
			sw.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return sw
}

func (sw *sliceWatch) at(ip string, added bool) (time.Time, bool) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if added {
		at, ok := sw.added[ip]
		return at, ok
	}
	at, ok := sw.removed[ip]
	return at, ok
}

// rulesFollow polls B's node ruleset until ip is there (or gone) and
// returns the time it was first seen so.
func rulesFollow(t *testing.T, node, ip string, present bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		rs, err := ruleset(node)
		now := time.Now()
		if err == nil && hasIP(rs, ip) == present {
			return now
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("ruleset of %s: %s never became present=%v", node, ip, present)
	return time.Time{}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func (s *suite) testScaleLatency(t *testing.T) {
	sp := s.space(t, "e2e-scale")
	sp.service(s.a, "web", nil)
	base := sp.echoPods(s.a, "web", "web-0")
	client := sp.client(s.b, "client")
	sw := watchSlices(t, s.a, sp.name, discoveryv1.LabelServiceName+"=web")
	imported := watchSlices(t, s.b, sp.name, mcsv1beta1.LabelServiceName+"=web")
	sp.export(s.a, "web")
	vip := sp.vip(s.b, "web")
	node := s.b.Nodes[0].Netns
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 10, []string{"web-0"})

	const pods = 26 // 26 scale-ups and 26 scale-downs
	var latencies, toSlice []time.Duration
	measure := func(name, ip string, added bool) {
		seen := rulesFollow(t, node, ip, added)
		var changed, mirrored time.Time
		eventually(t, 10*time.Second, "the slice watches to see "+name, func() (bool, string) {
			at, ok := sw.at(ip, added)
			changed = at
			at2, ok2 := imported.at(ip, added)
			mirrored = at2
			return ok && ok2, ""
		})
		latencies = append(latencies, seen.Sub(changed))
		toSlice = append(toSlice, mirrored.Sub(changed))
	}
	ips := map[string]string{}
	for i := 1; i <= pods; i++ {
		name := fmt.Sprintf("web-%d", i)
		ip := sp.echoPods(s.a, "web", name)[name]
		ips[name] = ip
		measure(name, ip, true)
	}
	want := append(podNames(ips), "web-0")
	slices.Sort(want)
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 200, want)
	for i := 1; i <= pods; i++ {
		name := fmt.Sprintf("web-%d", i)
		if err := s.a.API.Client().CoreV1().Pods(sp.name).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		measure(name, ips[name], false)
	}
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 20, []string{"web-0"})
	waitRules(t, node, 5*time.Second, []string{vip, base["web-0"]}, nil)

	slices.Sort(latencies)
	slices.Sort(toSlice)
	// The controller's share: A's slice changed -> MCS slice in B changed.
	t.Logf("LATENCY endpoint-change-to-mcs-slice-in-B p50=%v p99=%v n=%d",
		percentile(toSlice, 0.50).Round(time.Millisecond), percentile(toSlice, 0.99).Round(time.Millisecond), len(toSlice))
	t.Logf("LATENCY endpoint-change-to-rules-in-B p50=%v p99=%v max=%v min=%v n=%d",
		percentile(latencies, 0.50).Round(time.Millisecond), percentile(latencies, 0.99).Round(time.Millisecond),
		latencies[len(latencies)-1].Round(time.Millisecond), latencies[0].Round(time.Millisecond), len(latencies))
}

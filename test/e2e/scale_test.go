package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
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

func watchSlices(t *testing.T, m *member, ns, selector string) *sliceWatch {
	t.Helper()
	w, err := m.Client.DiscoveryV1().EndpointSlices(ns).Watch(t.Context(), metav1.ListOptions{LabelSelector: selector})
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

// rulesFollow polls a node's ruleset until every ip is there (or gone)
// and returns when each was first seen so.
func (s *suite) rulesFollow(t *testing.T, m *member, ips []string, present bool) map[string]time.Time {
	t.Helper()
	seen := map[string]time.Time{}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		rs, err := s.ruleset(t.Context(), m)
		now := time.Now()
		for _, ip := range ips {
			if _, done := seen[ip]; !done && err == nil && hasIP(rs, ip) == present {
				seen[ip] = now
			}
		}
		if len(seen) == len(ips) {
			return seen
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("ruleset of %s/%s: %v never all became present=%v (done: %v)", m.Name, m.Node, ips, present, seen)
	return nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// latencies collects endpoint change -> rules latencies of one path.
type latencies []time.Duration

func (l latencies) line(what string) string {
	s := sorted(l)
	return fmt.Sprintf("LATENCY %s p50=%v p99=%v min=%v max=%v n=%d", what,
		percentile(s, 0.50).Round(time.Millisecond), percentile(s, 0.99).Round(time.Millisecond),
		s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

// testScaleLatency scales an export of A up and down, one pod at a time,
// and times each endpoint change until B's rules follow. A local Service
// of B is scaled in step with it, one pod of B per pod of A, so that the
// same run measures the upstream path (a local Service's EndpointSlice ->
// kube-proxy's rules) next to the clusterset path (A's EndpointSlice ->
// mcs-controller -> MCS EndpointSlice in B -> kube-proxy's rules).
func (s *suite) testScaleLatency(t *testing.T) {
	sp := s.space(t, "e2e-scale")
	sp.service(s.a, "web", nil)
	sp.service(s.b, "local", nil)
	base := sp.echoPods(s.a, "web", "web-0")
	client := sp.client(s.b, "client")
	source := watchSlices(t, s.a, sp.name, discoveryv1.LabelServiceName+"=web")
	imported := watchSlices(t, s.b, sp.name, mcsv1beta1.LabelServiceName+"=web")
	local := watchSlices(t, s.b, sp.name, discoveryv1.LabelServiceName+"=local")
	sp.export(s.a, "web")
	vip := sp.vip(s.b, "web")
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 10, []string{"web-0"})

	pods := latencyRounds(t) // as many scale-ups and scale-downs of each Service
	var clusterset, controller, upstream latencies
	measure := func(ipA, ipB string, added bool) {
		seen := s.rulesFollow(t, s.b, []string{ipA, ipB}, added)
		var changedA, mirrored, changedB time.Time
		eventually(t, 10*time.Second, "the slice watches to see "+ipA+" and "+ipB, func() (bool, string) {
			var ok1, ok2, ok3 bool
			changedA, ok1 = source.at(ipA, added)
			mirrored, ok2 = imported.at(ipA, added)
			changedB, ok3 = local.at(ipB, added)
			return ok1 && ok2 && ok3, ""
		})
		clusterset = append(clusterset, seen[ipA].Sub(changedA))
		controller = append(controller, mirrored.Sub(changedA))
		upstream = append(upstream, seen[ipB].Sub(changedB))
	}
	ipsA, ipsB := map[string]string{}, map[string]string{}
	for i := 1; i <= pods; i++ {
		name := fmt.Sprintf("web-%d", i)
		sp.createPod(s.a, echoPod(name, "web"))
		sp.createPod(s.b, echoPod(name, "local"))
		ipsA[name] = sp.waitReady(s.a, name)[name]
		ipsB[name] = sp.waitReady(s.b, name)[name]
		measure(ipsA[name], ipsB[name], true)
	}
	want := append(podNames(ipsA), "web-0")
	slices.Sort(want)
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 200, want)
	for i := 1; i <= pods; i++ {
		name := fmt.Sprintf("web-%d", i)
		for _, c := range s.p.members() {
			if err := c.Client.CoreV1().Pods(sp.name).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		measure(ipsA[name], ipsB[name], false)
	}
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 20, []string{"web-0"})
	s.waitRules(t, s.b, 5*time.Second, []string{vip, base["web-0"]}, nil)

	t.Log(controller.line("endpoint-change-in-A-to-mcs-slice-in-B"))
	t.Log(upstream.line("upstream-local-endpoint-change-to-rules-in-B"))
	t.Log(clusterset.line("endpoint-change-in-A-to-rules-in-B"))
	t.Logf("LATENCY ratio clusterset/upstream p50=%.2f p99=%.2f",
		float64(percentile(sorted(clusterset), 0.5))/float64(percentile(sorted(upstream), 0.5)),
		float64(percentile(sorted(clusterset), 0.99))/float64(percentile(sorted(upstream), 0.99)))
}

// latencyRounds is how many scale-ups (and as many scale-downs) case 5
// times: 26 by default, what the figures in docs/kind.md were taken with.
// MCS_E2E_LATENCY_ROUNDS sets fewer where the suite runs for its verdicts
// rather than its figures: on kind each round waits for two real pods to
// start, about 7 s.
func latencyRounds(t *testing.T) int {
	v := os.Getenv("MCS_E2E_LATENCY_ROUNDS")
	if v == "" {
		return 26
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 {
		t.Fatalf("MCS_E2E_LATENCY_ROUNDS=%q: want a number of rounds, at least 2", v)
	}
	return n
}

func sorted(l latencies) []time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	return s
}

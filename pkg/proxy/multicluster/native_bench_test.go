package multicluster_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	mcsproxy "k8s.io/multiclusterservices/proxy"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// TestMeasureLocalFirstFailover measures, in one run on real nftables,
// how long a LocalFirst failover (and failback) takes from the local
// EndpointSlice update to the rules of the node, against how long a plain
// local Service's endpoint change takes to reach the rules: both are the
// proxier's own sync, so the ratio is the cost of deciding native names.
// It reports figures only, never fails on them (machines are noisy):
//
//	MCS_MEASURE=1 go test -run TestMeasureLocalFirstFailover -v ./pkg/proxy/multicluster
//
// hack/bench-local-first.sh runs it.
func TestMeasureLocalFirstFailover(t *testing.T) {
	if os.Getenv("MCS_MEASURE") == "" {
		t.Skip("a measurement, not a test: set MCS_MEASURE=1 (hack/bench-local-first.sh)")
	}
	if !netns.Isolate(t, "nft") {
		return
	}
	d := newDataplane(t, kubeproxyconfig.ProxyModeNFTables)
	p := d.proxier
	p.OnServiceAdd(localService("ns", "web", "10.96.0.50"))
	p.OnServiceAdd(localService("ns", "plain", "10.96.0.60"))
	ready, unready := localSlice(readyEP("10.3.0.1")), localSlice(ep{ip: "10.3.0.1"})
	p.OnEndpointSliceAdd(ready)
	si := serviceImport("web", []string{"10.250.0.50"})
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.LocalFirst)}
	p.OnServiceImportUpsert(si)
	p.OnEndpointSliceAdd(slice("web", "cluster-a", httpPort, readyEP("10.1.0.1")))
	plainOne := plainSlice(readyEP("10.3.0.2"))
	plainTwo := plainSlice(readyEP("10.3.0.2"), readyEP("10.3.0.9"))
	// A failover is the same local update (an endpoint no longer ready)
	// making another endpoint join: the like-for-like plain change swaps
	// one endpoint for another in one update.
	plainSwapped := plainSlice(ep{ip: "10.3.0.2"}, readyEP("10.3.0.9"))
	p.OnEndpointSliceAdd(plainOne)
	d.settle()

	// until returns how long it took the ruleset to name endpoint ip
	// n times (once per Service it is an endpoint of: alone in a DNAT rule,
	// or in the DNAT map of a Service with several endpoints).
	until := func(ip string, n int) time.Duration {
		start := time.Now()
		count := func() int {
			r := d.rules()
			return strings.Count(r, "dnat to "+ip+":8080") + strings.Count(r, ip+" . 8080")
		}
		for count() != n {
			if time.Since(start) > 30*time.Second {
				var lines []string
				for _, l := range strings.Split(d.rules(), "\n") {
					if strings.Contains(l, "10.3.0") || strings.Contains(l, "10.96.0.60") {
						lines = append(lines, l)
					}
				}
				t.Fatalf("the rules never named endpoint %s %d times:\n%s", ip, n, strings.Join(lines, "\n"))
			}
		}
		return time.Since(start)
	}
	// 10.1.0.1 is an endpoint of the clusterset IP always, of the local
	// Service only while failed over; 10.3.0.9 is the plain Service's
	// second endpoint, there or not.
	const remote, plainNew = "10.1.0.1", "10.3.0.9"
	var native, plain, swap []time.Duration
	for range 40 {
		p.OnEndpointSliceUpdate(ready, unready)
		native = append(native, until(remote, 2))
		p.OnEndpointSliceUpdate(unready, ready)
		native = append(native, until(remote, 1))
		p.OnEndpointSliceUpdate(plainOne, plainTwo)
		plain = append(plain, until(plainNew, 1))
		p.OnEndpointSliceUpdate(plainTwo, plainOne)
		plain = append(plain, until(plainNew, 0))
		p.OnEndpointSliceUpdate(plainOne, plainSwapped)
		swap = append(swap, until(plainNew, 1))
		p.OnEndpointSliceUpdate(plainSwapped, plainOne)
		swap = append(swap, until(plainNew, 0))
	}
	q := func(ds []time.Duration, f float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(f*float64(len(s)-1))]
	}
	t.Logf("LocalFirst failover/failback to the rules: p50 %v p99 %v (%d flips)", q(native, .5), q(native, .99), len(native))
	t.Logf("plain local endpoint change to the rules:  p50 %v p99 %v (%d flips)", q(plain, .5), q(plain, .99), len(plain))
	t.Logf("plain local endpoint swapped for another:   p50 %v p99 %v (%d flips)", q(swap, .5), q(swap, .99), len(swap))
	t.Logf("RESULT LocalFirst / local Service: p50 %.2f, p99 %.2f", float64(q(native, .5))/float64(q(plain, .5)), float64(q(native, .99))/float64(q(plain, .99)))
	t.Logf("RESULT LocalFirst / local Service swapping an endpoint: p50 %.2f, p99 %.2f", float64(q(native, .5))/float64(q(swap, .5)), float64(q(native, .99))/float64(q(swap, .99)))
}

// plainSlice is ns/plain's own slice.
func plainSlice(eps ...ep) *discoveryv1.EndpointSlice {
	s := slice("plain", "local", httpPort, eps...)
	s.Name = "plain-abcde"
	s.Labels = map[string]string{"kubernetes.io/service-name": "plain"}
	return s
}

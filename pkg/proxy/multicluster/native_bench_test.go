package multicluster_test

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsproxy "k8s.io/multiclusterservices/proxy"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
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
	// Each kind of change is made 2*flips times: enough for a p99 that is
	// not the largest sample.
	const flips = 150
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
	plain := addPlain(p)
	d.settle()

	update := func(old, cur *discoveryv1.EndpointSlice) func() {
		return func() { p.OnEndpointSliceUpdate(old, cur) }
	}
	// 10.1.0.1 is an endpoint of the clusterset IP always, of the local
	// Service only while failed over.
	measureAgainstPlain(t, d, plain, "LocalFirst", "10.1.0.1",
		[2]func(){update(ready, unready), update(unready, ready)}, [2]int{2, 1}, flips)
}

// plainChanges are a plain local Service's like-for-like changes: an
// endpoint joining and leaving, and one swapped for another in one update
// (as a failover makes one endpoint leave and another join).
type plainChanges struct {
	one, two, swapped *discoveryv1.EndpointSlice
}

// addPlain hands the proxier the plain Service's first slice (the Service
// itself is the caller's, 10.96.0.60).
func addPlain(p *multicluster.Proxier) plainChanges {
	c := plainChanges{
		one:     plainSlice(readyEP("10.3.0.2")),
		two:     plainSlice(readyEP("10.3.0.2"), readyEP("10.3.0.9")),
		swapped: plainSlice(ep{ip: "10.3.0.2"}, readyEP("10.3.0.9")),
	}
	p.OnEndpointSliceAdd(c.one)
	return c
}

// measureAgainstPlain makes the failover and the failback (each named by
// remote appearing want[i] times in the rules) flips times each, with the
// plain Service's changes in between, and logs both and their ratios.
func measureAgainstPlain(t *testing.T, d *dataplane, plainC plainChanges, what, remote string, change [2]func(), want [2]int, flips int) {
	t.Helper()
	p := d.proxier
	flip, transactions := ruleProbe(t, d)
	update := func(old, cur *discoveryv1.EndpointSlice) func() {
		return func() { p.OnEndpointSliceUpdate(old, cur) }
	}
	// 10.3.0.9 is the plain Service's second endpoint, there or not.
	const plainNew = "10.3.0.9"
	var failover, plain, swap []time.Duration
	for range flips {
		failover = append(failover, flip(change[0], remote, want[0]), flip(change[1], remote, want[1]))
		plain = append(plain, flip(update(plainC.one, plainC.two), plainNew, 1), flip(update(plainC.two, plainC.one), plainNew, 0))
		swap = append(swap, flip(update(plainC.one, plainC.swapped), plainNew, 1), flip(update(plainC.swapped, plainC.one), plainNew, 0))
	}
	q := quantile
	t.Logf("transactions per change: %s %.2f, plain %.2f", what, float64(transactions[remote])/float64(2*flips), float64(transactions[plainNew])/float64(4*flips))
	t.Logf("%s failover/failback to the rules: p50 %v p99 %v (%d flips)", what, q(failover, .5), q(failover, .99), len(failover))
	t.Logf("plain local endpoint change to the rules: p50 %v p99 %v (%d flips)", q(plain, .5), q(plain, .99), len(plain))
	t.Logf("plain local endpoint swapped for another: p50 %v p99 %v (%d flips)", q(swap, .5), q(swap, .99), len(swap))
	t.Logf("RESULT %s / local Service: p50 %.2f, p99 %.2f", what, float64(q(failover, .5))/float64(q(plain, .5)), float64(q(failover, .99))/float64(q(plain, .99)))
	t.Logf("RESULT %s / local Service swapping an endpoint: p50 %.2f, p99 %.2f", what, float64(q(failover, .5))/float64(q(swap, .5)), float64(q(failover, .99))/float64(q(swap, .99)))
}

// quantile returns the f quantile of ds.
func quantile(ds []time.Duration, f float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(f*float64(len(s)-1))]
}

// TestMeasureClusterSelectionFailover measures, in one run on real
// nftables, how long a cluster selection failover to the next result (and
// the failback) takes from the EndpointSlice update that makes the first
// result lose its last ready endpoint to the rules of the node, against a
// plain local Service's endpoint change: both are the proxier's own sync,
// so the ratio is the cost of choosing. Story 1 of KEP-5939 as cluster-b
// sees it: cluster-b, then cluster-a and cluster-b. Figures only:
//
//	MCS_MEASURE=1 go test -run TestMeasureClusterSelectionFailover -v ./pkg/proxy/multicluster
//
// hack/bench-cluster-selection.sh runs it.
func TestMeasureClusterSelectionFailover(t *testing.T) {
	const flips = 150
	if os.Getenv("MCS_MEASURE") == "" {
		t.Skip("a measurement, not a test: set MCS_MEASURE=1 (hack/bench-cluster-selection.sh)")
	}
	if !netns.Isolate(t, "nft") {
		return
	}
	d := newDataplane(t, kubeproxyconfig.ProxyModeNFTables)
	p := d.proxier
	p.SetClusterSelection(true)
	p.OnServiceAdd(localService("ns", "plain", "10.96.0.60"))
	ready, unready := slice("api", "cluster-b", httpPort, readyEP("10.2.0.1")), slice("api", "cluster-b", httpPort, ep{ip: "10.2.0.1"})
	p.OnEndpointSliceAdd(ready)
	p.OnEndpointSliceAdd(slice("api", "cluster-a", httpPort, readyEP("10.1.0.1")))
	p.OnServiceImportSelected(serviceImport("api", []string{"10.250.0.51"}), []csv1beta1.ClusterSelectorResult{
		{Clusters: []string{"cluster-b"}}, {Clusters: []string{"cluster-a", "cluster-b"}},
	})
	plain := addPlain(p)
	d.settle()

	update := func(old, cur *discoveryv1.EndpointSlice) func() {
		return func() { p.OnEndpointSliceUpdate(old, cur) }
	}
	// 10.1.0.1 (cluster-a) is an endpoint of the clusterset IP only while
	// failed over to the second result.
	measureAgainstPlain(t, d, plain, "cluster selection", "10.1.0.1",
		[2]func(){update(ready, unready), update(unready, ready)}, [2]int{1, 0}, flips)
}

// ruleProbe returns flip, which applies update and returns how long until
// the rules named endpoint ip n times (once per Service it is an endpoint
// of: alone in a DNAT rule, or in the DNAT map of a Service with several
// endpoints), timed by the committing transaction; and, per ip, how many
// transactions it took.
func ruleProbe(t *testing.T, d *dataplane) (flip func(update func(), ip string, n int) time.Duration, transactions map[string]int) {
	// The probe: `nft monitor` prints each committed transaction as it is
	// committed, so the time of its first line is when the rules changed,
	// with no polling competing with the proxier for the CPU. After each
	// transaction the ruleset is read once, to see whether it is the one
	// waited for.
	mon := exec.Command("nft", "monitor", "ruleset")
	out, err := mon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mon.Process.Kill(); _ = mon.Wait() })
	lines := make(chan time.Time, 4096)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- time.Now()
		}
		close(lines)
	}()
	// batch waits for the next transaction and returns when it was
	// committed (its first line; the rest follow within a millisecond).
	batch := func(deadline time.Time) (time.Time, bool) {
		select {
		case first := <-lines:
			for {
				select {
				case <-lines:
				case <-time.After(2 * time.Millisecond):
					return first, true
				}
			}
		case <-time.After(time.Until(deadline)):
			return time.Time{}, false
		}
	}
	count := func(ip string) int {
		r := d.rules()
		return strings.Count(r, "dnat to "+ip+":8080") + strings.Count(r, ip+" . 8080")
	}
	transactions = map[string]int{}
	flip = func(update func(), ip string, n int) time.Duration {
		for len(lines) > 0 {
			<-lines
		}
		start := time.Now()
		update()
		deadline := start.Add(30 * time.Second)
		for k := 1; ; k++ {
			at, ok := batch(deadline)
			if !ok {
				t.Fatalf("the rules never named endpoint %s %d times", ip, n)
			}
			if count(ip) == n {
				transactions[ip] += k
				return at.Sub(start)
			}
		}
	}
	return flip, transactions
}

// plainSlice is ns/plain's own slice.
func plainSlice(eps ...ep) *discoveryv1.EndpointSlice {
	s := slice("plain", "local", httpPort, eps...)
	s.Name = "plain-abcde"
	s.Labels = map[string]string{"kubernetes.io/service-name": "plain"}
	return s
}

package multicluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxymetrics "k8s.io/kubernetes/pkg/proxy/metrics"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
)

// benchNetNSEnv is set by hack/bench-kube-proxy.sh, which runs the
// benchmark in a fresh network namespace: the benchmark programs the
// kernel of the namespace it runs in, and must never touch a host's rules.
const benchNetNSEnv = "MCS_BENCH_IN_NETNS"

// BenchmarkFirstSync measures upstream's proxier syncing N ServiceImports
// (through the multi-cluster Proxier) against N equivalent plain Services,
// 10 endpoints each, in the same run: the time of the first full sync, of
// an incremental sync after one endpoint changes, and the size of the
// resulting ruleset. Run it with hack/bench-kube-proxy.sh.
func BenchmarkFirstSync(b *testing.B) {
	if os.Getenv(benchNetNSEnv) != "1" {
		b.Skip("programs the kernel's rules; run hack/bench-kube-proxy.sh, which isolates it in a network namespace")
	}
	proxymetrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	multicluster.RegisterMetrics()
	for _, mode := range []kubeproxyconfig.ProxyMode{kubeproxyconfig.ProxyModeNFTables, kubeproxyconfig.ProxyModeIPTables} {
		sizes := []int{1000, 10000}
		if mode == kubeproxyconfig.ProxyModeIPTables {
			// iptables-nft takes minutes beyond a few thousand Services.
			sizes = []int{1000}
		}
		for _, n := range sizes {
			for _, path := range []string{"services", "imports"} {
				// mode/N/path: hack/bench-kube-proxy.sh pairs the paths of a case by
				// the last part.
				b.Run(fmt.Sprintf("%s/%d/%s", mode, n, path), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						r := measureSync(b, mode, twoSources(n), path == "imports")
						b.ReportMetric(r.first.Seconds(), "first-sync-s")
						b.ReportMetric(r.incremental.Seconds()*1000, "incremental-sync-ms")
						b.ReportMetric(float64(r.rules), "rules")
						b.ReportMetric(float64(r.elements), "set-elements")
						b.ReportMetric(r.feed.Seconds()*1000, "feed-ms")
					}
				})
			}
		}
	}
}

type syncResult struct {
	feed, first, incremental time.Duration
	rules, elements          int
	// heap is the live heap after the syncs, the objects fed included.
	heap uint64
}

// measureSync measures one path of BenchmarkFirstSync or
// BenchmarkSourcesPerImport fed by feedSync.
func measureSync(b *testing.B, mode kubeproxyconfig.ProxyMode, sh feedShape, imports bool) syncResult {
	return measureFed(b, mode, sh, imports, func(handler proxy.Provider) []any {
		if sh.selection {
			handler.(*multicluster.Proxier).SetClusterSelection(true)
		}
		return feedSync(handler, sh, imports)
	})
}

// measureFed measures a path fed by feed, which hands handler
// (benchProvider's, the multi-cluster Proxier if imports) every object as
// at start-up, timed as the feed, and returns those the informers would
// keep; the incremental sync follows a change of sh's first slice.
func measureFed(b *testing.B, mode kubeproxyconfig.ProxyMode, sh feedShape, imports bool, feed func(proxy.Provider) []any) syncResult {
	b.StopTimer()
	flushRules()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handler := benchProvider(ctx, b, mode, imports)
	wrapper, _ := handler.(*multicluster.Proxier)

	// Feed everything before the first sync, as at start-up.
	start := time.Now()
	cache := feed(handler)
	fed := time.Since(start)
	defer runtime.KeepAlive(cache)

	hist := proxymetrics.SyncProxyRulesLatency.WithLabelValues(string(v1.IPv4Protocol))
	count0, _ := testutil.GetHistogramMetricCount(hist)
	sum0, _ := testutil.GetHistogramMetricValue(hist)
	b.StartTimer()
	handler.OnServiceSynced()
	handler.OnEndpointSlicesSynced()
	if wrapper != nil {
		wrapper.MultiClusterSynced()
	}
	go handler.SyncLoop()
	waitForSyncs(b, hist, count0+1)
	b.StopTimer()
	sum1, _ := testutil.GetHistogramMetricValue(hist)
	first := time.Duration((sum1 - sum0) * float64(time.Second))

	// One endpoint of one source cluster changes.
	count1, _ := testutil.GetHistogramMetricCount(hist)
	handler.OnEndpointSliceUpdate(sh.slice(0, 0, 0, imports), sh.slice(0, 0, 1, imports))
	waitForSyncs(b, hist, count1+1)
	sum2, _ := testutil.GetHistogramMetricValue(hist)
	incremental := time.Duration((sum2 - sum1) * float64(time.Second))

	rules, elements := countRules(b, mode)
	return syncResult{feed: fed, first: first, incremental: incremental, rules: rules, elements: elements, heap: multicluster.LiveHeap()}
}

// importHandler is what is handed ServiceImports: the multi-cluster
// Proxier, or translateOnly.
type importHandler interface {
	OnServiceImportUpsert(*mcsv1beta1.ServiceImport)
}

// feedShape is what feedSync hands over: n Services or imports, each with
// one EndpointSlice per source cluster of perSlice endpoints; with
// selection, the imports come with cluster selector results
// (selectorResults) to a Proxier with cluster selection on.
type feedShape struct {
	n, sources, perSlice int
	selection            bool
}

// twoSources is the shape of BenchmarkFirstSync and BenchmarkFeed: two
// source clusters of 5 endpoints each, 10 endpoints per name.
func twoSources(n int) feedShape { return feedShape{n: n, sources: 2, perSlice: 5} }

// feedSync hands handler n Services, or n ServiceImports (through the
// multi-cluster Proxier handler wraps, or translateOnly), with their
// EndpointSlices, as kube-proxy's informers deliver them at start-up, and
// returns the objects handed over: the caller keeps them while it
// measures, as the informers' caches keep every object they deliver
// (upstream's proxier keeps a slice but not its Service, so without this a
// Service would be garbage at once and an import, which the Proxier points
// to, would not).
func feedSync(handler proxy.Provider, sh feedShape, imports bool) []any {
	n := sh.n
	wrapper, _ := handler.(importHandler)
	cache := make([]any, 0, (1+sh.sources)*n)
	// kube-proxy's ServiceImport informer keeps one labels map per trusted
	// manager, shared by every import it wrote (its transform,
	// keepWhatProxiesRead): the imports are made as it holds them.
	importLabels := map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}
	var results []csv1beta1.ClusterSelectorResult
	if sh.selection {
		results = selectorResults(sh)
	}
	for i := 0; i < n; i++ {
		vip := fmt.Sprintf("10.250.%d.%d", i/250, i%250+1)
		name := fmt.Sprintf("svc-%d", i)
		if imports {
			si := &mcsv1beta1.ServiceImport{
				ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(i), 0)), Labels: importLabels},
				Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{vip},
					Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
			}
			if sh.selection {
				handler.(*multicluster.Proxier).OnServiceImportSelected(si, results)
			} else {
				wrapper.OnServiceImportUpsert(si)
			}
			cache = append(cache, si)
		} else {
			svc := &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
				Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: vip, ClusterIPs: []string{vip}, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
					Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
			}
			handler.OnServiceAdd(svc)
			cache = append(cache, svc)
		}
		for s := 0; s < sh.sources; s++ {
			slice := sh.slice(i, s, 0, imports)
			handler.OnEndpointSliceAdd(slice)
			cache = append(cache, slice)
		}
	}
	return cache
}

// BenchmarkFeed measures only what BenchmarkFirstSync's feed-ms reports:
// handing upstream's nftables proxier N ServiceImports through the
// multi-cluster Proxier against N Services, no sync (the objects are made
// inside the timer on both paths). The path translate-only is the floor
// of the imports' feed: their checks and translations handed to upstream
// with nothing kept (translateOnly). For profiles of the feed:
//
//	unshare --net env MCS_BENCH_IN_NETNS=1 go test -run '^$' -bench 'Feed/imports/10000' -benchtime 1x -count 5 -cpuprofile cpu.out ./pkg/proxy/multicluster
func BenchmarkFeed(b *testing.B) {
	if os.Getenv(benchNetNSEnv) != "1" {
		b.Skip("creates kernel rules; run in a fresh network namespace (see the doc comment)")
	}
	proxymetrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	multicluster.RegisterMetrics()
	// services-gate-on: the same Services through the multi-cluster
	// Proxier, as kube-proxy hands them with the gate on.
	for _, path := range []string{"services", "imports", "services-gate-on", "translate-only"} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/%d", path, n), func(b *testing.B) {
				var cpu time.Duration
				var gcs uint32
				var stats runtime.MemStats
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					var handler proxy.Provider
					if path == "translate-only" {
						handler = newTranslateOnly(benchProvider(b.Context(), b, kubeproxyconfig.ProxyModeNFTables, false))
					} else {
						handler = benchProvider(b.Context(), b, kubeproxyconfig.ProxyModeNFTables, path != "services")
					}
					runtime.GC()
					runtime.ReadMemStats(&stats)
					gcs -= stats.NumGC
					before := cpuTime()
					b.StartTimer()
					cache := feedSync(handler, twoSources(n), path == "imports" || path == "translate-only")
					b.StopTimer()
					cpu += cpuTime() - before
					runtime.ReadMemStats(&stats)
					gcs += stats.NumGC
					runtime.KeepAlive(cache)
					b.StartTimer()
				}
				// CPU time, GC included, moves less than wall time on a
				// machine shared with other work; the collections that fell
				// in the feed say how much of it was the collector's.
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(gcs)/float64(b.N), "gcs/op")
			})
		}
	}
}

// benchProvider returns upstream's proxier of mode, wrapped by the
// multi-cluster Proxier if wrap (imports, or the gate on).
func benchProvider(ctx context.Context, b *testing.B, mode kubeproxyconfig.ProxyMode, wrap bool) proxy.Provider {
	cfg := benchConfig(b, mode)
	recorder := &events.FakeRecorder{}
	nodeIP := net.ParseIP("192.168.99.1")
	provider, err := newIPv4Proxier(ctx, cfg, "node-1", nodeIP, recorder)
	if err != nil {
		b.Fatal(err)
	}
	if !wrap {
		return provider
	}
	return multicluster.NewProxier(klog.Background(), provider, benchOptions(), nil)
}

// benchOptions are the Proxier's options in the benchmarks: the bench
// imports' clusterset range, the default manager trusted.
func benchOptions() *mcsproxy.Options {
	opts := &mcsproxy.Options{TrustedManagers: []string{mcsproxy.DefaultManagedBy}}
	opts.ClusterSetIPCIDRs, _ = mcsproxy.ParseCIDRs([]string{"10.250.0.0/16"})
	return opts
}

// translateOnly hands upstream's proxier what the multi-cluster Proxier
// hands it for a new import and its slices, checked and translated by the
// same functions (mcsproxy.ServiceForImport, EndpointSliceForImport), and
// keeps nothing: no entry per import, no claim on its clusterset IPs, no
// state per slice. It is no proxier (it could neither update, delete nor
// arbitrate anything); it measures what any proxier that checks and
// translates imports pays in the feed before it keeps any state: the
// floor of BenchmarkFeed's imports path.
type translateOnly struct {
	proxy.Provider
	opts *mcsproxy.Options
}

func newTranslateOnly(provider proxy.Provider) *translateOnly {
	return &translateOnly{Provider: provider, opts: benchOptions()}
}

func (t *translateOnly) OnServiceImportUpsert(si *mcsv1beta1.ServiceImport) {
	if svc, err := mcsproxy.ServiceForImport(si, t.opts); err == nil && svc != nil {
		t.Provider.OnServiceAdd(svc)
	}
}

// OnEndpointSliceAdd routes a slice as the Proxier does: a local one as
// it is, an MCS one translated, one claiming an import's synthetic Service
// dropped.
func (t *translateOnly) OnEndpointSliceAdd(slice *discoveryv1.EndpointSlice) {
	switch mcsproxy.KindOf(slice) {
	case mcsproxy.LocalSlice:
		t.Provider.OnEndpointSliceAdd(slice)
	case mcsproxy.MultiClusterSlice:
		if translated, err := mcsproxy.EndpointSliceForImport(slice, t.opts); err == nil {
			t.Provider.OnEndpointSliceAdd(translated)
		}
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchConfig(b *testing.B, mode kubeproxyconfig.ProxyMode) *kubeproxyconfig.KubeProxyConfiguration {
	cfg := defaultConfig(b, mode)
	cfg.MinSyncPeriod.Duration = 0
	return cfg
}

// sourceName names source cluster s: a, b, ... z, then s26, s27, ...
func sourceName(s int) string {
	if s < 26 {
		return string(rune('a' + s))
	}
	return fmt.Sprintf("s%d", s)
}

// slice is name i's EndpointSlice from source cluster s, as the
// mcs-controller writes it (mcs) or as the EndpointSlice controller does;
// shift moves its endpoints by one address per step (the change an
// incremental sync measures). Endpoint k of a name (k = s*perSlice + j) is
// 10.(100+k%150).(i/250+64*(k/150)).(i%250+1): unique for up to 10,000 names
// and 300 endpoints per name.
func (sh feedShape) slice(i, s, shift int, mcs bool) *discoveryv1.EndpointSlice {
	service, cluster := fmt.Sprintf("svc-%d", i), sourceName(s)
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: service + "-" + cluster},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{port("http", v1.ProtocolTCP, 8080)},
	}
	if mcs {
		// As the mcs-controller writes them.
		sl.Labels = export.ImportedSliceLabels(service, cluster, mcsproxy.DefaultManagedBy)
	} else {
		// As the EndpointSlice controller writes them.
		sl.Labels = map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	}
	for j := 0; j < sh.perSlice; j++ {
		k := s*sh.perSlice + shift + j
		ready := true
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+k%150, i/250+64*(k/150), i%250+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	return sl
}

func waitForSyncs(b *testing.B, hist metrics.ObserverMetric, want uint64) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		got, _ := testutil.GetHistogramMetricCount(hist)
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no sync within 10 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countRules returns the number of rules and of set/map elements kube-proxy
// wrote.
func countRules(b *testing.B, mode kubeproxyconfig.ProxyMode) (rules, elements int) {
	if mode == kubeproxyconfig.ProxyModeIPTables {
		out, err := exec.Command("iptables-save").Output()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range splitLines(string(out)) {
			if len(line) > 3 && line[:3] == "-A " {
				rules++
			}
		}
		return rules, 0
	}
	out, err := exec.Command("nft", "-j", "list", "table", "ip", "kube-proxy").Output()
	if err != nil {
		b.Fatal(err)
	}
	var doc struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		b.Fatal(err)
	}
	for _, item := range doc.Nftables {
		for kind, obj := range item {
			switch kind {
			case "rule":
				rules++
			case "set", "map":
				if elems, ok := obj["elem"].([]any); ok {
					elements += len(elems)
				}
			}
		}
	}
	return rules, elements
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func flushRules() {
	_ = exec.Command("nft", "flush", "ruleset").Run()
	_ = exec.Command("iptables", "-t", "nat", "-F").Run()
	_ = exec.Command("iptables", "-t", "filter", "-F").Run()
}

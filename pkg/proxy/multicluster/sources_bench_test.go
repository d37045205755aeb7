package multicluster_test

import (
	"fmt"
	"os"
	"testing"

	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxymetrics "k8s.io/kubernetes/pkg/proxy/metrics"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
)

// BenchmarkSourcesPerImport measures how a node's cost grows with the
// clusters an import is exported from: 1,000 imports, each with one
// EndpointSlice of 2 endpoints per source cluster (S = 1, 10, 50, 100),
// against 1,000 plain Services carrying the same endpoints in the same
// number of slices (upstream's path), in the same run and the same
// network namespace: the feed, the first full sync, an incremental sync
// (one endpoint of one source changes), the live heap after them and the
// ruleset's size. The path selected is the imports with cluster selection
// on and 3 cluster selector results each (selectorResults): the same
// endpoints programmed, after a choice per event. The ratios are printed by
// hack/bench-kube-proxy.sh sources.
func BenchmarkSourcesPerImport(b *testing.B) {
	if os.Getenv(benchNetNSEnv) != "1" {
		b.Skip("programs the kernel's rules; run hack/bench-kube-proxy.sh sources, which isolates it in a network namespace")
	}
	proxymetrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	multicluster.RegisterMetrics()
	for _, sources := range []int{1, 10, 50, 100} {
		for _, path := range []string{"services", "imports", "selected"} {
			b.Run(fmt.Sprintf("%d/%s", sources, path), func(b *testing.B) {
				sh := feedShape{n: 1000, sources: sources, perSlice: 2, selection: path == "selected"}
				// measureSync stops and starts the timer itself (b.Loop
				// refuses that).
				for i := 0; i < b.N; i++ {
					r := measureSync(b, kubeproxyconfig.ProxyModeNFTables, sh, path != "services")
					b.ReportMetric(r.first.Seconds(), "first-sync-s")
					b.ReportMetric(r.incremental.Seconds()*1000, "incremental-sync-ms")
					b.ReportMetric(r.feed.Seconds()*1000, "feed-ms")
					b.ReportMetric(float64(r.heap)/(1<<20), "heap-MB")
					b.ReportMetric(float64(r.rules), "rules")
					b.ReportMetric(float64(r.elements), "set-elements")
				}
			})
		}
	}
}

// selectorResults are the cluster selector results of every import of sh
// with selection on, as the controller writes them (KEP-5939): a first
// selector that no cluster matched, a second that every source cluster
// did, a third that only the first did. The second is chosen for every
// port: the imports program the same endpoints as without selection, so
// the difference is the choice itself.
func selectorResults(sh feedShape) []csv1beta1.ClusterSelectorResult {
	all := make([]string, 0, sh.sources)
	for s := 0; s < sh.sources; s++ {
		all = append(all, sourceName(s))
	}
	return []csv1beta1.ClusterSelectorResult{{}, {Clusters: all}, {Clusters: all[:1]}}
}

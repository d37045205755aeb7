package multicluster_test

import (
	"fmt"
	"os"
	"testing"

	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxymetrics "k8s.io/kubernetes/pkg/proxy/metrics"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
)

// BenchmarkSourcesPerImport measures how a node's cost grows with the
// clusters an import is exported from: 1,000 imports, each with one
// EndpointSlice of 2 endpoints per source cluster (S = 1, 10, 50, 100),
// against 1,000 plain Services carrying the same endpoints in the same
// number of slices (upstream's path), in the same run and the same
// network namespace: the feed, the first full sync, an incremental sync
// (one endpoint of one source changes), the live heap after them and the
// ruleset's size. The ratios are printed by hack/bench-kube-proxy.sh
// sources.
func BenchmarkSourcesPerImport(b *testing.B) {
	if os.Getenv(benchNetNSEnv) != "1" {
		b.Skip("programs the kernel's rules; run hack/bench-kube-proxy.sh sources, which isolates it in a network namespace")
	}
	proxymetrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	multicluster.RegisterMetrics()
	for _, sources := range []int{1, 10, 50, 100} {
		for _, path := range []string{"services", "imports"} {
			b.Run(fmt.Sprintf("%d/%s", sources, path), func(b *testing.B) {
				sh := feedShape{n: 1000, sources: sources, perSlice: 2}
				// measureSync stops and starts the timer itself (b.Loop
				// refuses that).
				for i := 0; i < b.N; i++ {
					r := measureSync(b, kubeproxyconfig.ProxyModeNFTables, sh, path == "imports")
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

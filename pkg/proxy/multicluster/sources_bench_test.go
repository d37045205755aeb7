package multicluster_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxymetrics "k8s.io/kubernetes/pkg/proxy/metrics"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

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
// endpoints programmed, after a choice per event.
//
// The path native is the imports asking LocalFirst native names, each
// beside a local Service of its name with a slice of its own (feedNative):
// the proxier decides every import's native name at every change of it,
// its slices or the local slices. Its upstream path is not services:
// upstream programs the same endpoints only with the local Services as
// well, 2,000 Services, the path services-native. A path's upstream is
// services-PATH where there is one, else services; the ratios are printed
// by hack/bench-kube-proxy.sh sources.
func BenchmarkSourcesPerImport(b *testing.B) {
	if os.Getenv(benchNetNSEnv) != "1" {
		b.Skip("programs the kernel's rules; run hack/bench-kube-proxy.sh sources, which isolates it in a network namespace")
	}
	const mode = kubeproxyconfig.ProxyModeNFTables
	proxymetrics.RegisterMetrics(mode)
	multicluster.RegisterMetrics()
	for _, sources := range []int{1, 10, 50, 100} {
		// A path named services... feeds plain Services (upstream's),
		// one named ...native the local Services as well.
		for _, path := range []string{"services", "imports", "selected", "services-native", "native"} {
			b.Run(fmt.Sprintf("%d/%s", sources, path), func(b *testing.B) {
				sh := feedShape{n: 1000, sources: sources, perSlice: 2, selection: path == "selected"}
				imports := !strings.HasPrefix(path, "services")
				// measureSync and measureFed stop and start the timer
				// themselves (b.Loop refuses that).
				for i := 0; i < b.N; i++ {
					var r syncResult
					if strings.HasSuffix(path, "native") {
						r = measureFed(b, mode, sh, imports, func(handler proxy.Provider) []any { return feedNative(handler, sh, imports) })
					} else {
						r = measureSync(b, mode, sh, imports)
					}
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

// localCluster is the ID of the cluster the native path's node is in: no
// source cluster's (sourceName), so that every import's endpoints are
// another cluster's, and the name of its local slices.
const localCluster = "local"

// feedNative hands handler, for each of sh's n names, a local Service
// with one ready slice of sh.perSlice endpoints (local), then feedSync's
// n Services or imports with their slices: the local Services first, as
// kube-proxy's own informers deliver them before the ServiceImport
// watcher starts. The imports ask LocalFirst native names
// (askingLocalFirst) of a proxier that knows its cluster's ID (without it
// no native name is served). The local endpoints are all ready, so
// LocalFirst keeps the remote ones out of the local Services: the rules
// are those of services-native's 2n Services, and the difference is the
// decisions.
func feedNative(handler proxy.Provider, sh feedShape, imports bool) []any {
	if imports {
		p := handler.(*multicluster.Proxier)
		p.SetLocalClusterID(localCluster)
		handler = askingLocalFirst{p}
	}
	cache := make([]any, 0, (3+sh.sources)*sh.n)
	for i := 0; i < sh.n; i++ {
		svc, slice := sh.local(i, imports)
		handler.OnServiceAdd(svc)
		handler.OnEndpointSliceAdd(slice)
		cache = append(cache, svc, slice)
	}
	return append(cache, feedSync(handler, sh, imports)...)
}

// local is name i's local Service and its EndpointSlice, as the
// EndpointSlice controller writes it, its endpoints numbered after the
// source clusters' (sh.slice of one more source). Beside an import it has
// the import's namespace and name, which is what brings native names into
// play, and accepts them (mcsproxy.AnnotationAcceptNativeNames); on
// upstream's path that name is the plain Service's that stands for the
// import, so the local Service takes another namespace (names cost the
// proxier nothing; their number and endpoints do).
func (sh feedShape) local(i int, imports bool) (*v1.Service, *discoveryv1.EndpointSlice) {
	slice := sh.slice(i, sh.sources, 0, false)
	if !imports {
		slice.Namespace = "bench-local"
	}
	service := slice.Labels[discoveryv1.LabelServiceName]
	slice.Name = service + "-" + localCluster
	ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: slice.Namespace, Name: service,
			Annotations: map[string]string{mcsproxy.AnnotationAcceptNativeNames: "true"}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	return svc, slice
}

// askingLocalFirst hands the Proxier each import as one whose exporters
// asked LocalFirst native names, with the annotation map kube-proxy's
// ServiceImport informer keeps for it (one per import, proxyAnnotations).
// The import is feedSync's own, made for this call.
type askingLocalFirst struct{ *multicluster.Proxier }

func (a askingLocalFirst) OnServiceImportUpsert(si *mcsv1beta1.ServiceImport) {
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.LocalFirst)}
	a.Proxier.OnServiceImportUpsert(si)
}

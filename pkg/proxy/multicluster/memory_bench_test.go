package multicluster

import (
	"net/netip"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy"
	mcsproxy "k8s.io/multiclusterservices/proxy"
)

// discardProvider is a proxy.Provider that holds nothing, so that only the
// Proxier's own state is measured.
type discardProvider struct{ proxy.Provider }

func (discardProvider) OnServiceAdd(*v1.Service)                              {}
func (discardProvider) OnServiceUpdate(_, _ *v1.Service)                      {}
func (discardProvider) OnServiceDelete(*v1.Service)                           {}
func (discardProvider) OnEndpointSliceAdd(*discoveryv1.EndpointSlice)         {}
func (discardProvider) OnEndpointSliceUpdate(_, _ *discoveryv1.EndpointSlice) {}
func (discardProvider) OnEndpointSliceDelete(*discoveryv1.EndpointSlice)      {}
func (discardProvider) OnServiceSynced()                                      {}
func (discardProvider) OnEndpointSlicesSynced()                               {}

// BenchmarkProxierMemory reports the heap the Proxier itself keeps per
// ServiceImport (with two MCS EndpointSlices) and per plain Service (with
// two EndpointSlices), and their ratio: the part of kube-proxy's memory per
// import that is ours (make bench-memory measures the whole process).
//
//	go test ./pkg/proxy/multicluster -run '^$' -bench ProxierMemory -benchtime=1x
func BenchmarkProxierMemory(b *testing.B) {
	const n = 10000
	opts := &mcsproxy.Options{ClusterSetIPCIDRs: []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16")}, TrustedManagers: []string{mcsproxy.DefaultManagedBy}}
	// The objects are made first: informers hold them in both paths.
	imports, services := importsAndServices(n)
	perObject := func(objs []any) float64 {
		before := liveHeap()
		p := NewProxier(klog.Background(), discardProvider{}, opts, nil)
		p.MultiClusterSynced()
		for _, o := range objs {
			feedObject(p, o)
		}
		after := liveHeap()
		runtime.KeepAlive(p)
		return float64(after-before) / n
	}
	for b.Loop() {
		perImport, perService := perObject(imports), perObject(services)
		b.ReportMetric(perImport, "B/import")
		b.ReportMetric(perService, "B/service")
		b.ReportMetric(perImport/perService, "import/service")
	}
	runtime.KeepAlive(imports)
	runtime.KeepAlive(services)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

package multicluster

import (
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// BenchmarkFeedOverhead is the Proxier's own cost of being handed one
// ServiceImport with two MCS EndpointSlices, against one Service with two
// EndpointSlices passing through it, over a Provider that does nothing:
// the part of BenchmarkFeed's difference that is ours.
//
//	go test ./pkg/proxy/multicluster -run '^$' -bench FeedOverhead -benchmem
func BenchmarkFeedOverhead(b *testing.B) {
	const n = 10000
	opts := &mcsproxy.Options{ClusterSetIPCIDRs: []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16")}, TrustedManagers: []string{mcsproxy.DefaultManagedBy}}
	imports, services := importsAndServices(n)
	for _, path := range []struct {
		name string
		objs []any
	}{{"imports", imports}, {"services", services}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			var p *Proxier
			for i := 0; i < b.N; i++ {
				if i%n == 0 {
					b.StopTimer()
					p = NewProxier(klog.Background(), discardProvider{}, opts, nil)
					p.MultiClusterSynced()
					b.StartTimer()
				}
				for _, o := range path.objs[(i%n)*3 : (i%n)*3+3] {
					feedObject(p, o)
				}
			}
		})
	}
}

// importsAndServices are n ServiceImports, each followed by its two MCS
// EndpointSlices (two source clusters), and n plain Services, each followed
// by its two EndpointSlices: what the feed and memory benchmarks hand
// over, three objects per name in both paths.
func importsAndServices(n int) (imports, services []any) {
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		a, b := mcsSlice("ns", name+"-a", name, "cluster-a", "10.1.0.1"), mcsSlice("ns", name+"-b", name, "cluster-b", "10.2.0.1")
		// As the mcs-controller writes them.
		a.Labels, b.Labels = export.ImportedSliceLabels(name, "cluster-a", mcsproxy.DefaultManagedBy), export.ImportedSliceLabels(name, "cluster-b", mcsproxy.DefaultManagedBy)
		imports = append(imports, serviceImport("ns", name, 0, fmt.Sprintf("10.250.%d.%d", i/250, i%250+1)), a, b)
		services = append(services, localService("ns", name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)))
		for _, half := range []string{"-a", "-b"} {
			s := mcsSlice("ns", name+half, "", "", "10.1.0.1")
			s.Labels = map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
			services = append(services, s)
		}
	}
	return imports, services
}

// feedObject hands o to p as kube-proxy's informers would an add.
func feedObject(p *Proxier, o any) {
	switch o := o.(type) {
	case *v1.Service:
		p.OnServiceAdd(o)
	case *discoveryv1.EndpointSlice:
		p.OnEndpointSliceAdd(o)
	case *mcsv1beta1.ServiceImport:
		p.OnServiceImportUpsert(o)
	}
}

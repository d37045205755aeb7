package multicluster_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// TestDataplaneClusterSelectionPerPort connects, through real nftables
// rules, to each port of an import whose own cluster (cluster-b) serves
// http but not metrics: http reaches cluster-b only, metrics reaches
// cluster-a, the next result, which serves it (KEP-5939 chooses per port).
// When cluster-b's endpoint goes unready, http follows to cluster-a too.
func TestDataplaneClusterSelectionPerPort(t *testing.T) {
	if !netns.Isolate(t, "nft") {
		return
	}
	d := newDataplane(t, kubeproxyconfig.ProxyModeNFTables)
	p := d.proxier
	p.SetClusterSelection(true)
	d.endpoint("a1", "10.1.0.1", "tcp/8080", "tcp/9090")
	d.endpoint("b1", "10.2.0.1", "tcp/8080")
	both := []discoveryv1.EndpointPort{port("http", v1.ProtocolTCP, 8080), port("metrics", v1.ProtocolTCP, 9090)}
	multicluster.DeliverSlice(p, slice("api", "cluster-a", both, readyEP("10.1.0.1")))
	multicluster.DeliverSlice(p, slice("api", "cluster-b", httpPort, readyEP("10.2.0.1")))
	p.OnServiceImportSelected(serviceImport("api", []string{"10.250.0.20"},
		mcsv1beta1.ServicePort{Name: "http", Protocol: v1.ProtocolTCP, Port: 80},
		mcsv1beta1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090}),
		[]csv1beta1.ClusterSelectorResult{{Clusters: []string{"cluster-b"}}, {Clusters: []string{"cluster-a", "cluster-b"}}})
	d.settle()
	check := func(addr string, want ...string) {
		t.Helper()
		if diff := cmp.Diff(want, d.answers("tcp", addr, 30)); diff != "" {
			t.Errorf("%s: endpoints that answered (-want +got):\n%s", addr, diff)
		}
	}
	check("10.250.0.20:80", "b1")
	check("10.250.0.20:9090", "a1")

	multicluster.DeliverSlice(p, slice("api", "cluster-b", httpPort, ep{ip: "10.2.0.1"}))
	d.settle()
	check("10.250.0.20:80", "a1")
	check("10.250.0.20:9090", "a1")
}

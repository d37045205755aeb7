package multicluster_test

import (
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	mcsproxy "k8s.io/multiclusterservices/proxy"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

func TestDataplaneNativeNamesNFTables(t *testing.T) {
	if netns.Isolate(t, "nft") {
		testDataplaneNativeNames(t, kubeproxyconfig.ProxyModeNFTables)
	}
}

func TestDataplaneNativeNamesIPTables(t *testing.T) {
	if netns.Isolate(t, "iptables", "ip6tables", "iptables-save") {
		testDataplaneNativeNames(t, kubeproxyconfig.ProxyModeIPTables)
	}
}

// testDataplaneNativeNames connects to a local Service's own ClusterIP,
// through real rules, while its endpoint becomes unready and ready again,
// under each strategy of native names: the Service reaches exactly the
// endpoints the strategy promises.
func testDataplaneNativeNames(t *testing.T, mode kubeproxyconfig.ProxyMode) {
	d := newDataplane(t, mode)
	p := d.proxier
	d.endpoint("local1", "10.3.0.1", "tcp/8080")
	d.endpoint("a1", "10.1.0.1", "tcp/8080")
	d.endpoint("b1", "10.2.0.1", "tcp/8080")

	// Its owner accepts native names.
	web := localService("ns", "web", "10.96.0.50")
	web.Annotations = map[string]string{mcsproxy.AnnotationAcceptNativeNames: "true"}
	p.OnServiceAdd(web)
	ready := localSlice(readyEP("10.3.0.1"))
	unready := localSlice(ep{ip: "10.3.0.1"})
	terminating := localSlice(ep{ip: "10.3.0.1", serving: true, terminating: true})
	p.OnEndpointSliceAdd(ready)
	si := serviceImport("web", []string{"10.250.0.50"})
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.LocalFirst)}
	p.OnServiceImportUpsert(si)
	p.OnEndpointSliceAdd(slice("web", "cluster-a", httpPort, readyEP("10.1.0.1")))
	p.OnEndpointSliceAdd(slice("web", "cluster-b", httpPort, readyEP("10.2.0.1")))

	expect := func(what string, want ...string) {
		t.Helper()
		d.settle()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := d.answers("tcp", "10.96.0.50:80", 30)
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the local Service's ClusterIP answered %v, want %v", what, got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	expect("LocalFirst, local endpoint ready", "local1")
	p.OnEndpointSliceUpdate(ready, unready)
	expect("LocalFirst, local endpoint unready: failover", "a1", "b1")
	p.OnEndpointSliceUpdate(unready, terminating)
	// As for any Service, ready endpoints win over serving-terminating ones.
	expect("LocalFirst, local endpoint terminating", "a1", "b1")
	p.OnEndpointSliceUpdate(terminating, ready)
	expect("LocalFirst, local endpoint ready again: failback", "local1")

	both := si.DeepCopy()
	both.ResourceVersion = "2"
	both.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)}
	p.OnServiceImportUpsert(both)
	expect("RemoteAndLocal", "a1", "b1", "local1")
	if got := d.answers("tcp", "10.250.0.50:80", 30); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Errorf("the clusterset IP answered %v, want the import's endpoints", got)
	}
	p.OnServiceImportDelete(both)
	expect("import gone", "local1")
}

// localSlice is ns/web's own slice in this cluster.
func localSlice(eps ...ep) *discoveryv1.EndpointSlice {
	s := slice("web", "local", httpPort, eps...)
	s.Name = "web-local-abcde"
	s.Labels = map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	return s
}

package mcs

import (
	"context"
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/multiclusterservices/export"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func readyNode(name, ip string, ready bool) *v1.Node {
	status := v1.ConditionTrue
	if !ready {
		status = v1.ConditionUnknown
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.NodeSpec{PodCIDRs: []string{"10.200.0.0/24"}},
		Status: v1.NodeStatus{
			Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: status}},
		},
	}
}

// exportSelectingWeb gives member m an exported ClusterIP Service demo/web
// selecting app=web, with one EndpointSlice of addrs (ready as said).
func exportSelectingWeb(t *testing.T, m *fakeMember, ready bool, addrs ...string) {
	t.Helper()
	ctx := context.Background()
	if _, err := m.kube.CoreV1().Services("demo").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", UID: "uid-web"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, webSlice(ready, addrs...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.mcs.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, &mcsv1beta1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", CreationTimestamp: metav1.Now(), UID: types.UID("export-web-" + m.id)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "the export in "+m.id+"'s caches", func() bool {
		_, err := m.exports.ServiceExports("demo").Get("web")
		_, svcErr := m.services.Services("demo").Get("web")
		return err == nil && svcErr == nil && len(indexed[*discoveryv1.EndpointSlice](m.localSlices, byService, "demo/web")) == 1 && m.inf.nodes.HasSynced()
	})
}

// webSlice is demo/web's slice as the EndpointSlice controller writes it
// (owned by the Service, whose UID is uid-web).
func webSlice(ready bool, addrs ...string) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abcde", Namespace: "demo", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "uid-web", Controller: ptr.To(true)}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr.To("node-1"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}})
	}
	return slice
}

// allocateNodePort does what the apiserver does for a NodePort Service
// created without node ports.
func allocateNodePort(t *testing.T, m *fakeMember, port int32) {
	t.Helper()
	ctx := context.Background()
	name := export.IngressName("demo", "web")
	svc, err := m.kube.CoreV1().Services("demo").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no ingress Service in %s: %v", m.id, err)
	}
	svc.Spec.Ports[0].NodePort = port
	if _, err := m.kube.CoreV1().Services("demo").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "the node port in "+m.id+"'s cache", func() bool {
		s, err := m.services.Services("demo").Get(name)
		return err == nil && s.Spec.Ports[0].NodePort == port
	})
}

// endpointsBySource returns, for each source cluster of m's MCS slices of
// demo/web, its endpoints as "address:port ready".
func endpointsBySource(t *testing.T, m *fakeMember) map[string][]string {
	t.Helper()
	mcs, _ := slicesIn(t, m)
	out := map[string][]string{}
	for _, s := range mcs {
		src := s.Labels[mcsv1beta1.LabelSourceCluster]
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				state := "ready"
				if !ptr.Deref(ep.Conditions.Ready, true) {
					state = "not-ready"
				}
				out[src] = append(out[src], fmt.Sprintf("%s:%d %s", a, *s.Ports[0].Port, state))
			}
		}
		slices.Sort(out[src])
	}
	return out
}

func TestCoreIngressMembers(t *testing.T) {
	objects := map[string][]runtime.Object{
		"cluster-a": {readyNode("a-node0", "172.30.0.1", true)},
		"cluster-c": {readyNode("c-node0", "172.30.2.1", true), readyNode("c-node1", "172.30.2.2", false)},
	}
	c, ms := newFakeClusterset(t, Config{IngressMembers: map[string]bool{"cluster-c": true}}, []string{"cluster-a", "cluster-b", "cluster-c"}, nil, objects)
	a, b, cc := ms["cluster-a"], ms["cluster-b"], ms["cluster-c"]
	// The same pod IP in a and c: c's pod network overlaps a's.
	exportSelectingWeb(t, a, true, "10.200.0.5")
	exportSelectingWeb(t, cc, true, "10.200.0.5", "10.200.0.6")
	syncAll(t, c, "demo/web")

	// Both exporters get an ingress: b and a cannot reach c's pods, and c
	// cannot reach a's. b, flat like a, needs none of its own.
	for _, m := range []*fakeMember{a, cc} {
		svc, err := m.kube.CoreV1().Services("demo").Get(context.Background(), export.IngressName("demo", "web"), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("no ingress Service in %s: %v", m.id, err)
		}
		if svc.Spec.Type != v1.ServiceTypeNodePort || svc.Spec.Selector["app"] != "web" || !c.wrote(svc) ||
			len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].Kind != "ServiceExport" {
			t.Errorf("%s's ingress Service: %+v", m.id, svc)
		}
		se, _ := m.mcs.MulticlusterV1beta1().ServiceExports("demo").Get(context.Background(), "web", metav1.GetOptions{})
		if cond := meta.FindStatusCondition(se.Status.Conditions, ConditionIngressReady); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != export.IngressReasonPending {
			t.Errorf("%s's export before node ports: %+v", m.id, se.Status.Conditions)
		}
		allocateNodePort(t, m, 30080)
	}
	syncAll(t, c, "demo/web")

	want := map[*fakeMember]map[string][]string{
		a:  {"cluster-a": {"10.200.0.5:8080 ready"}, "cluster-c": {"172.30.2.1:30080 ready"}},
		b:  {"cluster-a": {"10.200.0.5:8080 ready"}, "cluster-c": {"172.30.2.1:30080 ready"}},
		cc: {"cluster-c": {"10.200.0.5:8080 ready", "10.200.0.6:8080 ready"}, "cluster-a": {"172.30.0.1:30080 ready"}},
	}
	check := func(when string) {
		t.Helper()
		for m, w := range want {
			if got := endpointsBySource(t, m); !equalEndpoints(got, w) {
				t.Errorf("%s: %s's endpoints %v, want %v", when, m.id, got, w)
			}
		}
	}
	check("node ports allocated")
	if _, has := ms["cluster-b"].kube.CoreV1().Services("demo").Get(context.Background(), export.IngressName("demo", "web"), metav1.GetOptions{}); has == nil {
		t.Error("b, which exports nothing, got an ingress Service")
	}
	se, _ := cc.mcs.MulticlusterV1beta1().ServiceExports("demo").Get(context.Background(), "web", metav1.GetOptions{})
	if cond := meta.FindStatusCondition(se.Status.Conditions, ConditionIngressReady); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("c's export: %+v", se.Status.Conditions)
	}

	// Written again with the caches showing the writes: nothing changes.
	expectResyncWritesNothing(t, c, b, 2)

	// c's other node becomes Ready: a second entry point.
	n, _ := cc.kube.CoreV1().Nodes().Get(context.Background(), "c-node1", metav1.GetOptions{})
	n.Status.Conditions[0].Status = v1.ConditionTrue
	if _, err := cc.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "c-node1 Ready in c's cache", func() bool {
		n, err := cc.nodes.Get("c-node1")
		return err == nil && n.Status.Conditions[0].Status == v1.ConditionTrue
	})
	syncAll(t, c, "demo/web")
	want[a]["cluster-c"] = []string{"172.30.2.1:30080 ready", "172.30.2.2:30080 ready"}
	want[b]["cluster-c"] = want[a]["cluster-c"]
	check("c-node1 Ready")

	// c's pods all go unready: its entry points are not ready either.
	if _, err := cc.kube.DiscoveryV1().EndpointSlices("demo").Update(context.Background(), webSlice(false, "10.200.0.5", "10.200.0.6"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "c's unready pods in its cache", func() bool {
		s := indexed[*discoveryv1.EndpointSlice](cc.localSlices, byService, "demo/web")
		return len(s) == 1 && !*s[0].Endpoints[0].Conditions.Ready
	})
	syncAll(t, c, "demo/web")
	want[a]["cluster-c"] = []string{"172.30.2.1:30080 not-ready", "172.30.2.2:30080 not-ready"}
	want[b]["cluster-c"] = want[a]["cluster-c"]
	want[cc]["cluster-c"] = []string{"10.200.0.5:8080 not-ready", "10.200.0.6:8080 not-ready"}
	check("c's pods unready")
}

func equalEndpoints(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

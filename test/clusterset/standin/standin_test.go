package standin

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
)

// member returns a member cluster whose Service demo/web has one ready
// endpoint at ip, exported.
func member(id, ip string) *Member {
	ready := true
	port, proto, name := int32(8080), v1.ProtocolTCP, "http"
	kube := kubefake.NewSimpleClientset(
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		&v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo"},
			Spec:       v1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-x1y2z", Namespace: "demo", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
		},
	)
	mcs := mcsfake.NewSimpleClientset(&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo"}})
	prop := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": aboutv1alpha1.SchemeGroupVersion.String(),
		"kind":       "ClusterProperty",
		"metadata":   map[string]any{"name": aboutv1alpha1.ClusterIDProperty},
		"spec":       map[string]any{"value": id},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{aboutv1alpha1.Resource: "ClusterPropertyList"}, prop)
	return &Member{Context: "ctx-" + id, Kube: kube, MCS: mcs, Dynamic: dyn}
}

// state describes a member's import and MCS slices.
func state(t *testing.T, m *Member) string {
	t.Helper()
	ctx := context.Background()
	imports, err := m.MCS.MulticlusterV1beta1().ServiceImports("demo").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, si := range imports.Items {
		var clusters []string
		for _, c := range si.Status.Clusters {
			clusters = append(clusters, c.Cluster)
		}
		parts = append(parts, fmt.Sprintf("import %s %s ports=%v from=%v", si.Name, si.Spec.Type, si.Spec.Ports[0].Port, clusters))
	}
	slices, err := m.Kube.DiscoveryV1().EndpointSlices("demo").List(ctx, metav1.ListOptions{LabelSelector: labelServiceName})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		if s.Labels[discoveryv1.LabelManagedBy] != managedBy || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "ServiceImport" {
			t.Errorf("slice %s: labels %v, owners %v", s.Name, s.Labels, s.OwnerReferences)
		}
		parts = append(parts, fmt.Sprintf("slice from %s: %s", s.Labels[labelSourceCluster], s.Endpoints[0].Addresses[0]))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func TestSyncImportsEveryExportIntoEveryMember(t *testing.T) {
	ctx := context.Background()
	a, b := member("cluster-a", "10.200.0.2"), member("cluster-b", "10.201.0.2")
	members := []*Member{a, b}
	if err := Sync(ctx, members); err != nil {
		t.Fatal(err)
	}
	want := "import web ClusterSetIP ports=80 from=[cluster-a cluster-b]; slice from cluster-a: 10.200.0.2; slice from cluster-b: 10.201.0.2"
	for _, m := range members {
		if got := state(t, m); got != want {
			t.Errorf("%s:\n got %s\nwant %s", m.Context, got, want)
		}
	}
	ipOf := func(m *Member) string {
		si, err := m.MCS.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return si.Spec.IPs[0]
	}
	vip := ipOf(a)
	if ipOf(b) != vip || !netip.MustParsePrefix("10.250.0.0/16").Contains(netip.MustParseAddr(vip)) {
		t.Errorf("clusterset IPs %s and %s, want one IP in 10.250.0.0/16", vip, ipOf(b))
	}

	// cluster-b stops exporting: its endpoints leave every member.
	if err := b.MCS.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Sync(ctx, members); err != nil {
		t.Fatal(err)
	}
	want = "import web ClusterSetIP ports=80 from=[cluster-a]; slice from cluster-a: 10.200.0.2"
	for _, m := range members {
		if got := state(t, m); got != want {
			t.Errorf("%s after cluster-b unexported:\n got %s\nwant %s", m.Context, got, want)
		}
	}
	if ipOf(b) != vip {
		t.Errorf("the clusterset IP changed from %s to %s", vip, ipOf(b))
	}

	// Nobody exports: the import goes too.
	if err := a.MCS.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Sync(ctx, members); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if got := state(t, m); got != "" {
			t.Errorf("%s after nobody exports: %s", m.Context, got)
		}
	}
}

func TestVIPForIsStableAndAHostAddressOfTheClustersetRange(t *testing.T) {
	seen := map[string]bool{}
	for i := range 500 {
		vip := vipFor("ns", fmt.Sprintf("svc-%d", i))
		addr := netip.MustParseAddr(vip)
		if !netip.MustParsePrefix("10.250.0.0/16").Contains(addr) || strings.HasSuffix(vip, ".0") || strings.HasSuffix(vip, ".255") {
			t.Errorf("vipFor gave %s", vip)
		}
		if vipFor("ns", fmt.Sprintf("svc-%d", i)) != vip {
			t.Errorf("vipFor is not stable")
		}
		seen[vip] = true
	}
	if len(seen) < 490 {
		t.Errorf("only %d distinct IPs for 500 names", len(seen))
	}
}

package mcs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/catalogmodel"
)

// TestCatalogPlans: where the catalog places team A's authz under
// frontend/authz in cluster-a and team B's under the same name in
// cluster-b and cluster-c, the plan holds one ServicePlan per global
// service, imported only where it is placed, with slices of its own
// (the same member-side names apart); each member reads back exactly its
// own variant, as push mode's writer gets it.
func TestCatalogPlans(t *testing.T) {
	variant := func(global, ip, cluster, addr string) *catalogmodel.Variant {
		si := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: "frontend", Name: "authz", Labels: map[string]string{managedLabel: "m"}, Annotations: map[string]string{catalog.AnnotationGlobalService: global}},
			Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{ip}, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		}
		// Both teams name their binding "authz" and bind a Service
		// whose slice is "authz-1": the member-side slice names are the
		// same.
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "frontend", Name: export.SliceName("authz", cluster, "authz-authz-1"), Labels: export.ImportedSliceLabels("authz", cluster, "m")},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
		return &catalogmodel.Variant{Import: si, Clusters: []string{cluster}, Slices: map[string]*discoveryv1.EndpointSlice{s.Name: s}}
	}
	a := variant("team-a/authz", "10.42.0.1", "cluster-x", "10.1.0.1")
	b := variant("team-b/authz", "10.42.0.2", "cluster-x", "10.2.0.1")
	places := map[string]map[string]*catalogmodel.Variant{"frontend/authz": {"cluster-a": a, "cluster-b": b, "cluster-c": b}}

	plans, planned := catalogPlansOf(places)
	if len(plans) != 2 {
		t.Fatalf("%d plans, want one per global service", len(plans))
	}
	names := map[string]bool{}
	for name, sp := range plans {
		if sp.Name != name || sp.Spec.Service != (hubv1alpha1.ServiceName{Namespace: "frontend", Name: "authz"}) || sp.Spec.GlobalService == "" {
			t.Errorf("plan %s: %+v", name, sp.Spec)
		}
		for _, s := range planned[name] {
			if names[s.Name] {
				t.Errorf("two plans hold a slice named %s", s.Name)
			}
			names[s.Name] = true
		}
	}
	// Each member reads, of the plans of frontend/authz, the one placing
	// a global service in it.
	for member, want := range map[string]*catalogmodel.Variant{"cluster-a": a, "cluster-b": b, "cluster-c": b} {
		var mine []*hubv1alpha1.ServicePlan
		for _, sp := range plans {
			for _, id := range sp.Spec.ImportedIn {
				if id == member {
					mine = append(mine, sp)
				}
			}
		}
		if len(mine) != 1 {
			t.Fatalf("%s is placed by %d plans, want 1", member, len(mine))
		}
		d, err := desiredOfHubPlan(mine[0], planned[mine[0].Name], "m", func(string, v1.ServiceType) *v1.Service { return nil })
		if err != nil {
			t.Fatal(err)
		}
		got := &desiredState{Import: d.Import, Clusters: d.Clusters, Slices: d.Slices}
		if diff := cmp.Diff(&desiredState{Import: want.Import, Clusters: want.Clusters, Slices: want.Slices}, got, cmp.AllowUnexported(desiredState{})); diff != "" {
			t.Errorf("%s reads back (-placed +read):\n%s", member, diff)
		}
	}
}

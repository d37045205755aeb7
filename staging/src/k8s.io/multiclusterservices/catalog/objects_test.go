package catalog

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	"k8s.io/multiclusterservices/export"
	"k8s.io/multiclusterservices/proxy"
)

// A global service provided by a Service in cluster-a and by VMs bound
// from cluster-b's network, imported into cluster-c as shop/authz-a.
func TestCatalogObjects(t *testing.T) {
	svcBinding := bindService("team-a", "authz-a", 1, "authz", "cluster-a", "frontend", "authz")
	vms := bindAddresses("team-a", "vms", 2, "authz", "cluster-b", "192.0.2.10", "192.0.2.11", "2001:db8::10")
	vms.Spec.Endpoints[1].Ready = ptr.To(false)
	missing := bindService("team-a", "missing", 3, "authz", "cluster-b", "frontend", "authz")
	s := &Service{Key: "team-a/authz", Bindings: []*catalogv1alpha1.ServiceBinding{svcBinding, vms, missing}}
	authz := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "frontend", Name: "authz"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.9", Ports: []v1.ServicePort{
			{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
		}},
	}
	exports, unbound := Exports(s, func(cluster string, name catalogv1alpha1.LocalName) *v1.Service {
		if cluster == "cluster-a" && name == (catalogv1alpha1.LocalName{Namespace: "frontend", Name: "authz"}) {
			return authz
		}
		return nil
	})
	if len(exports) != 2 || exports[0].Cluster != "authz-a" || exports[1].Cluster != "vms" || unbound["missing"] == "" || len(unbound) != 1 {
		t.Fatalf("exports %+v, unbound %v", exports, unbound)
	}
	r := export.Merge(exports)
	if len(r.Conflicts) > 0 || r.Spec.Type != mcsv1beta1.ClusterSetIP || len(r.Spec.Ports) != 1 || r.Spec.Ports[0].Port != 80 ||
		!r.ServedPorts["authz-a"]["http"] || !r.ServedPorts["vms"]["http"] {
		t.Fatalf("merged: %+v", r)
	}

	p := Placement{Cluster: "cluster-c", LocalName: catalogv1alpha1.LocalName{Namespace: "shop", Name: "authz-a"}, Import: "team-b/authz-a"}
	si := Import(p, s, r, []string{"10.250.0.7"}, "mcs-controller")
	if si.Namespace != "shop" || si.Name != "authz-a" || si.Spec.IPs[0] != "10.250.0.7" || si.Labels[proxy.LabelImportManagedBy] != "mcs-controller" || si.Annotations[AnnotationGlobalService] != "team-a/authz" {
		t.Errorf("import %+v", si)
	}

	// The VMs: one slice per family, at their target port, readiness from
	// the binding and the health check.
	healthy := func(addr string) bool { return addr != "2001:db8::10" }
	slices := BindingSlices(vms, p, "mcs-controller", r.ServedPorts["vms"], healthy)
	if len(slices) != 2 {
		t.Fatalf("%d slices, want one per family", len(slices))
	}
	ready := map[string]bool{}
	for _, sl := range slices {
		checkImportedSlice(t, sl, "shop", "authz-a", "cluster-b")
		if len(sl.Ports) != 1 || *sl.Ports[0].Port != 8080 || *sl.Ports[0].Name != "http" {
			t.Errorf("slice %s ports %+v, want http at 8080", sl.Name, sl.Ports)
		}
		for _, ep := range sl.Endpoints {
			ready[ep.Addresses[0]] = *ep.Conditions.Ready
		}
	}
	if !ready["192.0.2.10"] || ready["192.0.2.11"] || ready["2001:db8::10"] || len(ready) != 3 {
		t.Errorf("readiness %v: want only 192.0.2.10 ready (.11 not ready by the binding, ::10 failing its check)", ready)
	}
	if slices[0].Name == slices[1].Name {
		t.Error("both families' slices have one name")
	}
	if got := BindingSlices(vms, p, "mcs-controller", map[string]bool{}, nil); len(got[0].Ports) != 0 {
		t.Errorf("ports not served are listed: %+v", got[0].Ports)
	}

	// The Service's slices, in the placement's namespace and name, named
	// after the binding.
	src := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "frontend", Name: "authz-x1"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.200.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	sl := ServiceSlice(src, svcBinding, p, "mcs-controller", r.ServedPorts["authz-a"], nil)
	checkImportedSlice(t, sl, "shop", "authz-a", "cluster-a")
	other := bindService("team-a", "authz-a-again", 4, "authz", "cluster-a", "frontend", "authz")
	if ServiceSlice(src, other, p, "mcs-controller", r.ServedPorts["authz-a"], nil).Name == sl.Name {
		t.Error("two bindings of one Service in one cluster write one slice")
	}
}

func checkImportedSlice(t *testing.T, s *discoveryv1.EndpointSlice, ns, name, cluster string) {
	t.Helper()
	if s.Namespace != ns || s.Labels[mcsv1beta1.LabelServiceName] != name || s.Labels[mcsv1beta1.LabelSourceCluster] != cluster ||
		s.Labels[discoveryv1.LabelManagedBy] != "mcs-controller" {
		t.Errorf("slice %s/%s labels %v, want service %s from %s", s.Namespace, s.Name, s.Labels, name, cluster)
	}
	if !proxy.IsMultiClusterEndpointSlice(s) || !proxy.SharesImportService(s) {
		t.Errorf("slice %s is not an MCS slice that names its import's synthetic Service: %v", s.Name, s.Labels)
	}
	if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
		t.Errorf("slice name %q: %v", s.Name, errs)
	}
	if _, err := proxy.EndpointSliceForImport(s, &proxy.Options{TrustedManagers: []string{"mcs-controller"}}); err != nil {
		t.Errorf("kube-proxy would reject slice %s: %v", s.Name, err)
	}
}

package mcs

import (
	"context"
	"slices"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	catalogfake "k8s.io/multiclusterservices/client/catalog/clientset/versioned/fake"
)

func hubNamespace(name, owns string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{catalogv1alpha1.AnnotationMemberNamespaces: owns}}}
}

// newCatalogClusterset is a clusterset of cluster-a, -b and -c in catalog
// mode, over a fake hub holding objs; cluster-a has Service
// frontend/authz with one endpoint, cluster-c the namespace shop.
func newCatalogClusterset(t *testing.T, objs ...runtime.Object) (*Controller, map[string]*fakeMember, *catalogfake.Clientset) {
	t.Helper()
	hub := catalogfake.NewSimpleClientset(objs...)
	hubKube := kubefake.NewSimpleClientset(hubNamespace("team-a", "frontend"), hubNamespace("team-b", "cluster-c/shop"))
	frontend := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "frontend"}}
	c, ms := newFakeClusterset(t, Config{Catalog: &CatalogConfig{Hub: hub, HubKube: hubKube}}, []string{"cluster-a", "cluster-b", "cluster-c"}, nil, map[string][]runtime.Object{
		"cluster-a": {frontend,
			&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "frontend", Name: "authz", UID: "uid-authz"}, Spec: v1.ServiceSpec{
				Selector: map[string]string{"app": "authz"},
				Ports:    []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
			}},
			&discoveryv1.EndpointSlice{
				// As the EndpointSlice controller writes it.
				ObjectMeta: metav1.ObjectMeta{Namespace: "frontend", Name: "authz-x1", Labels: map[string]string{
					discoveryv1.LabelServiceName: "authz", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "authz", UID: "uid-authz", Controller: ptr.To(true)}}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.200.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
					TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "frontend", Name: "authz-0"}}},
			}},
		"cluster-b": {frontend},
		"cluster-c": {&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}},
	})
	if _, err := (catalogModel{c}).startCatalog(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c, ms, hub
}

// syncCatalogAll resolves the catalog and writes every key it placed or
// removed into every member.
func syncCatalogAll(t *testing.T, c *Controller) {
	t.Helper()
	if err := (catalogModel{c}).syncCatalog(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, key := range c.desiredKeys() {
		for _, m := range c.members.all() {
			if err := c.syncMember(context.Background(), m, key); err != nil {
				t.Fatalf("writing %s into %s: %v", key, m.id, err)
			}
		}
	}
}

// hubStatus is the conditions and IPs of the catalog object of kind
// (GlobalService, ServiceBinding or GlobalServiceImport) ns/name in the hub.
func hubStatus(t *testing.T, hub *catalogfake.Clientset, kind, ns, name string) (conds []metav1.Condition, ips []string) {
	t.Helper()
	client := hub.CatalogV1alpha1()
	var err error
	switch kind {
	case "GlobalService":
		var o *catalogv1alpha1.GlobalService
		if o, err = client.GlobalServices(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
			conds, ips = o.Status.Conditions, o.Status.IPs
		}
	case "ServiceBinding":
		var o *catalogv1alpha1.ServiceBinding
		if o, err = client.ServiceBindings(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
			conds = o.Status.Conditions
		}
	case "GlobalServiceImport":
		var o *catalogv1alpha1.GlobalServiceImport
		if o, err = client.GlobalServiceImports(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
			conds, ips = o.Status.Conditions, o.Status.IPs
		}
	default:
		t.Fatalf("no catalog kind %s", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return conds, ips
}

// The catalog's federated stories through the controller: team A's authz,
// provided by a Service in cluster-a and by VMs reached from cluster-b,
// shared with team B, who imports it into cluster-c as shop/authz-a; a
// binding of B's under A's namespace is refused.
func TestCoreCatalog(t *testing.T) {
	authz := &catalogv1alpha1.GlobalService{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "GlobalService"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "authz", Generation: 1},
		Spec:       catalogv1alpha1.GlobalServiceSpec{ImportPolicy: catalogv1alpha1.ImportSelected, Consumers: []string{"team-b"}},
	}
	svcBinding := &catalogv1alpha1.ServiceBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "ServiceBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "authz-a", Generation: 1},
		Spec: catalogv1alpha1.ServiceBindingSpec{GlobalService: "authz", Cluster: "cluster-a",
			Service: &catalogv1alpha1.LocalName{Namespace: "frontend", Name: "authz"}},
	}
	vms := &catalogv1alpha1.ServiceBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "ServiceBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "vms", Generation: 1},
		Spec: catalogv1alpha1.ServiceBindingSpec{GlobalService: "authz", Cluster: "cluster-b",
			Endpoints: []catalogv1alpha1.BoundEndpoint{{Address: "192.0.2.10"}},
			Ports:     []catalogv1alpha1.BoundPort{{Name: "http", Port: 80, TargetPort: 9090}}},
	}
	hijack := &catalogv1alpha1.ServiceBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "ServiceBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "hijack", Generation: 1},
		Spec: catalogv1alpha1.ServiceBindingSpec{GlobalService: "authz", Cluster: "cluster-a",
			Service: &catalogv1alpha1.LocalName{Namespace: "frontend", Name: "authz"}},
	}
	imp := &catalogv1alpha1.GlobalServiceImport{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "GlobalServiceImport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "authz-a", Generation: 1},
		Spec: catalogv1alpha1.GlobalServiceImportSpec{GlobalService: catalogv1alpha1.GlobalServiceRef{Namespace: "team-a", Name: "authz"},
			Cluster: "cluster-c", LocalName: catalogv1alpha1.LocalName{Namespace: "shop", Name: "authz-a"}},
	}
	c, ms, hub := newCatalogClusterset(t, authz, svcBinding, vms, hijack, imp)
	a, b, cc := ms["cluster-a"], ms["cluster-b"], ms["cluster-c"]
	syncCatalogAll(t, c)
	// Resolved before the member holds it: not Ready yet.
	if conds, _ := hubStatus(t, hub, "GlobalServiceImport", "team-b", "authz-a"); meta.FindStatusCondition(conds, "Ready") == nil ||
		meta.FindStatusCondition(conds, "Ready").Reason != "Pending" {
		t.Errorf("catalog import status before the member holds the import: %+v", conds)
	}

	// Only cluster-c imports it, under its own name, with the global
	// service's clusterset IP; both providers' endpoints are there.
	si, err := cc.mcs.MulticlusterV1beta1().ServiceImports("shop").Get(context.Background(), "authz-a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no import shop/authz-a in cluster-c: %v", err)
	}
	if len(si.Spec.IPs) != 1 || si.Annotations[catalog.AnnotationGlobalService] != "team-a/authz" || len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80 {
		t.Errorf("cluster-c's import: %+v", si)
	}
	got := map[string][]string{}
	list, _ := cc.kube.DiscoveryV1().EndpointSlices("shop").List(context.Background(), metav1.ListOptions{})
	for _, s := range list.Items {
		if s.Labels[mcsv1beta1.LabelServiceName] != "authz-a" || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Name != "authz-a" {
			t.Errorf("slice %s: labels %v owners %v", s.Name, s.Labels, s.OwnerReferences)
		}
		for _, ep := range s.Endpoints {
			got[s.Labels[mcsv1beta1.LabelSourceCluster]] = append(got[s.Labels[mcsv1beta1.LabelSourceCluster]], ep.Addresses[0]+":"+itoa32(*s.Ports[0].Port))
		}
	}
	if !slices.Equal(got["cluster-a"], []string{"10.200.0.5:8080"}) || !slices.Equal(got["cluster-b"], []string{"192.0.2.10:9090"}) || len(got) != 2 {
		t.Errorf("cluster-c's endpoints of shop/authz-a: %v", got)
	}
	for _, m := range []*fakeMember{a, b} {
		if imports, _ := m.mcs.MulticlusterV1beta1().ServiceImports("").List(context.Background(), metav1.ListOptions{}); len(imports.Items) != 0 {
			t.Errorf("%s, which imports nothing, got %d imports", m.id, len(imports.Items))
		}
	}

	// Written again with the caches showing the writes: nothing changes.
	waitCache(t, "c's writes in its caches", func() bool {
		si, err := cc.imports.ServiceImports("shop").Get("authz-a")
		return err == nil && len(si.Status.Conditions) > 0 && len(writtenIn(cc.member, "shop", "authz-a")) == 2
	})
	if wrote := writesOf(t, cc, func() { syncCatalogAll(t, c) }); len(wrote) > 0 {
		t.Errorf("a second resolution with nothing changed wrote into cluster-c: %v", wrote)
	}

	// The hub says so, once the member holds it; before, the import was
	// Pending.
	conds, ips := hubStatus(t, hub, "GlobalService", "team-a", "authz")
	if cond := meta.FindStatusCondition(conds, "Ready"); cond == nil || cond.Status != metav1.ConditionTrue || !slices.Equal(ips, si.Spec.IPs) {
		t.Errorf("global service status: %+v ips %v", conds, ips)
	}
	conds, ips = hubStatus(t, hub, "GlobalServiceImport", "team-b", "authz-a")
	if cond := meta.FindStatusCondition(conds, "Ready"); cond == nil || cond.Status != metav1.ConditionTrue || !slices.Equal(ips, si.Spec.IPs) {
		t.Errorf("catalog import status: %+v ips %v", conds, ips)
	}
	conds, _ = hubStatus(t, hub, "ServiceBinding", "team-b", "hijack")
	if cond := meta.FindStatusCondition(conds, "Valid"); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != catalog.ReasonGlobalServiceNotFound {
		t.Errorf("team-b's hijacking binding: %+v", conds)
	}
	conds, _ = hubStatus(t, hub, "ServiceBinding", "team-a", "vms")
	if cond := meta.FindStatusCondition(conds, "Ready"); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("the VMs' binding: %+v", conds)
	}

	// The import is deleted from the catalog: cluster-c's goes.
	if err := hub.CatalogV1alpha1().GlobalServiceImports("team-b").Delete(context.Background(), "authz-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "the catalog import gone from the hub's cache", func() bool {
		imports, _ := c.catalog.imports.List(labels.Everything())
		return len(imports) == 0
	})
	syncCatalogAll(t, c)
	if _, err := cc.mcs.MulticlusterV1beta1().ServiceImports("shop").Get(context.Background(), "authz-a", metav1.GetOptions{}); err == nil {
		t.Error("cluster-c still imports shop/authz-a")
	}
}

func itoa32(p int32) string { return strconv.Itoa(int(p)) }

// A member served in derived mode consumes the catalog like the export
// model: a derived Service and its slices, under the local name's import.
func TestCoreCatalogDerivedMember(t *testing.T) {
	authz := &catalogv1alpha1.GlobalService{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "GlobalService"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "authz"},
		Spec:       catalogv1alpha1.GlobalServiceSpec{ImportPolicy: catalogv1alpha1.ImportSelected, Consumers: []string{"team-b"}},
	}
	binding := &catalogv1alpha1.ServiceBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "ServiceBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "authz-a"},
		Spec: catalogv1alpha1.ServiceBindingSpec{GlobalService: "authz", Cluster: "cluster-a",
			Service: &catalogv1alpha1.LocalName{Namespace: "frontend", Name: "authz"}},
	}
	imp := &catalogv1alpha1.GlobalServiceImport{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "GlobalServiceImport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "authz-a"},
		Spec: catalogv1alpha1.GlobalServiceImportSpec{GlobalService: catalogv1alpha1.GlobalServiceRef{Namespace: "team-a", Name: "authz"},
			Cluster: "cluster-c", LocalName: catalogv1alpha1.LocalName{Namespace: "shop", Name: "authz-a"}},
	}
	c, ms, _ := newCatalogClusterset(t, authz, binding, imp)
	c.cfg.DerivedMembers = map[string]bool{"cluster-c": true}
	cc := ms["cluster-c"]
	syncCatalogAll(t, c)
	waitCache(t, "c's import in its cache", func() bool {
		_, err := cc.imports.ServiceImports("shop").Get("authz-a")
		return err == nil
	})
	syncCatalogAll(t, c)
	derived := export.DerivedName("shop", "authz-a")
	svc, err := cc.kube.CoreV1().Services("shop").Get(context.Background(), derived, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no derived Service %s in cluster-c: %v", derived, err)
	}
	si, _ := cc.mcs.MulticlusterV1beta1().ServiceImports("shop").Get(context.Background(), "authz-a", metav1.GetOptions{})
	if si.Annotations[export.AnnotationDerivedService] != derived || !slices.Equal(si.Spec.IPs, svc.Spec.ClusterIPs) {
		t.Errorf("cluster-c's import %v %v, derived Service IPs %v", si.Annotations, si.Spec.IPs, svc.Spec.ClusterIPs)
	}
	list, _ := cc.kube.DiscoveryV1().EndpointSlices("shop").List(context.Background(), metav1.ListOptions{})
	found := false
	for _, s := range list.Items {
		if s.Labels[discoveryv1.LabelServiceName] == derived && len(s.Endpoints) == 1 && s.Endpoints[0].Addresses[0] == "10.200.0.5" {
			found = true
		}
	}
	if !found {
		t.Errorf("no slice of the derived Service with cluster-a's endpoint: %+v", list.Items)
	}
}

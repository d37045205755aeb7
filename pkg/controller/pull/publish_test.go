package pull

import (
	"maps"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestPublishedSliceName(t *testing.T) {
	long := strings.Repeat("s", 250)
	for _, tc := range []struct{ ns, slice, want string }{
		{"demo", "web-abcde", "demo.web-abcde"},
		// A slice name may hold dots: the namespace, first, holds none.
		{"demo", "web.v2", "demo.web.v2"},
	} {
		if got := PublishedSliceName(tc.ns, tc.slice); got != tc.want {
			t.Errorf("PublishedSliceName(%q, %q) = %q, want %q", tc.ns, tc.slice, got, tc.want)
		}
	}
	a, b := PublishedSliceName("demo", long+"a"), PublishedSliceName("demo", long+"b")
	if a == b || len(validation.IsDNS1123Subdomain(a)) > 0 || !strings.HasPrefix(a, "demo.") {
		t.Errorf("long slice names: %q and %q, want two distinct names of namespace demo", a, b)
	}
}

func TestPublishExport(t *testing.T) {
	now := metav1.Now()
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", CreationTimestamp: now}}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}, Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone}}
	going := svc.DeepCopy()
	going.DeletionTimestamp = &now
	if got := PublishExport(Source{Service: svc}); got != nil {
		t.Errorf("no export: published %+v", got)
	}
	deleted := se.DeepCopy()
	deleted.DeletionTimestamp = &now
	if got := PublishExport(Source{Export: deleted, Service: svc}); got != nil {
		t.Errorf("an export being deleted: published %+v", got)
	}
	me := PublishExport(Source{Export: se, Service: svc})
	if me.Name != "demo.web" || me.Labels[hubv1alpha1.LabelServiceNamespace] != "demo" || me.Labels[hubv1alpha1.LabelServiceName] != "web" ||
		me.Spec.ServiceSpec == nil || me.Spec.ServiceSpec.ClusterIP != v1.ClusterIPNone || !me.Spec.ExportCreated.Equal(&now) {
		t.Errorf("published %+v", me)
	}
	for what, s := range map[string]*v1.Service{"no Service": nil, "a Service being deleted": going} {
		if me := PublishExport(Source{Export: se, Service: s}); me == nil || me.Spec.ServiceSpec != nil {
			t.Errorf("%s: published %+v, want the export without a Service spec (invalid, as push mode finds it)", what, me)
		}
	}
}

func TestPublishSlices(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "svc-uid"}, Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	owner := &hubv1alpha1.MemberExport{ObjectMeta: metav1.ObjectMeta{Name: "demo.web", UID: "me-uid"}}
	slice := func(name, manager, ownerUID string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: manager}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: types.UID(ownerUID), Controller: ptr.To(true)}}
		return s
	}
	managers := []string{export.ManagerEndpointSliceController}
	src := Source{Service: svc, Slices: []*discoveryv1.EndpointSlice{
		slice("web-b", export.ManagerEndpointSliceController, "svc-uid"),
		slice("web-a", export.ManagerEndpointSliceController, "svc-uid"),
		slice("web-hand", "someone", "svc-uid"),
		slice("web-stolen", export.ManagerEndpointSliceController, "other"),
	}}
	got, refused := PublishSlices(src, owner, managers)
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
		if s.Labels[discoveryv1.LabelManagedBy] != AgentManager || s.Labels[discoveryv1.LabelServiceName] != "" ||
			len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "me-uid" || s.Annotations[hubv1alpha1.AnnotationSourceSlice] == "" {
			t.Errorf("published slice %s: labels %v, owners %v, annotations %v", s.Name, s.Labels, s.OwnerReferences, s.Annotations)
		}
	}
	if strings.Join(names, ",") != "demo.web-a,demo.web-b" {
		t.Errorf("published %v, want demo.web-a,demo.web-b in order", names)
	}
	reasons := map[string]export.SourceRefusal{}
	for _, r := range refused {
		reasons[r.Slice.Name] = r.Reason
	}
	if len(reasons) != 2 || reasons["web-hand"] != export.SourceUntrustedManager || reasons["web-stolen"] != export.SourceNotOwned {
		t.Errorf("refused %v, want web-hand (untrusted manager) and web-stolen (not owned)", reasons)
	}
	if got, _ := PublishSlices(Source{Slices: src.Slices}, owner, managers); len(got) != 0 {
		t.Errorf("no Service: published %d slices", len(got))
	}
}

// TestPublishMemberCluster: a member publishes its namespaces, sorted,
// without those being deleted, and the planner reads each back with its
// creation time (the bound on an export's age).
func TestPublishMemberCluster(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ns := func(name string, phase v1.NamespacePhase) *v1.Namespace {
		return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}, Status: v1.NamespaceStatus{Phase: phase}}
	}
	going := ns("going", v1.NamespaceActive)
	going.DeletionTimestamp = &created
	mc := PublishMemberCluster(Member{Namespaces: []*v1.Namespace{ns("web", v1.NamespaceActive), ns("demo", v1.NamespaceActive), ns("old", v1.NamespaceTerminating), going}})
	if mc.Name != hubv1alpha1.MemberClusterName {
		t.Errorf("MemberCluster named %q", mc.Name)
	}
	var names []string
	for _, n := range mc.Spec.Namespaces {
		names = append(names, n.Name)
	}
	if strings.Join(names, ",") != "demo,web" {
		t.Errorf("published namespaces %v, want demo,web", names)
	}
	back := MemberNamespaces(mc)
	if len(back) != 2 || back["demo"] == nil || !back["demo"].CreationTimestamp.Equal(&created) || back["old"] != nil {
		t.Errorf("read back %v", back)
	}
	if mc.Spec.Properties != nil {
		t.Errorf("a member without properties published %v", mc.Spec.Properties)
	}
	// Its entry points: the ready nodes' addresses, whatever order the
	// nodes are listed in.
	node := func(name string, ready v1.ConditionStatus, addrs ...string) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: ready}}}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: a})
		}
		return n
	}
	nodes := []*v1.Node{node("n2", v1.ConditionTrue, "10.0.0.2"), node("n1", v1.ConditionTrue, "10.0.0.1", "fd00::1"), node("n3", v1.ConditionFalse, "10.0.0.3")}
	if got := PublishMemberCluster(Member{Nodes: nodes}).Spec.EntryPoints; strings.Join(got, ",") != "10.0.0.1,10.0.0.2,fd00::1" {
		t.Errorf("entry points %v, want the ready nodes' addresses, sorted", got)
	}
	// Its Service ranges, and the catalog's imports it holds: those its
	// agent wrote, not an import of the export model nor one someone else
	// labelled.
	cidr := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	imp := func(ns, name, global, manager string) *mcsv1beta1.ServiceImport {
		si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{mcsproxy.LabelImportManagedBy: manager}},
			Spec: mcsv1beta1.ServiceImportSpec{IPs: []string{"10.42.0.1"}}}
		if global != "" {
			si.Annotations = map[string]string{catalog.AnnotationGlobalService: global}
		}
		return si
	}
	mc = PublishMemberCluster(Member{
		ServiceCIDRs: []*networkingv1.ServiceCIDR{cidr("kubernetes", "10.96.0.0/16", "fd00:96::/112"), cidr("extra", "10.97.0.0/16")},
		Derived:      true, ManagedBy: "mine",
		Imports: []*mcsv1beta1.ServiceImport{
			imp("shop", "authz-a", "team-a/authz", "mine"), imp("demo", "web", "", "mine"),
			imp("shop", "forged", "team-a/authz", "someone"), imp("app", "authz", "team-b/authz", "mine"),
		},
	})
	if got := strings.Join(mc.Spec.ServiceCIDRs, ","); got != "10.96.0.0/16,10.97.0.0/16,fd00:96::/112" || !mc.Spec.Derived {
		t.Errorf("Service ranges %s, derived %v", got, mc.Spec.Derived)
	}
	var held []string
	for _, ci := range mc.Spec.CatalogImports {
		held = append(held, ci.Service.Namespace+"/"+ci.Service.Name+"="+ci.GlobalService+strings.Join(ci.IPs, ","))
	}
	if got := strings.Join(held, " "); got != "app/authz=team-b/authz10.42.0.1 shop/authz-a=team-a/authz10.42.0.1" {
		t.Errorf("catalog imports %s", got)
	}
}

// TestPublishBoundService: a Service the catalog binds is published
// without an export, read back as bound and not exported (the export
// model does not take it for an export); not bound, it is not published.
func TestPublishBoundService(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "frontend", Name: "authz", CreationTimestamp: created}, Spec: v1.ServiceSpec{ClusterIP: "10.96.0.9"}}
	if me := PublishExport(Source{Service: svc}); me != nil {
		t.Errorf("a Service neither exported nor bound published as %+v", me)
	}
	me := PublishExport(Source{Service: svc, Bound: true})
	if me == nil || !me.Spec.CatalogOnly || me.Name != "frontend.authz" || me.Spec.ServiceSpec == nil || !me.Spec.ExportCreated.Equal(&created) {
		t.Fatalf("a bound Service published as %+v", me)
	}
	back := Read(me, nil)
	if back.Export != nil || !back.Bound || back.Service == nil || back.Service.Spec.ClusterIP != "10.96.0.9" {
		t.Errorf("read back as export %v, bound %v, Service %v", back.Export, back.Bound, back.Service)
	}
	// Exported and bound: an export, as the export model reads it.
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "frontend", Name: "authz", CreationTimestamp: metav1.Now()}}
	if me := PublishExport(Source{Export: se, Service: svc, Bound: true}); me.Spec.CatalogOnly || Read(me, nil).Export == nil {
		t.Errorf("an exported Service the catalog binds published as catalog-only")
	}
	going := svc.DeepCopy()
	going.DeletionTimestamp = &created
	if me := PublishExport(Source{Service: going, Bound: true}); me != nil {
		t.Errorf("a bound Service being deleted published as %+v", me)
	}
}

// TestPublishIngress: what a member holds of an export's ingress reaches
// the planner as export.IngressSlices reads it: an ingress Service's node
// ports and whether the agent made it; an exported LoadBalancer Service's
// load-balancer addresses; a Service of another name is not taken for
// the ingress.
func TestPublishIngress(t *testing.T) {
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "se-uid"}}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}, Spec: v1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
	}}
	ingress := export.IngressService(svc, se, v1.ServiceTypeNodePort, "mcs-controller")
	ingress.Spec.Ports[0].NodePort = 30080
	ingress.Labels["unrelated"] = "x"
	back := Read(PublishExport(Source{Export: se, Service: svc, Ingress: ingress}), nil)
	if back.Ingress == nil || back.Ingress.Name != ingress.Name || back.Ingress.Spec.Type != v1.ServiceTypeNodePort ||
		back.Ingress.Spec.Ports[0].NodePort != 30080 || back.Ingress.Labels[export.LabelManagedBy] != "mcs-controller" ||
		back.Ingress.Labels[export.LabelIngressFor] != "web" || back.Ingress.Labels["unrelated"] != "" {
		t.Errorf("the ingress Service read back as %+v", back.Ingress)
	}
	// A Service of the ingress name someone else made: read back
	// without the agent's labels, so that the planner does not use it.
	squatter := ingress.DeepCopy()
	squatter.Labels = nil
	if back := Read(PublishExport(Source{Export: se, Service: svc, Ingress: squatter}), nil); back.Ingress == nil || len(back.Ingress.Labels) != 0 {
		t.Errorf("a squatted ingress name read back as %+v", back.Ingress)
	}
	lb := svc.DeepCopy()
	lb.Spec.Type = v1.ServiceTypeLoadBalancer
	lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.10"}, {Hostname: "lb.example"}}
	back = Read(PublishExport(Source{Export: se, Service: lb, Ingress: ingress}), nil)
	if back.Ingress != nil || back.Service == nil || len(back.Service.Status.LoadBalancer.Ingress) != 1 || back.Service.Status.LoadBalancer.Ingress[0].IP != "192.0.2.10" {
		t.Errorf("an exported LoadBalancer Service read back as %+v, ingress %+v: want its own address, no other ingress", back.Service, back.Ingress)
	}
	other := ingress.DeepCopy()
	other.Name = "ingress-other"
	if back := Read(PublishExport(Source{Export: se, Service: svc, Ingress: other}), nil); back.Ingress != nil {
		t.Errorf("a Service not of the export's ingress name read back as its ingress: %+v", back.Ingress)
	}
}

// TestMemberProperties: a member's properties reach the planner as it
// published them, but for its cluster ID, which is its hub namespace: a
// member that claims another's ID (to be selected as it, or to select as
// it) is still itself.
func TestMemberProperties(t *testing.T) {
	own := map[string]string{"region.topology.k8s.io": "eu", aboutv1alpha1.ClusterIDProperty: "cluster-a"}
	mc := PublishMemberCluster(Member{Properties: own})
	own["region.topology.k8s.io"] = "changed after publishing"
	got := MemberProperties("cluster-a", mc.Spec.Properties, nil)
	if want := map[string]string{"region.topology.k8s.io": "eu", aboutv1alpha1.ClusterIDProperty: "cluster-a"}; !maps.Equal(got, want) {
		t.Errorf("read back %v, want %v", got, want)
	}
	// cluster-b's agent publishes cluster-a's ID and region.
	claim := PublishMemberCluster(Member{Properties: map[string]string{"region.topology.k8s.io": "eu", aboutv1alpha1.ClusterIDProperty: "cluster-a"}})
	if got := MemberProperties("cluster-b", claim.Spec.Properties, nil)[aboutv1alpha1.ClusterIDProperty]; got != "cluster-b" {
		t.Errorf("cluster-b claiming cluster-a's ID is read as %q, want cluster-b", got)
	}
	// A member without ClusterProperties is still its ID.
	if got := MemberProperties("cluster-c", PublishMemberCluster(Member{}).Spec.Properties, nil); !maps.Equal(got, map[string]string{aboutv1alpha1.ClusterIDProperty: "cluster-c"}) {
		t.Errorf("cluster-c without properties is read as %v", got)
	}
}

// TestMemberPropertiesUnderAProfile: where the hub's inventory has a
// ClusterProfile of the member, the cluster manager's word wins over what
// the member's administrator publishes for every name both give; the
// member only adds names the profile does not give, and neither can make
// it another cluster.
func TestMemberPropertiesUnderAProfile(t *testing.T) {
	const region = "region.topology.k8s.io"
	// cluster-a's administrator claims eu, to be selected by eu's
	// importers; its cluster manager says us.
	mc := PublishMemberCluster(Member{Properties: map[string]string{region: "eu", "zone.example": "z1"}})
	profile := []inventoryv1alpha1.Property{{Name: region, Value: "us"}, {Name: aboutv1alpha1.ClusterIDProperty, Value: "cluster-b"}}
	got := MemberProperties("cluster-a", mc.Spec.Properties, profile)
	want := map[string]string{region: "us", "zone.example": "z1", aboutv1alpha1.ClusterIDProperty: "cluster-a"}
	if !maps.Equal(got, want) {
		t.Errorf("cluster-a under its profile reads %v, want %v", got, want)
	}
}

// TestProfileProperties: profiles name their member by the cluster ID
// they state; one that states none names no member, nor one of another
// clusterset; of two profiles of one member, the oldest one's properties
// are taken.
func TestProfileProperties(t *testing.T) {
	const region = "region.topology.k8s.io"
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC)) }
	profile := func(name string, created metav1.Time, props ...string) *inventoryv1alpha1.ClusterProfile {
		cp := &inventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet", CreationTimestamp: created}}
		for i := 0; i+1 < len(props); i += 2 {
			cp.Status.Properties = append(cp.Status.Properties, inventoryv1alpha1.Property{Name: props[i], Value: props[i+1]})
		}
		return cp
	}
	id := aboutv1alpha1.ClusterIDProperty
	cs := aboutv1alpha1.ClusterSetProperty
	got := ProfileProperties([]*inventoryv1alpha1.ClusterProfile{
		profile("second-manager-a", at(2), id, "cluster-a", region, "eu"),
		profile("ocm-a", at(1), id, "cluster-a", region, "us", cs, "prod"),
		profile("nameless", at(0), region, "eu"),
		profile("b-tie-z", at(3), id, "cluster-b", region, "us"),
		profile("b-tie-a", at(3), id, "cluster-b", region, "ap"),
		// Another clusterset's cluster-c, older than ours.
		profile("staging-c", at(0), id, "cluster-c", region, "us", cs, "staging"),
		profile("prod-c", at(5), id, "cluster-c", region, "eu"),
	}, "prod")
	says := map[string]string{}
	for id, props := range got {
		for _, p := range props {
			if p.Name == region {
				says[id] = p.Value
			}
		}
	}
	if want := map[string]string{"cluster-a": "us", "cluster-b": "ap", "cluster-c": "eu"}; !maps.Equal(says, want) {
		t.Errorf("regions by member %v, want %v (the oldest profile's, the lower name on a tie; none for a profile that states no ID, nor of another clusterset)", says, want)
	}
}

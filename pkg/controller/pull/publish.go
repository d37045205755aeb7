package pull

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
)

// The agent's publishing half, as pure functions: what a member publishes
// in its hub namespace of one exported name, from what its own cluster
// holds of it. The agent (agent.go) reads its caches, calls these, and
// writes the difference.

// AgentManager is the endpointslice.kubernetes.io/managed-by of the
// EndpointSlices an agent publishes: no Kubernetes controller and no
// kube-proxy takes them for a Service's (they carry no service-name label
// either).
const AgentManager = "member-agent.hub.multiclusterservices.k8s.io"

// Source is what a member holds of one namespace/name, as its agent
// reads it.
type Source struct {
	// Export is the member's ServiceExport of the name, nil when there is
	// none or it is being deleted; ClusterSelectors are its KEP-5939
	// selectors.
	Export           *mcsv1beta1.ServiceExport
	ClusterSelectors []csv1beta1.ClusterSelector
	// Namespace is the name's namespace, nil when unknown.
	Namespace *v1.Namespace
	// Service is the member's Service of the name, nil when none.
	Service *v1.Service
	// Slices are the EndpointSlices labelled with the Service's name.
	Slices []*discoveryv1.EndpointSlice
	// Ingress is the Service of the export's ingress name
	// (export.IngressName), nil when none: where the member's pods are
	// out of other members' reach, they enter the export through it
	// (unless the exported Service is its own ingress).
	Ingress *v1.Service
	// Bound says the hub's service catalog binds the Service
	// (MemberCluster's status.boundServices): it is published even
	// without an export.
	Bound bool
}

// Refusal is a slice of the exported Service that is not published, and
// why (export.CheckSource): the agent says so on the export, once.
type Refusal struct {
	Slice  *discoveryv1.EndpointSlice
	Reason export.SourceRefusal
	Why    string
}

// MemberExportName is the name of what a member publishes of
// namespace/name: neither holds a dot, so no two names meet.
func MemberExportName(namespace, name string) string { return namespace + "." + name }

// PublishedSliceName is the hub name of the member's slice sliceName of
// the Service in namespace: "<namespace>.<slice>", or, where that would
// be too long for a name, the slice's name hashed.
func PublishedSliceName(namespace, sliceName string) string {
	if n := namespace + "." + sliceName; len(n) <= validation.DNS1123SubdomainMaxLength {
		return n
	}
	sum := sha256.Sum256([]byte(sliceName))
	return namespace + "." + sliceName[:min(len(sliceName), 63)] + "-" + hex.EncodeToString(sum[:8])
}

// PublishExport is the MemberExport of src, nil when src's export is not
// to be published (none, or being deleted) and the catalog does not bind
// its Service. A Service that is missing or being deleted publishes no
// spec: the planner finds the export invalid, as push mode does. A
// Service only the catalog binds is published as CatalogOnly, created
// when the Service was.
func PublishExport(src Source) *hubv1alpha1.MemberExport {
	se := src.Export
	if se == nil || se.DeletionTimestamp != nil {
		svc := src.Service
		if !src.Bound || svc == nil || svc.DeletionTimestamp != nil {
			return nil
		}
		// What the catalog reads of a Service it binds.
		me := PublishExport(Source{
			Export:    &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, CreationTimestamp: svc.CreationTimestamp}},
			Namespace: src.Namespace, Service: svc, Ingress: src.Ingress,
		})
		me.Spec.CatalogOnly = true
		return me
	}
	me := &hubv1alpha1.MemberExport{
		TypeMeta: metav1.TypeMeta{APIVersion: hubv1alpha1.SchemeGroupVersion.String(), Kind: "MemberExport"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   MemberExportName(se.Namespace, se.Name),
			Labels: publishedLabels(se.Namespace, se.Name),
		},
		Spec: hubv1alpha1.MemberExportSpec{
			Service:             hubv1alpha1.ServiceName{Namespace: se.Namespace, Name: se.Name},
			ExportCreated:       se.CreationTimestamp,
			ExportedLabels:      maps.Clone(se.Spec.ExportedLabels),
			ExportedAnnotations: maps.Clone(se.Spec.ExportedAnnotations),
			ClusterSelectors:    slices.Clone(src.ClusterSelectors),
		},
	}
	if ns := src.Namespace; ns != nil {
		me.Spec.NamespaceCreated = ns.CreationTimestamp.DeepCopy()
	}
	if svc := src.Service; svc != nil && svc.DeletionTimestamp == nil {
		me.Spec.ServiceSpec = svc.Spec.DeepCopy()
		if export.IsIngress(svc) {
			me.Spec.Ingress = publishIngress(svc)
		}
	}
	if me.Spec.Ingress == nil && src.Ingress != nil && src.Ingress.DeletionTimestamp == nil {
		me.Spec.Ingress = publishIngress(src.Ingress)
	}
	return me
}

// publishIngress is what the planner reads of ingress Service svc: what
// export.IngressSlices takes of it, and the labels that say whether the
// agent made it.
func publishIngress(svc *v1.Service) *hubv1alpha1.MemberIngress {
	in := &hubv1alpha1.MemberIngress{Name: svc.Name, Type: svc.Spec.Type, Ports: slices.Clone(svc.Spec.Ports)}
	for _, k := range []string{export.LabelManagedBy, export.LabelIngressFor} {
		if v, ok := svc.Labels[k]; ok {
			if in.Labels == nil {
				in.Labels = map[string]string{}
			}
			in.Labels[k] = v
		}
	}
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		if lb.IP != "" {
			in.LoadBalancerIPs = append(in.LoadBalancerIPs, lb.IP)
		}
	}
	return in
}

// readIngress is the Service in namespace ns that in describes, as
// export.IngressSlices reads it.
func readIngress(ns string, in *hubv1alpha1.MemberIngress) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: in.Name, Labels: maps.Clone(in.Labels)},
		Spec:       v1.ServiceSpec{Type: in.Type, Ports: slices.Clone(in.Ports)},
	}
	for _, ip := range in.LoadBalancerIPs {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
	}
	return svc
}

// Member is what a member's agent reads of its cluster beside its
// exports, for its MemberCluster.
type Member struct {
	Namespaces []*v1.Namespace
	// Properties are its own ClusterProperties, by name.
	Properties   map[string]string
	Nodes        []*v1.Node
	ServiceCIDRs []*networkingv1.ServiceCIDR
	// Derived: the agent serves the cluster in derived mode.
	Derived bool
	// Imports are the ServiceImports in the cluster that a global service
	// of the catalog placed (catalog.AnnotationGlobalService), written
	// by managedBy.
	Imports   []*mcsv1beta1.ServiceImport
	ManagedBy string
}

// PublishMemberCluster is the MemberCluster member m publishes: its
// namespaces not being deleted, sorted by name, its properties, its
// nodes' entry points (export.EntryPoints), its Service ranges, whether
// it is derived, and the catalog's imports it holds, sorted. A namespace
// that is terminating counts as gone, as push mode's planner counts it:
// no import is written into it.
func PublishMemberCluster(m Member) *hubv1alpha1.MemberCluster {
	namespaces, properties := m.Namespaces, m.Properties
	mc := &hubv1alpha1.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: hubv1alpha1.SchemeGroupVersion.String(), Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.MemberClusterName},
	}
	for _, ns := range namespaces {
		if ns.DeletionTimestamp != nil || ns.Status.Phase == v1.NamespaceTerminating {
			continue
		}
		mc.Spec.Namespaces = append(mc.Spec.Namespaces, hubv1alpha1.MemberNamespace{Name: ns.Name, Created: ns.CreationTimestamp})
	}
	slices.SortFunc(mc.Spec.Namespaces, func(a, b hubv1alpha1.MemberNamespace) int { return strings.Compare(a.Name, b.Name) })
	if len(properties) > 0 {
		mc.Spec.Properties = maps.Clone(properties)
	}
	mc.Spec.EntryPoints = export.EntryPoints(m.Nodes)
	for _, sc := range m.ServiceCIDRs {
		if sc.DeletionTimestamp == nil {
			mc.Spec.ServiceCIDRs = append(mc.Spec.ServiceCIDRs, sc.Spec.CIDRs...)
		}
	}
	slices.Sort(mc.Spec.ServiceCIDRs)
	mc.Spec.ServiceCIDRs = slices.Compact(mc.Spec.ServiceCIDRs)
	mc.Spec.Derived = m.Derived
	for _, si := range m.Imports {
		g := si.Annotations[catalog.AnnotationGlobalService]
		if g == "" || si.DeletionTimestamp != nil || si.Labels[mcsproxy.LabelImportManagedBy] != m.ManagedBy {
			continue
		}
		mc.Spec.CatalogImports = append(mc.Spec.CatalogImports, hubv1alpha1.MemberCatalogImport{
			Service: hubv1alpha1.ServiceName{Namespace: si.Namespace, Name: si.Name}, GlobalService: g, IPs: slices.Clone(si.Spec.IPs),
		})
	}
	slices.SortFunc(mc.Spec.CatalogImports, func(a, b hubv1alpha1.MemberCatalogImport) int {
		return strings.Compare(a.Service.Namespace+"/"+a.Service.Name, b.Service.Namespace+"/"+b.Service.Name)
	})
	return mc
}

// MemberProperties reads the cluster properties member id published
// (its MemberCluster's spec.properties, PublishMemberCluster), as the
// planner matches them: profile, the
// status.properties of the member's ClusterProfile in the hub's inventory
// (ProfileProperties), win over the member's own for every name both give,
// as in push mode (inventory.MergeProperties: the cluster manager's word
// against the member administrator's, who could otherwise claim a region
// to draw the traffic selection sends by it); and its cluster ID is id,
// the hub namespace RBAC confines its agent to, whatever the member or a
// profile says of it, so that no member can be selected, or select, as
// another.
func MemberProperties(id string, published map[string]string, profile []inventoryv1alpha1.Property) map[string]string {
	out := inventory.MergeProperties(profile, published)
	out[aboutv1alpha1.ClusterIDProperty] = id
	return out
}

// ProfileProperties returns, by cluster ID, the status.properties of the
// ClusterProfiles that state one (KEP-2149's cluster.clusterset.k8s.io
// among them): in pull mode the planner reaches no member, so a profile
// names its member by that property only, and one that states none says
// nothing of any member. With clusterset set (the planner's --clusterset),
// a profile whose clusterset.k8s.io property names another clusterset is
// about another clusterset's cluster, whose ID may be a member's here,
// and is not read, as push mode refuses it. Where several profiles state
// the same ID (two cluster managers listing one cluster), the oldest
// one's are taken (the lower name on a tie), as push mode serves a
// cluster through its first profile while a second one waits.
func ProfileProperties(profiles []*inventoryv1alpha1.ClusterProfile, clusterset string) map[string][]inventoryv1alpha1.Property {
	by := map[string]*inventoryv1alpha1.ClusterProfile{}
	for _, cp := range profiles {
		id := inventory.ProfileClusterID(cp)
		if id == "" {
			continue
		}
		if in := inventory.ProfileClusterSet(cp); clusterset != "" && in != "" && in != clusterset {
			continue
		}
		if have := by[id]; have == nil || olderProfile(cp, have) {
			by[id] = cp
		}
	}
	out := make(map[string][]inventoryv1alpha1.Property, len(by))
	for id, cp := range by {
		out[id] = cp.Status.Properties
	}
	return out
}

func olderProfile(a, b *inventoryv1alpha1.ClusterProfile) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// MemberNamespaces reads what a member published of its namespaces
// (PublishMemberCluster): the namespaces it has, as the planner takes
// them, by name.
func MemberNamespaces(mc *hubv1alpha1.MemberCluster) map[string]*v1.Namespace {
	out := make(map[string]*v1.Namespace, len(mc.Spec.Namespaces))
	for _, n := range mc.Spec.Namespaces {
		out[n.Name] = &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.Name, CreationTimestamp: n.Created}, Status: v1.NamespaceStatus{Phase: v1.NamespaceActive}}
	}
	return out
}

// PublishSlices are the EndpointSlices src publishes, owned by owner (the
// published MemberExport: the hub's garbage collector removes them with
// it), and the slices refused. A slice is published only when
// export.CheckSource accepts it, the check push mode makes in the
// planner: here the agent makes it, in the cluster whose Service, owners
// and managers it is about. What is left for the planner is what only
// the operator states (ranges, namespaces, IDs).
func PublishSlices(src Source, owner *hubv1alpha1.MemberExport, managers []string) ([]*discoveryv1.EndpointSlice, []Refusal) {
	if owner == nil || src.Service == nil || src.Service.DeletionTimestamp != nil {
		return nil, nil
	}
	var out []*discoveryv1.EndpointSlice
	var refused []Refusal
	for _, s := range src.Slices {
		if s.DeletionTimestamp != nil {
			continue
		}
		if reason, why := export.CheckSource(s, src.Service, managers); reason != "" {
			refused = append(refused, Refusal{Slice: s, Reason: reason, Why: why})
			continue
		}
		labels := publishedLabels(src.Service.Namespace, src.Service.Name)
		labels[discoveryv1.LabelManagedBy] = AgentManager
		out = append(out, &discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Name:        PublishedSliceName(s.Namespace, s.Name),
				Labels:      labels,
				Annotations: publishedAnnotations(s),
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: hubv1alpha1.SchemeGroupVersion.String(), Kind: "MemberExport",
					Name: owner.Name, UID: owner.UID,
				}},
			},
			AddressType: s.AddressType,
			Endpoints:   slices.Clone(s.Endpoints),
			Ports:       slices.Clone(s.Ports),
		})
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out, refused
}

// publishedAnnotations are the annotations a published slice carries:
// the member's slice it is, and when its endpoints last changed (the
// planner passes it on, for the latency of the whole path).
func publishedAnnotations(s *discoveryv1.EndpointSlice) map[string]string {
	out := map[string]string{hubv1alpha1.AnnotationSourceSlice: s.Name}
	if t, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]; ok {
		out[v1.EndpointsLastChangeTriggerTime] = t
	}
	return out
}

// Read is what the planner takes a member to hold of one name, from what
// it published: the MemberExport and the slices owned by it (nil: the
// member exports nothing of the name). It is PublishExport and
// PublishSlices read back: what the planner reads of a member in push
// mode, but for what the agent checked already (the slices' managers and
// owners, which Read's slices no longer carry).
//
// A Service published only because the catalog binds it (CatalogOnly)
// reads as Bound, without an export.
func Read(me *hubv1alpha1.MemberExport, published []*discoveryv1.EndpointSlice) Source {
	if me == nil {
		return Source{}
	}
	src := readExport(me, published)
	if me.Spec.CatalogOnly {
		src.Export, src.ClusterSelectors, src.Bound = nil, nil, true
	}
	return src
}

func readExport(me *hubv1alpha1.MemberExport, published []*discoveryv1.EndpointSlice) Source {
	ns, name := me.Spec.Service.Namespace, me.Spec.Service.Name
	src := Source{
		Export: &mcsv1beta1.ServiceExport{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: me.Spec.ExportCreated},
			Spec: mcsv1beta1.ServiceExportSpec{
				ExportedLabels:      maps.Clone(me.Spec.ExportedLabels),
				ExportedAnnotations: maps.Clone(me.Spec.ExportedAnnotations),
			},
		},
		ClusterSelectors: slices.Clone(me.Spec.ClusterSelectors),
	}
	if me.Spec.NamespaceCreated != nil {
		src.Namespace = &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, CreationTimestamp: *me.Spec.NamespaceCreated}}
	}
	if me.Spec.ServiceSpec != nil {
		src.Service = &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: *me.Spec.ServiceSpec.DeepCopy()}
	}
	if in := me.Spec.Ingress; in != nil {
		switch {
		case src.Service != nil && in.Name == name:
			// The exported Service is its own ingress: its load
			// balancer's addresses.
			src.Service.Status = readIngress(ns, in).Status
		case in.Name == export.IngressName(ns, name):
			src.Ingress = readIngress(ns, in)
		}
	}
	for _, p := range published {
		if p.Labels[hubv1alpha1.LabelServiceNamespace] != ns || p.Labels[hubv1alpha1.LabelServiceName] != name {
			continue
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: p.Annotations[hubv1alpha1.AnnotationSourceSlice], UID: p.UID,
				Labels: map[string]string{discoveryv1.LabelServiceName: name},
			},
			AddressType: p.AddressType,
			Endpoints:   slices.Clone(p.Endpoints),
			Ports:       slices.Clone(p.Ports),
		}
		if s.Name == "" {
			s.Name = p.Name
		}
		if t, ok := p.Annotations[v1.EndpointsLastChangeTriggerTime]; ok {
			s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: t}
		}
		src.Slices = append(src.Slices, s)
	}
	return src
}

// publishedLabels name the exported Service on what is published of it.
func publishedLabels(namespace, name string) map[string]string {
	return map[string]string{
		hubv1alpha1.LabelServiceNamespace: namespace,
		hubv1alpha1.LabelServiceName:      name,
	}
}

// exportUpToDate says whether have, as the hub holds it, already says
// what want does.
func exportUpToDate(have, want *hubv1alpha1.MemberExport) bool {
	return apiequality.Semantic.DeepEqual(have.Spec, want.Spec) && HasLabels(have.Labels, want.Labels)
}

// sliceUpToDate says whether have already says what want does; a slice
// whose address type changed is replaced (the field is immutable).
func sliceUpToDate(have, want *discoveryv1.EndpointSlice) bool {
	return have.AddressType == want.AddressType && HasLabels(have.Labels, want.Labels) &&
		HasLabels(have.Annotations, want.Annotations) &&
		apiequality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences) &&
		apiequality.Semantic.DeepEqual(have.Endpoints, want.Endpoints) &&
		apiequality.Semantic.DeepEqual(have.Ports, want.Ports)
}

// Package catalog resolves the service catalog of a hub
// (apis/catalog/v1alpha1) into what each member cluster gets: for every
// global service, the clusters that provide it and from what, and the
// local names under which clusters import it. The controller turns that
// into the KEP-1645 objects it writes for exports (ServiceImports and
// EndpointSlices), so that the catalog adds no second data path.
//
// Everything here is a pure function of the catalog's objects, the
// teams' namespaces and the member list.
package catalog

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	"k8s.io/multiclusterservices/export"
	"k8s.io/multiclusterservices/proxy"
)

// Condition types and reasons of catalog objects.
const (
	// ConditionValid says whether an object may take part: a binding may
	// provide its global service, an import may import it, a global
	// service is well formed.
	ConditionValid = "Valid"
	// ConditionReady says whether the object serves: a global service
	// has a backend and clusterset IPs, a binding serves ready
	// endpoints, an import is written into its cluster.
	ConditionReady = "Ready"

	ReasonValid                 = "Valid"
	ReasonGlobalServiceNotFound = "GlobalServiceNotFound"
	ReasonUnknownCluster        = "UnknownCluster"
	ReasonNamespaceNotOwned     = "NamespaceNotOwned"
	ReasonNotAConsumer          = "NotAConsumer"
	ReasonNameConflict          = "NameConflict"
	ReasonInvalidEndpoints      = "InvalidEndpoints"
	ReasonNoDefaultName         = "NoDefaultName"
	// ReasonTeamLimitReached refuses a team's objects beyond
	// Catalog.MaxObjectsPerTeam of a kind, newest first.
	ReasonTeamLimitReached = "TeamLimitReached"
	// ReasonNamespaceNotAllowed refuses what the controller's
	// configuration refuses in every service model (--refuse-namespaces,
	// --export-namespaces): the reason an export from such a namespace
	// gets in the export model.
	ReasonNamespaceNotAllowed = string(export.ReasonNamespaceNotAllowed)

	// ConditionHealthChecked, on a binding with a health check, says
	// whether every one of its addresses is probed; the controller
	// probes a bounded number of addresses per team and in all.
	ConditionHealthChecked  = "HealthChecked"
	ReasonProbed            = "Probed"
	ReasonProbeLimitReached = "ProbeLimitReached"
)

// Catalog is the hub's catalog as the controller reads it.
type Catalog struct {
	GlobalServices []*catalogv1alpha1.GlobalService
	Bindings       []*catalogv1alpha1.ServiceBinding
	Imports        []*catalogv1alpha1.GlobalServiceImport
	// Teams maps each hub namespace to the member namespaces it owns
	// (catalogv1alpha1.AnnotationMemberNamespaces, parsed by
	// MemberNamespaces): "namespace" in every member, "cluster/namespace"
	// in one, "*" all; a hub namespace not listed owns none.
	Teams map[string][]string
	// Members are the cluster IDs of the clusterset.
	Members []string
	// RefusedNamespaces are the member namespaces the controller's
	// configuration refuses (--refuse-namespaces): as no export from them
	// is merged in the export model, no Service there is bound and
	// nothing is imported there.
	RefusedNamespaces []string
	// ExportNamespaces are, per cluster ID, the only namespaces whose
	// Services that cluster may provide (--export-namespaces); once any
	// cluster is listed, a cluster not listed provides from none
	// (export.CheckExportNamespace).
	ExportNamespaces map[string][]string
	// MaxObjectsPerTeam bounds a team's global services, bindings and
	// imports, each kind on its own (0: no bound): one team's objects
	// beyond it are refused, the oldest kept, so that no team holds the
	// shared clusterset IP range, probe budget or resolution time of the
	// others.
	MaxObjectsPerTeam int
	// KubernetesRanges are where the clusterset's pods, nodes, Services
	// and clusterset IPs are, and the controller's own networks. An address binding names endpoints outside
	// Kubernetes: an address in one of these ranges belongs to whoever
	// owns the pod, node or Service, and is refused.
	KubernetesRanges []KubernetesRange
}

// KubernetesRange is a range of addresses that Kubernetes hands out in
// the clusterset. Whose it is is never said to a team: a binding's
// condition would otherwise map other clusters' pod ranges and node
// addresses for anyone who may write bindings.
type KubernetesRange struct {
	Prefix netip.Prefix
}

// Placement is one place a global service is imported: a local
// namespace and name in a member.
type Placement struct {
	Cluster   string
	LocalName catalogv1alpha1.LocalName
	// Import is the namespace/name, in the hub, of the
	// GlobalServiceImport that asks for it; empty where the global service's
	// ImportAll policy does.
	Import string
}

// Service is a resolved global service.
type Service struct {
	// Key is the global service's hub namespace/name.
	Key    string
	Global *catalogv1alpha1.GlobalService
	// Bindings are its valid bindings, oldest first.
	Bindings []*catalogv1alpha1.ServiceBinding
	// Placements are where it is imported, by cluster, namespace, name.
	Placements []Placement
}

// Result is a resolved catalog.
type Result struct {
	// Services are the valid global services by key.
	Services map[string]*Service
	// Valid is the Valid condition of every catalog object, by
	// Kind/namespace/name (ObjectKey).
	Valid map[string]metav1.Condition
}

// ObjectKey names a catalog object in Result.Valid.
func ObjectKey(kind string, o metav1.Object) string {
	return kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// MemberNamespaces parses a team namespace's AnnotationMemberNamespaces.
func MemberNamespaces(annotations map[string]string) []string {
	var out []string
	for _, s := range strings.Split(annotations[catalogv1alpha1.AnnotationMemberNamespaces], ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// owns tells whether team owns namespace in cluster: its list names "*",
// the namespace (in every member), or "cluster/namespace".
func (c *Catalog) owns(team, cluster, namespace string) bool {
	owned := c.Teams[team]
	return slices.Contains(owned, "*") || slices.Contains(owned, namespace) || slices.Contains(owned, cluster+"/"+namespace)
}

// ownsIn tells whether team owns some namespace in cluster: it is a
// tenant of that cluster, whose network it may then name addresses of.
func (c *Catalog) ownsIn(team, cluster string) bool {
	for _, o := range c.Teams[team] {
		if where, _, scoped := strings.Cut(o, "/"); !scoped || where == cluster {
			return true
		}
	}
	return false
}

// refused says why the controller's configuration refuses cluster's
// Services of namespace as sources, as it refuses exports from there in
// the export model; "" when it does not.
func (c *Catalog) refused(cluster, namespace string) string {
	if slices.Contains(c.RefusedNamespaces, namespace) {
		return export.NamespaceNotAllowed(namespace).Message
	}
	if refusal := export.CheckExportNamespace(c.ExportNamespaces, cluster, namespace); refusal != nil {
		return refusal.Message
	}
	return ""
}

// claim is a wish to import a global service under a local name; the
// oldest claim of a name wins it.
type claim struct {
	placement Placement
	global    string
	created   metav1.Time
	// object is the ObjectKey that made the claim.
	object string
}

// Resolve resolves c.
func Resolve(c Catalog) Result {
	res := Result{Services: map[string]*Service{}, Valid: map[string]metav1.Condition{}}
	set := func(key string, reason, format string, args ...any) {
		status := metav1.ConditionFalse
		if reason == ReasonValid {
			status = metav1.ConditionTrue
		}
		res.Valid[key] = metav1.Condition{Type: ConditionValid, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	globals := map[string]*catalogv1alpha1.GlobalService{}
	var claims []claim
	kubernetes := indexRanges(c.KubernetesRanges)
	over := func(kind string) func(metav1.Object) {
		return func(o metav1.Object) {
			set(ObjectKey(kind, o), ReasonTeamLimitReached, "team %s has more %ss than the %d the mcs-controller allows a team (--catalog-objects-per-team); the oldest are served", o.GetNamespace(), kind, c.MaxObjectsPerTeam)
		}
	}
	c.GlobalServices = withinTeamLimit(c.GlobalServices, c.MaxObjectsPerTeam, over("GlobalService"))
	c.Bindings = withinTeamLimit(c.Bindings, c.MaxObjectsPerTeam, over("ServiceBinding"))
	c.Imports = withinTeamLimit(c.Imports, c.MaxObjectsPerTeam, over("GlobalServiceImport"))
	for _, g := range c.GlobalServices {
		key := g.Namespace + "/" + g.Name
		obj := ObjectKey("GlobalService", g)
		if g.Spec.ImportPolicy == catalogv1alpha1.ImportAll {
			switch dn := g.Spec.DefaultName; {
			case dn == nil:
				set(obj, ReasonNoDefaultName, "importPolicy All needs defaultName, the local name every member imports it under")
				continue
			case slices.Contains(c.RefusedNamespaces, dn.Namespace):
				set(obj, ReasonNamespaceNotAllowed, "imports into namespace %q are refused by the mcs-controller's configuration", dn.Namespace)
				continue
			}
			// Imported everywhere the team owns the default namespace.
			owned := 0
			for _, m := range c.Members {
				if c.owns(g.Namespace, m, g.Spec.DefaultName.Namespace) {
					claims = append(claims, claim{placement: Placement{Cluster: m, LocalName: *g.Spec.DefaultName}, global: key, created: g.CreationTimestamp, object: obj})
					owned++
				}
			}
			if owned == 0 {
				set(obj, ReasonNamespaceNotOwned, "team %s owns namespace %q in no member (annotation %s of namespace %s in the hub)", g.Namespace, g.Spec.DefaultName.Namespace, catalogv1alpha1.AnnotationMemberNamespaces, g.Namespace)
				continue
			}
		}
		set(obj, ReasonValid, "the global service is valid")
		globals[key] = g
		res.Services[key] = &Service{Key: key, Global: g}
	}

	for _, b := range sortedByAge(c.Bindings) {
		obj := ObjectKey("ServiceBinding", b)
		key := b.Namespace + "/" + b.Spec.GlobalService
		svc, ok := res.Services[key]
		refusal := ""
		if b.Spec.Service != nil {
			refusal = c.refused(b.Spec.Cluster, b.Spec.Service.Namespace)
		}
		switch {
		case !ok:
			set(obj, ReasonGlobalServiceNotFound, "no valid GlobalService %q in namespace %s", b.Spec.GlobalService, b.Namespace)
			continue
		case !slices.Contains(c.Members, b.Spec.Cluster):
			set(obj, ReasonUnknownCluster, "cluster %q is not a member of the clusterset", b.Spec.Cluster)
			continue
		case b.Spec.Service == nil && !c.ownsIn(b.Namespace, b.Spec.Cluster):
			// Addresses are served as the cluster's endpoints (its
			// source cluster label) and, with a health check, probed:
			// only a tenant of the cluster may say what is reached from
			// it.
			set(obj, ReasonNamespaceNotOwned, "team %s owns no namespace in cluster %s (annotation %s of namespace %s in the hub): it cannot bind addresses as that cluster's", b.Namespace, b.Spec.Cluster, catalogv1alpha1.AnnotationMemberNamespaces, b.Namespace)
			continue
		case refusal != "":
			set(obj, ReasonNamespaceNotAllowed, "%s", refusal)
			continue
		case b.Spec.Service != nil && !c.owns(b.Namespace, b.Spec.Cluster, b.Spec.Service.Namespace):
			set(obj, ReasonNamespaceNotOwned, "team %s does not own namespace %q in cluster %s: it cannot bind its Services", b.Namespace, b.Spec.Service.Namespace, b.Spec.Cluster)
			continue
		}
		if err := validEndpoints(b, kubernetes); err != "" {
			set(obj, ReasonInvalidEndpoints, "%s", err)
			continue
		}
		set(obj, ReasonValid, "the binding provides global service %s from cluster %s", b.Spec.GlobalService, b.Spec.Cluster)
		svc.Bindings = append(svc.Bindings, b)
	}

	for _, i := range c.Imports {
		obj := ObjectKey("GlobalServiceImport", i)
		ref := i.Spec.GlobalService
		if ref.Namespace == "" {
			ref.Namespace = i.Namespace
		}
		key := ref.Namespace + "/" + ref.Name
		g, ok := globals[key]
		switch {
		case !ok:
			set(obj, ReasonGlobalServiceNotFound, "no valid GlobalService %s", key)
			continue
		case ref.Namespace != i.Namespace && !slices.Contains(g.Spec.Consumers, i.Namespace):
			set(obj, ReasonNotAConsumer, "GlobalService %s does not list %s among its consumers", key, i.Namespace)
			continue
		case !slices.Contains(c.Members, i.Spec.Cluster):
			set(obj, ReasonUnknownCluster, "cluster %q is not a member of the clusterset", i.Spec.Cluster)
			continue
		case slices.Contains(c.RefusedNamespaces, i.Spec.LocalName.Namespace):
			set(obj, ReasonNamespaceNotAllowed, "imports into namespace %q are refused by the mcs-controller's configuration", i.Spec.LocalName.Namespace)
			continue
		case !c.owns(i.Namespace, i.Spec.Cluster, i.Spec.LocalName.Namespace):
			set(obj, ReasonNamespaceNotOwned, "team %s does not own namespace %q in cluster %s: it cannot import into it", i.Namespace, i.Spec.LocalName.Namespace, i.Spec.Cluster)
			continue
		}
		claims = append(claims, claim{
			placement: Placement{Cluster: i.Spec.Cluster, LocalName: i.Spec.LocalName, Import: i.Namespace + "/" + i.Name},
			global:    key, created: i.CreationTimestamp, object: obj,
		})
	}

	// One global service per local name and cluster: the oldest claim
	// wins (as the oldest export wins a KEP-1645 conflict).
	slices.SortStableFunc(claims, func(a, b claim) int {
		return export.CompareAge(a.created.Time, a.object, b.created.Time, b.object)
	})
	taken := map[string]claim{}
	for _, cl := range claims {
		where := cl.placement.Cluster + "/" + cl.placement.LocalName.Namespace + "/" + cl.placement.LocalName.Name
		if winner, ok := taken[where]; ok {
			if cl.placement.Import != "" && winner.global != cl.global {
				set(cl.object, ReasonNameConflict, "%s/%s in cluster %s already imports global service %s (%s, older)", cl.placement.LocalName.Namespace, cl.placement.LocalName.Name, cl.placement.Cluster, winner.global, winner.object)
			} else if cl.placement.Import != "" {
				set(cl.object, ReasonValid, "imports %s into cluster %s as %s/%s (also asked for by %s)", cl.global, cl.placement.Cluster, cl.placement.LocalName.Namespace, cl.placement.LocalName.Name, winner.object)
			}
			continue
		}
		taken[where] = cl
		if cl.placement.Import != "" {
			set(cl.object, ReasonValid, "imports %s into cluster %s as %s/%s", cl.global, cl.placement.Cluster, cl.placement.LocalName.Namespace, cl.placement.LocalName.Name)
		}
		res.Services[cl.global].Placements = append(res.Services[cl.global].Placements, cl.placement)
	}
	for _, s := range res.Services {
		slices.SortFunc(s.Placements, func(a, b Placement) int {
			return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.LocalName.Namespace, b.LocalName.Namespace), strings.Compare(a.LocalName.Name, b.LocalName.Name))
		})
	}
	return res
}

// rangeIndex finds the KubernetesRange of an address: node addresses
// (one per node) by lookup, the other ranges by a scan.
type rangeIndex struct {
	single map[netip.Addr]KubernetesRange
	ranges []KubernetesRange
}

func indexRanges(ranges []KubernetesRange) rangeIndex {
	ri := rangeIndex{single: map[netip.Addr]KubernetesRange{}}
	for _, r := range ranges {
		switch _, dup := ri.single[r.Prefix.Addr()]; {
		case !r.Prefix.IsSingleIP():
			ri.ranges = append(ri.ranges, r)
		case !dup:
			// The first that names it names it in messages.
			ri.single[r.Prefix.Addr()] = r
		}
	}
	return ri
}

func (ri rangeIndex) find(ip netip.Addr) (KubernetesRange, bool) {
	if r, ok := ri.single[ip]; ok {
		return r, true
	}
	for _, r := range ri.ranges {
		if r.Prefix.Contains(ip) {
			return r, true
		}
	}
	return KubernetesRange{}, false
}

// validEndpoints says what is wrong with a binding's endpoints, if
// anything: addresses must be unicast and not special-purpose (a binding
// must not send a clusterset's traffic to a metadata service or a
// loopback, nor have the controller probe them), outside Kubernetes
// (another team's pods, nodes and Services are not the binding team's to
// name), port names unique.
func validEndpoints(b *catalogv1alpha1.ServiceBinding, kubernetes rangeIndex) string {
	if len(b.Spec.Endpoints) == 0 {
		return ""
	}
	for _, ep := range b.Spec.Endpoints {
		ip, err := netip.ParseAddr(ep.Address)
		if err != nil || ip.Zone() != "" || !ip.IsGlobalUnicast() || ip.Is4In6() {
			return fmt.Sprintf("endpoint address %q is not a unicast IPv4 or IPv6 address", ep.Address)
		}
		if name, special := proxy.SpecialPurpose(ip); special {
			return fmt.Sprintf("endpoint address %s is a %s address, never an endpoint", ep.Address, name)
		}
		if _, ok := kubernetes.find(ip); ok {
			return fmt.Sprintf("endpoint address %s lies in the clusterset's Kubernetes networks (pods, nodes, Services, clusterset IPs, the mcs-controller's own), which are not the team's to name: bind a Service in a namespace the team owns instead", ep.Address)
		}
	}
	seen := map[string]bool{}
	for _, p := range b.Spec.Ports {
		if seen[p.Name] {
			return fmt.Sprintf("port name %q is given twice", p.Name)
		}
		seen[p.Name] = true
	}
	if hc := b.Spec.HealthCheck; hc != nil && hc.Port != "" && !seen[hc.Port] {
		return fmt.Sprintf("the health check's port %q is not one of the binding's ports", hc.Port)
	}
	return ""
}

// sortedByAge returns objects oldest first (then by name), so that a
// global service's bindings are in a stable order.
func sortedByAge[T metav1.Object](objs []T) []T {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b T) int {
		return export.CompareAge(a.GetCreationTimestamp().Time, a.GetNamespace()+"/"+a.GetName(), b.GetCreationTimestamp().Time, b.GetNamespace()+"/"+b.GetName())
	})
	return out
}

// withinTeamLimit returns, of objs, each team's (namespace's) oldest limit
// objects, in their order; refused is told of every other one. limit 0
// keeps all.
func withinTeamLimit[T metav1.Object](objs []T, limit int, refused func(metav1.Object)) []T {
	if limit <= 0 {
		return objs
	}
	count := map[string]int{}
	var kept []T
	for _, o := range sortedByAge(objs) {
		if count[o.GetNamespace()] >= limit {
			refused(o)
			continue
		}
		count[o.GetNamespace()]++
		kept = append(kept, o)
	}
	return kept
}

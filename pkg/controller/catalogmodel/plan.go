// Package catalogmodel is the catalog model of the mcs-controller: the
// clusterset described by the service catalog in the hub (GlobalServices,
// ServiceBindings, GlobalServiceImports; package catalog of the staging
// library) instead of by namespace sameness. It decides, as pure
// functions of what the caches hold (a Snapshot), what every member
// should hold of every local name the catalog places, the status of every
// catalog object, and which bound addresses to probe; it probes them
// (Checker) and writes the catalog objects' status (Status.Write).
//
// Reading the caches, allocating clusterset IPs, recording what each
// member should hold and writing it into the members are the
// controller's (package mcs), as in the export model. One resolution
// runs in two pure steps with the allocation between them:
//
//	res := catalog.Resolve(cat)
//	merged := Merge(snapshot)        // what each global service serves
//	ips := allocate(merged)          // the controller's allocator
//	result := Plan(cfg, snapshot, merged, ips)
package catalogmodel

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
)

// KeyPrefix starts the clusterset IP allocator's key of a global
// service, which can never be a namespace/name.
const KeyPrefix = "catalog:"

// Snapshot is what one resolution reads, at one moment.
type Snapshot struct {
	// Result is the catalog's resolution (catalog.Resolve).
	Result catalog.Result
	// Members are every member, synced or not, by cluster ID.
	Members map[string]*Member
	// AnyAlive tells whether some member's endpoint lease is alive: when
	// none is, every source keeps its endpoints, as in the export model.
	AnyAlive bool
	// Probes are what the health checks said, by Target.ID.
	Probes map[string]Probe
}

// Member is what one member's caches hold of what the catalog binds and
// places there.
type Member struct {
	ID     string
	Synced bool
	// Alive: its endpoint lease has not expired.
	Alive bool
	// Derived: its imports are programmed through derived Services, and
	// carry clusterset IPs of their own.
	Derived bool
	// Namespaces are its namespaces where the catalog places a name, by
	// name; a namespace absent does not exist.
	Namespaces map[string]*v1.Namespace
	// Services are its Services that bindings name, by namespace/name;
	// a Service absent does not exist.
	Services map[string]*v1.Service
	// Slices are, by the Service's namespace/name, what of its own
	// EndpointSlices of those Services may be mirrored, as the export
	// model decides it (slices Kubernetes wrote for the Service, with
	// the endpoints something vouches for).
	Slices map[string][]*discoveryv1.EndpointSlice
	// EndpointRanges are where its endpoints may be; nil when not known
	// (Slices then hold only the vouched endpoints).
	EndpointRanges []netip.Prefix
	// Imports are the imports this controller wrote into it, by
	// namespace/name, at the local names the catalog places there.
	Imports map[string]*mcsv1beta1.ServiceImport
}

// Merged is what one global service serves: its valid bindings merged as
// the exports of one name are.
type Merged struct {
	// Key is the global service's namespace/name; IPKey its key in the
	// clusterset IP allocator.
	Key, IPKey string
	Service    *catalog.Service
	Exports    []export.Export
	Result     export.Result
	// Unbound are the bindings whose Service does not exist or is not
	// valid, by name: why.
	Unbound map[string]string
	// Bindings are its bindings that serve, and Clusters their clusters,
	// sorted.
	Bindings []*catalogv1alpha1.ServiceBinding
	Clusters []string
}

// IPNeed is what a global service needs of the clusterset IP allocator.
type IPNeed int

const (
	// KeepIPs: leave what it holds (a headless global service).
	KeepIPs IPNeed = iota
	// AllocateIPs: it is imported somewhere as a ClusterSetIP service.
	AllocateIPs
	// ReleaseIPs: it is imported nowhere, or nothing serves it: a team
	// with many such would hold the shared range for nothing.
	ReleaseIPs
)

// IPs tells what g needs of the allocator.
func (g *Merged) IPs() IPNeed {
	switch {
	case len(g.Exports) == 0 || len(g.Service.Placements) == 0:
		return ReleaseIPs
	case g.Result.Spec.Type == mcsv1beta1.ClusterSetIP:
		return AllocateIPs
	}
	return KeepIPs
}

// Allocation is what the allocator gave a global service.
type Allocation struct {
	IPs []string
	// Error says why it has no clusterset IPs, if it has none.
	Error string
}

// Merge merges the valid bindings of every global service of s, sorted
// by key.
func Merge(s Snapshot) []*Merged {
	var out []*Merged
	for _, key := range slices.Sorted(maps.Keys(s.Result.Services)) {
		svc := s.Result.Services[key]
		g := &Merged{Key: key, IPKey: KeyPrefix + key, Service: svc}
		g.Exports, g.Unbound = catalog.Exports(svc, func(cluster string, name catalogv1alpha1.LocalName) *v1.Service {
			if m := s.Members[cluster]; m != nil {
				return m.Services[name.Namespace+"/"+name.Name]
			}
			return nil
		})
		g.Result = export.Merge(g.Exports)
		for _, b := range svc.Bindings {
			if _, no := g.Unbound[b.Name]; no {
				continue
			}
			g.Bindings = append(g.Bindings, b)
			if !slices.Contains(g.Clusters, b.Spec.Cluster) {
				g.Clusters = append(g.Clusters, b.Spec.Cluster)
			}
		}
		slices.Sort(g.Clusters)
		out = append(out, g)
	}
	return out
}

// Config is what the planner reads of the controller's configuration.
type Config struct {
	// ManagedBy is the controller's name on what it writes.
	ManagedBy string
	// HealthProbesPerTeam and HealthProbes bound the addresses probed,
	// of one team and in all.
	HealthProbesPerTeam, HealthProbes int
}

// Result is what one resolution decides.
type Result struct {
	// Places are, by local name (namespace/name) and cluster ID, what
	// each member holds of every name the catalog places; a member
	// without a variant of a name holds nothing of it.
	Places map[string]map[string]*Variant
	// Bound are the members' Services the bindings name, as
	// cluster/namespace/name: their changes resolve the catalog again.
	Bound map[string]bool
	// Status is the status of every catalog object.
	Status *Status
	// Probed are the addresses to probe, under the limits; OverLimit
	// the others, by Target.ID: why they are not probed.
	Probed    []Target
	OverLimit map[string]string
	// Outside are the source slices some of whose addresses are not
	// mirrored for lying outside their cluster's endpoint ranges.
	Outside []Outside
}

// Variant is what one member holds of one local name.
type Variant struct {
	Import   *mcsv1beta1.ServiceImport
	Clusters []string
	IPError  string
	// Slices are the imported slices by name.
	Slices map[string]*discoveryv1.EndpointSlice
}

// Outside says which addresses of source slice Slice of cluster Cluster
// are not mirrored, for lying outside the cluster's endpoint ranges.
type Outside struct {
	Cluster string
	Slice   *discoveryv1.EndpointSlice
	Dropped []string
}

// Plan decides, from s, the merged global services and the clusterset
// IPs each was given (by IPKey), what every member holds of each local
// name, the status of every catalog object and which addresses to probe.
func Plan(cfg Config, s Snapshot, merged []*Merged, ips map[string]Allocation) Result {
	p := Result{Places: map[string]map[string]*Variant{}, Bound: map[string]bool{}, Status: newStatus(s.Result)}
	// The probes first: the bindings' status says which of their
	// addresses are over the limits, and an address is served only
	// while it is probed and answers.
	var checks []Target
	for _, g := range merged {
		for _, b := range g.Service.Bindings {
			if b.Spec.HealthCheck != nil {
				checks = append(checks, targetsOf(b)...)
			}
		}
	}
	probed, unprobed := limitTargets(checks, cfg.HealthProbesPerTeam, cfg.HealthProbes)
	p.Probed, p.OverLimit = probed, unprobed
	probes := map[string]Probe{}
	for _, t := range probed {
		if pr, ok := s.Probes[t.ID()]; ok {
			probes[t.ID()] = pr
		}
	}
	pl := planner{cfg: cfg, s: s, probes: probes, plan: &p}
	for _, g := range merged {
		pl.global(g, ips[g.IPKey], unprobed)
	}
	return p
}

// planner carries one Plan's inputs through its steps.
type planner struct {
	cfg    Config
	s      Snapshot
	probes map[string]Probe
	plan   *Result
}

// global plans global service g, given the clusterset IPs it got.
func (pl planner) global(g *Merged, a Allocation, unprobed map[string]string) {
	svc, st := g.Service, pl.plan.Status
	for _, b := range svc.Bindings {
		if b.Spec.Service != nil {
			pl.plan.Bound[b.Spec.Cluster+"/"+b.Spec.Service.Namespace+"/"+b.Spec.Service.Name] = true
		}
	}
	for name, why := range g.Unbound {
		st.binding(svc.Global.Namespace, name, metav1.ConditionFalse, "ServiceNotFound", why)
	}
	ips := a.IPs
	for _, p := range svc.Placements {
		pl.placement(g, p, a)
	}
	st.global(svc, g.Clusters, ips, a.Error, g.Bindings)
	for _, b := range g.Bindings {
		// As a placement in the binding's own terms would get them.
		own := pl.bindingSlices(b, catalog.Placement{LocalName: catalogv1alpha1.LocalName{Namespace: b.Namespace, Name: b.Spec.GlobalService}}, g.Result, true)
		st.bindingReady(b, own, pl.probes, unprobed)
	}
}

// placement plans what the member of placement p holds of its local name.
func (pl planner) placement(g *Merged, p catalog.Placement, a Allocation) {
	st := pl.plan.Status
	m := pl.s.Members[p.Cluster]
	if m == nil {
		return
	}
	lk := p.LocalName.Namespace + "/" + p.LocalName.Name
	if n := m.Namespaces[p.LocalName.Namespace]; n == nil || n.Status.Phase == v1.NamespaceTerminating {
		st.placement(p, metav1.ConditionFalse, "NamespaceNotFound", fmt.Sprintf("namespace %s does not exist in cluster %s", p.LocalName.Namespace, p.Cluster), nil)
		return
	}
	if len(g.Exports) == 0 {
		st.placement(p, metav1.ConditionFalse, "NoBackends", "the global service has no valid binding with endpoints", nil)
		return
	}
	v := &Variant{Import: catalog.Import(p, g.Service, g.Result, a.IPs, pl.cfg.ManagedBy), Clusters: g.Clusters, IPError: a.Error, Slices: map[string]*discoveryv1.EndpointSlice{}}
	for _, b := range g.Bindings {
		for _, sl := range pl.bindingSlices(b, p, g.Result, false) {
			v.Slices[sl.Name] = sl
		}
	}
	if pl.plan.Places[lk] == nil {
		pl.plan.Places[lk] = map[string]*Variant{}
	}
	pl.plan.Places[lk][p.Cluster] = v
	// Ready once the member holds what was placed (its import's events
	// resolve the catalog again).
	if have := m.Imports[lk]; have != nil && have.Annotations[catalog.AnnotationGlobalService] == g.Key &&
		(len(a.IPs) == 0 || slices.Equal(have.Spec.IPs, a.IPs) || m.Derived) {
		st.placement(p, metav1.ConditionTrue, "Imported", fmt.Sprintf("imported into cluster %s as %s", p.Cluster, lk), have.Spec.IPs)
	} else {
		st.placement(p, metav1.ConditionFalse, "Pending", fmt.Sprintf("being written into cluster %s as %s", p.Cluster, lk), nil)
	}
}

// bindingSlices are the slices placement p gets from binding b: those of
// its Service (within the source cluster's endpoint ranges), or of its
// addresses (those that answer their health check, if it has one).
// report records the addresses left out.
func (pl planner) bindingSlices(b *catalogv1alpha1.ServiceBinding, p catalog.Placement, r export.Result, report bool) []*discoveryv1.EndpointSlice {
	served := r.ServedPorts[b.Name]
	if b.Spec.Service == nil {
		var healthy func(string) bool
		if b.Spec.HealthCheck != nil {
			healthy = func(addr string) bool { return pl.probes[b.Namespace+"/"+b.Name+"/"+addr].Healthy }
		}
		return catalog.BindingSlices(b, p, pl.cfg.ManagedBy, served, healthy)
	}
	src := pl.s.Members[b.Spec.Cluster]
	if src == nil || !src.Synced || !src.Alive && pl.s.AnyAlive {
		return nil
	}
	key := b.Spec.Service.Namespace + "/" + b.Spec.Service.Name
	if src.Services[key] == nil {
		return nil
	}
	var out []*discoveryv1.EndpointSlice
	for _, sl := range src.Slices[key] {
		is := catalog.ServiceSlice(sl, b, p, pl.cfg.ManagedBy, served, r.Spec.TrafficDistribution)
		if is == nil {
			continue
		}
		if dropped := export.KeepWithin(is, src.EndpointRanges); len(dropped) > 0 && report {
			pl.plan.Outside = append(pl.plan.Outside, Outside{Cluster: src.ID, Slice: sl, Dropped: dropped})
		}
		out = append(out, is)
	}
	return out
}

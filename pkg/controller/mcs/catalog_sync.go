package mcs

import (
	"context"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/multiclusterservices/catalog"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/catalogmodel"
)

// syncCatalog resolves the catalog: it reads the catalog and what the
// members hold of what it binds and places, merges each global service's
// bindings, gives the global services their clusterset IPs, plans
// (catalogmodel.Plan, which decides everything else), and applies the
// plan: what each member should hold, the addresses to probe, the
// catalog objects' status.
func (cm catalogModel) syncCatalog(ctx context.Context) error {
	c := cm.c
	s := c.catalog
	res := catalog.Resolve(cm.readCatalog())
	reasons := map[string]string{}
	for key, cond := range res.Valid {
		reasons[key] = cond.Reason
	}
	c.metrics.setCatalog(reasons)
	members, membership := c.members.at()
	snap := cm.readCatalogSnapshot(res, members)
	merged := catalogmodel.Merge(snap)
	ips := allocateCatalogIPs(c.clustersetIPs, merged, cm.heldIPs)
	plan := catalogmodel.Plan(catalogmodel.Config{ManagedBy: c.cfg.ManagedBy, HealthProbesPerTeam: s.cfg.HealthProbesPerTeam, HealthProbes: s.cfg.HealthProbes}, snap, merged, ips)
	s.health.Set(plan.Probed)
	c.metrics.setHealthChecks(len(plan.Probed), len(plan.OverLimit))
	for _, o := range plan.Outside {
		if m := c.members.get(o.Cluster); m != nil {
			c.writesTo(m).reportOutsidePodRanges(o.Slice, o.Dropped)
		}
	}
	cm.recordPlaces(plan, members, membership)
	releaseStaleGlobals(c.clustersetIPs, res)
	return plan.Status.Write(ctx, catalogmodel.StatusWriter{Hub: s.cfg.Hub, Globals: s.globals, Bindings: s.bindings, Imports: s.imports, Recorder: s.recorder})
}

// readCatalog reads the catalog from the hub's caches, with what the
// members and the configuration add to it.
func (cm catalogModel) readCatalog() catalog.Catalog {
	c := cm.c
	var members []string
	var ranges []catalog.KubernetesRange
	for _, m := range c.members.all() {
		if m.hasSynced() {
			members = append(members, m.id)
			ranges = append(ranges, kubernetesRanges(m, c.cfg.MemberPodCIDRs[m.id])...)
		}
	}
	return c.catalog.read(&c.cfg, members, ranges)
}

// read reads the catalog from the hub's caches, of the synced members,
// with the addresses they hand out (ranges) and what the configuration
// adds to it.
func (s *catalogState) read(cfg *Config, members []string, ranges []catalog.KubernetesRange) catalog.Catalog {
	cat := catalog.Catalog{Teams: map[string][]string{}, Members: members, KubernetesRanges: ranges}
	cat.GlobalServices, _ = s.globals.List(labels.Everything())
	cat.Bindings, _ = s.bindings.List(labels.Everything())
	cat.Imports, _ = s.imports.List(labels.Everything())
	namespaces, _ := s.teams.List(labels.Everything())
	for _, ns := range namespaces {
		if owned := catalog.MemberNamespaces(ns.Annotations); len(owned) > 0 {
			cat.Teams[ns.Name] = owned
		}
	}
	for _, p := range slices.Concat(cfg.ClusterSetIPRanges, s.cfg.OwnNetworks) {
		cat.KubernetesRanges = append(cat.KubernetesRanges, catalog.KubernetesRange{Prefix: p})
	}
	// What the configuration refuses in the export model it refuses in
	// the catalog: a team that owns every namespace still binds no
	// Service of kube-system and imports nothing there.
	cat.RefusedNamespaces, cat.ExportNamespaces = cfg.RefusedNamespaces, cfg.ExportNamespaces
	cat.MaxObjectsPerTeam = s.cfg.ObjectsPerTeam
	return cat
}

// readCatalogSnapshot reads what the members hold of what res binds and
// places. What of a bound Service's slices may be mirrored is decided
// here by the export model's rule (trustedPart), and what may not is said
// on the source cluster's export.
func (cm catalogModel) readCatalogSnapshot(res catalog.Result, members []*member) catalogmodel.Snapshot {
	c := cm.c
	snap := catalogmodel.Snapshot{Result: res, Members: map[string]*catalogmodel.Member{}, Probes: c.catalog.health.Probes()}
	byID := map[string]*member{}
	for _, m := range members {
		byID[m.id] = m
		alive := c.leases.alive(m.id)
		snap.AnyAlive = snap.AnyAlive || alive
		snap.Members[m.id] = &catalogmodel.Member{ID: m.id, Synced: m.hasSynced(), Alive: alive, Derived: c.cfg.derived(m),
			Namespaces: map[string]*v1.Namespace{}, Services: map[string]*v1.Service{}, Slices: map[string][]*discoveryv1.EndpointSlice{},
			Imports: map[string]*mcsv1beta1.ServiceImport{}}
	}
	for _, svc := range res.Services {
		for _, b := range svc.Bindings {
			if src := byID[b.Spec.Cluster]; b.Spec.Service != nil && src != nil && src.hasSynced() {
				cm.readBoundService(src, snap.Members[src.id], b.Spec.Service.Namespace, b.Spec.Service.Name)
			}
		}
		for _, p := range svc.Placements {
			m := byID[p.Cluster]
			if m == nil {
				continue
			}
			ms := snap.Members[m.id]
			if n, err := m.namespaces.Get(p.LocalName.Namespace); err == nil {
				ms.Namespaces[n.Name] = n
			}
			if si, err := m.imports.ServiceImports(p.LocalName.Namespace).Get(p.LocalName.Name); err == nil && c.wrote(si) {
				ms.Imports[p.LocalName.Namespace+"/"+p.LocalName.Name] = si
			}
		}
	}
	return snap
}

// readBoundService reads member src's Service ns/name, which a binding
// names, and what of its slices may be mirrored, into ms.
func (cm catalogModel) readBoundService(src *member, ms *catalogmodel.Member, ns, name string) {
	c := cm.c
	key := ns + "/" + name
	if _, read := ms.Services[key]; read {
		return
	}
	svc, err := src.services.Services(ns).Get(name)
	if err != nil {
		return
	}
	ms.Services[key] = svc
	ranges := src.endpointRanges(c.cfg.MemberPodCIDRs)
	ms.EndpointRanges = ranges.Prefixes
	for _, sl := range indexed[*discoveryv1.EndpointSlice](src.localSlices, byService, key) {
		sl, reports := trustedPart(&c.cfg, &memberSnapshot{ID: src.id, RangesKnown: ranges.Known}, sl, svc)
		for _, r := range reports {
			c.writesTo(src).reportSource(r)
		}
		if sl != nil {
			ms.Slices[key] = append(ms.Slices[key], sl)
		}
	}
}

// recordPlaces records what each member should hold of every local name
// plan places, and, of every name placed before and no more or holding
// an import this controller wrote that nothing places (a switch from the
// export model), nothing; the members whose names changed are asked to
// write them.
func (cm catalogModel) recordPlaces(plan catalogmodel.Result, members []*member, membership uint64) {
	c := cm.c
	s := c.catalog
	desired := map[string]*desiredState{}
	for lk, variants := range plan.Places {
		d := &desiredState{Variants: map[string]*desiredState{}}
		for cluster, v := range variants {
			d.Variants[cluster] = &desiredState{Import: v.Import, Clusters: v.Clusters, IPError: v.IPError, Slices: v.Slices}
		}
		desired[lk] = d
	}
	s.mu.Lock()
	stale := maps.Clone(s.placed)
	s.bound = plan.Bound
	s.placed = map[string]bool{}
	for lk := range desired {
		s.placed[lk] = true
	}
	s.mu.Unlock()
	for _, m := range members {
		if !m.hasSynced() {
			continue
		}
		imports, _ := m.imports.List(labels.SelectorFromSet(labels.Set{managedLabel: c.cfg.ManagedBy}))
		for _, si := range imports {
			stale[si.Namespace+"/"+si.Name] = true
		}
	}
	c.mu.Lock()
	var changed []string
	for lk := range stale {
		if _, ok := desired[lk]; !ok {
			desired[lk] = &desiredState{Variants: map[string]*desiredState{}}
		}
	}
	for lk, d := range desired {
		d.Membership = membership
		// A plan of fewer members is replaced even when it places the
		// same: a member that joined since waits for one made with it.
		if old := c.desired[lk]; old == nil || old.Membership != membership || !apiequality.Semantic.DeepEqual(old.Variants, d.Variants) {
			c.desired[lk] = d
			changed = append(changed, lk)
		}
	}
	c.mu.Unlock()
	for _, lk := range changed {
		c.enqueueMembers(lk)
	}
}

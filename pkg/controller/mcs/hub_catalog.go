package mcs

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/catalog"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/catalogmodel"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/clustersetip"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

// Pull mode's planner in the service catalog's model
// (HubPlannerConfig.Catalog; docs/catalog.md): the catalog is in the hub
// already, so the planner resolves it there, as push mode's controller
// does, from what the members' agents publish instead of what it reads in
// the members. The Services a binding names are published by their
// member's agent once the planner names them in its MemberCluster's
// status (boundServices); its namespaces, Service ranges, entry points and
// the catalog's imports it holds come with its MemberCluster. The plan is
// a ServicePlan per global service and local name (pull.CatalogPlanName),
// imported in the members it is placed in: one local name may hold
// different global services in different members. Each agent writes the
// one that places a global service in its own cluster, as push mode's
// writer writes a member's variant.

// The one key of the planner's queue in the catalog's model: any change
// resolves the whole catalog again, as in push mode.
func (p *HubPlanner) enqueue(key string) {
	if p.catalog != nil {
		key = catalogQueueKey
	}
	p.queue.Add(key)
}

// startCatalog starts reading the hub's catalog and its health checks.
func (p *HubPlanner) startCatalog(ctx context.Context) error {
	shutdown, err := p.catalog.start(ctx, p.cfg.InitialSyncTimeout+time.Minute, func() { p.queue.Add(catalogQueueKey) })
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		shutdown()
	}()
	go p.catalog.health.Run(ctx)
	return nil
}

// memberClusterOf is member id's MemberCluster as the hub holds it, nil
// when its agent has not published it.
func (p *HubPlanner) memberClusterOf(id string) *hubv1alpha1.MemberCluster {
	obj, ok, _ := p.memberCluster.GetStore().GetByKey(id + "/" + hubv1alpha1.MemberClusterName)
	if !ok {
		return nil
	}
	mc, _ := obj.(*hubv1alpha1.MemberCluster)
	return mc
}

// syncCatalog resolves the catalog as push mode's controller does
// (catalogModel.syncCatalog), from what the members published, and writes
// the plan: a ServicePlan per global service and local name, the
// Services each member is to publish, and the catalog objects' status.
func (p *HubPlanner) syncCatalog(ctx context.Context) error {
	snap, cat := p.readCatalogSnapshot()
	res := catalog.Resolve(cat)
	snap.Result = res
	p.readBound(&snap)
	merged := catalogmodel.Merge(snap)
	ips := allocateCatalogIPs(p.ips, merged, p.heldIPs)
	plan := catalogmodel.Plan(catalogmodel.Config{ManagedBy: p.cfg.ManagedBy, HealthProbesPerTeam: p.catalog.cfg.HealthProbesPerTeam, HealthProbes: p.catalog.cfg.HealthProbes}, snap, merged, ips)
	p.catalog.health.Set(plan.Probed)
	for _, o := range plan.Outside {
		p.report(o.Slice.Namespace, o.Slice.Labels[discoveryv1.LabelServiceName], []sourceReport{{Cluster: o.Cluster, Slice: o.Slice, Reason: ReasonEndpointsOutsidePodRanges, Dropped: o.Dropped}})
	}
	var errs []error
	errs = append(errs, p.writeCatalogPlans(ctx, plan.Places))
	errs = append(errs, p.writeBound(ctx, plan.Bound))
	releaseStaleGlobals(p.ips, res)
	s := p.catalog
	errs = append(errs, plan.Status.Write(ctx, catalogmodel.StatusWriter{Hub: s.cfg.Hub, Globals: s.globals, Bindings: s.bindings, Imports: s.imports, Recorder: s.recorder}))
	return errors.Join(errs...)
}

// readCatalogSnapshot reads the catalog and what the members published of
// themselves: which are synced and alive, their namespaces, whether they
// are derived, the catalog's imports each holds, and the addresses each
// hands out (its pod ranges as the operator states them, its nodes' entry
// points, its Service ranges), which a binding may not name.
func (p *HubPlanner) readCatalogSnapshot() (catalogmodel.Snapshot, catalog.Catalog) {
	snap := catalogmodel.Snapshot{Members: map[string]*catalogmodel.Member{}, Probes: p.catalog.health.Probes()}
	var synced []string
	var ranges []catalog.KubernetesRange
	p.mu.Lock()
	ids := p.memberIDs()
	for _, id := range ids {
		namespaces, isSynced := p.namespaces[id]
		m := &catalogmodel.Member{ID: id, Synced: isSynced, Alive: p.alive[id],
			Namespaces: maps.Clone(namespaces), Services: map[string]*v1.Service{}, Slices: map[string][]*discoveryv1.EndpointSlice{},
			Imports: map[string]*mcsv1beta1.ServiceImport{}}
		snap.AnyAlive = snap.AnyAlive || m.Alive
		snap.Members[id] = m
	}
	p.mu.Unlock()
	for _, id := range ids {
		m := snap.Members[id]
		mc := p.memberClusterOf(id)
		if !m.Synced || mc == nil {
			continue
		}
		synced = append(synced, id)
		m.Derived = mc.Spec.Derived
		for _, ci := range mc.Spec.CatalogImports {
			m.Imports[ci.Service.Namespace+"/"+ci.Service.Name] = &mcsv1beta1.ServiceImport{
				ObjectMeta: metav1.ObjectMeta{Namespace: ci.Service.Namespace, Name: ci.Service.Name, Annotations: map[string]string{catalog.AnnotationGlobalService: ci.GlobalService}},
				Spec:       mcsv1beta1.ServiceImportSpec{IPs: ci.IPs},
			}
		}
		prefixes := slices.Clone(p.cfg.MemberPodCIDRs[id])
		for _, a := range mc.Spec.EntryPoints {
			if ip, err := netip.ParseAddr(a); err == nil {
				prefixes = append(prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
		for _, c := range mc.Spec.ServiceCIDRs {
			if pr, err := netip.ParsePrefix(c); err == nil {
				prefixes = append(prefixes, pr.Masked())
			}
		}
		for _, pr := range prefixes {
			ranges = append(ranges, catalog.KubernetesRange{Prefix: pr})
		}
	}
	return snap, p.catalog.read(&p.cfg, synced, ranges)
}

// readBound reads, into snap, the Services the catalog's bindings name as
// their members published them, and what of their slices may be
// planned: within the ranges the operator states for the member, or,
// where it states none, what the slices vouch for (trustedPart); the
// agent has checked who wrote them.
func (p *HubPlanner) readBound(snap *catalogmodel.Snapshot) {
	for _, svc := range snap.Result.Services {
		for _, b := range svc.Bindings {
			m := snap.Members[b.Spec.Cluster]
			if b.Spec.Service == nil || m == nil || !m.Synced {
				continue
			}
			ns, name := b.Spec.Service.Namespace, b.Spec.Service.Name
			key := ns + "/" + name
			if _, read := m.Services[key]; read {
				continue
			}
			obj, ok, _ := p.exports.GetStore().GetByKey(m.ID + "/" + pull.MemberExportName(ns, name))
			me, isExport := obj.(*hubv1alpha1.MemberExport)
			if !ok || !isExport {
				continue
			}
			var published []*discoveryv1.EndpointSlice
			for _, s := range indexed[*discoveryv1.EndpointSlice](p.slices.GetIndexer(), byPlannedService, key) {
				if s.Namespace == m.ID {
					published = append(published, s)
				}
			}
			src := pull.Read(me, ownedBy(published, me))
			if src.Service == nil {
				continue
			}
			m.Services[key] = src.Service
			r := endpointRangesOf(p.cfg.MemberPodCIDRs, m.ID, nil, nil)
			m.EndpointRanges = r.Prefixes
			for _, sl := range src.Slices {
				sl, reports := trustedPart(&p.cfg, &memberSnapshot{ID: m.ID, RangesKnown: r.Known, SlicesChecked: true}, sl, src.Service)
				p.report(ns, name, reports)
				if sl != nil {
					m.Slices[key] = append(m.Slices[key], sl)
				}
			}
		}
	}
}

// heldIPs is what the export model's plan of placement p's local name
// holds: pull mode's half of allocateCatalogIPs.
func (p *HubPlanner) heldIPs(pl catalog.Placement) (clustersetip.Claim, bool) {
	sp := p.plannedOf(pl.LocalName.Namespace, pl.LocalName.Name)
	if sp == nil || sp.Spec.Import == nil {
		return clustersetip.Claim{}, false
	}
	return clustersetip.Claim{IPs: sp.Spec.Import.Spec.IPs, Created: sp.CreationTimestamp.Time, Member: pull.PlanNamespace}, true
}

// catalogPlansOf are the ServicePlans of places, by name: one per global
// service and local name, imported in the members it is placed in, and
// their slices.
func catalogPlansOf(places map[string]map[string]*catalogmodel.Variant) (map[string]*hubv1alpha1.ServicePlan, map[string][]*discoveryv1.EndpointSlice) {
	plans := map[string]*hubv1alpha1.ServicePlan{}
	planned := map[string][]*discoveryv1.EndpointSlice{}
	for lk, variants := range places {
		ns, name, _ := strings.Cut(lk, "/")
		byGlobal := map[string][]string{}
		for cluster, v := range variants {
			g := v.Import.Annotations[catalog.AnnotationGlobalService]
			byGlobal[g] = append(byGlobal[g], cluster)
		}
		for g, clusters := range byGlobal {
			slices.Sort(clusters)
			// The variants of one global service under one local name
			// are the same in every member (catalogmodel.Plan).
			v := variants[clusters[0]]
			d := &desiredState{Import: v.Import, Clusters: v.Clusters, IPError: v.IPError, Slices: v.Slices, ImportedIn: clusters}
			sp, sl := hubPlanOf(ns, name, d)
			sp.Name = pull.CatalogPlanName(ns, name, g)
			sp.Spec.GlobalService = g
			digest := pull.GlobalServiceDigest(g)
			for _, s := range sl {
				s.Name = pull.PublishedSliceName(ns, digest+"."+s.Annotations[hubv1alpha1.AnnotationImportedSlice])
				s.Labels[hubv1alpha1.LabelGlobalService] = digest
			}
			plans[sp.Name] = sp
			planned[sp.Name] = sl
		}
	}
	return plans, planned
}

// writeCatalogPlans makes the plan what places says: every plan written
// where it differs, every other plan (the export model's, after a switch,
// and places gone) removed with its slices.
func (p *HubPlanner) writeCatalogPlans(ctx context.Context, places map[string]map[string]*catalogmodel.Variant) error {
	plans, planned := catalogPlansOf(places)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(plans)) {
		want := plans[name]
		ns, svc, g := want.Spec.Service.Namespace, want.Spec.Service.Name, want.Spec.GlobalService
		var have *hubv1alpha1.ServicePlan
		if obj, ok, _ := p.plans.GetStore().GetByKey(pull.PlanNamespace + "/" + name); ok {
			have, _ = obj.(*hubv1alpha1.ServicePlan)
		}
		if err := p.writePlan(ctx, catalogQueueKey, want, have); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, p.writePlanSlices(ctx, catalogQueueKey, p.planSlicesOf(ns, svc, g), planned[name]))
	}
	for _, obj := range p.plans.GetStore().List() {
		sp, ok := obj.(*hubv1alpha1.ServicePlan)
		if !ok || plans[sp.Name] != nil {
			continue
		}
		ns, svc := sp.Spec.Service.Namespace, sp.Spec.Service.Name
		if err := p.writePlanSlices(ctx, catalogQueueKey, p.planSlicesOf(ns, svc, sp.Spec.GlobalService), nil); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, p.deletePlan(ctx, ns+"/"+svc, sp))
	}
	return errors.Join(errs...)
}

// writeBound names, in each member's MemberCluster status, the Services
// of it the catalog binds (bound, as cluster/namespace/name), which its
// agent publishes.
func (p *HubPlanner) writeBound(ctx context.Context, bound map[string]bool) error {
	byMember := map[string][]hubv1alpha1.ServiceName{}
	for k := range bound {
		parts := strings.SplitN(k, "/", 3)
		if len(parts) == 3 {
			byMember[parts[0]] = append(byMember[parts[0]], hubv1alpha1.ServiceName{Namespace: parts[1], Name: parts[2]})
		}
	}
	var errs []error
	for _, id := range p.memberIDs() {
		mc := p.memberClusterOf(id)
		if mc == nil {
			continue
		}
		want := byMember[id]
		slices.SortFunc(want, func(a, b hubv1alpha1.ServiceName) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		if apiequality.Semantic.DeepEqual(mc.Status.BoundServices, want) || len(mc.Status.BoundServices) == 0 && len(want) == 0 {
			continue
		}
		update := mc.DeepCopy()
		update.Status.BoundServices = want
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(update)
		if err != nil {
			return err
		}
		_, err = p.hubDyn.Resource(hubMemberClusters).Namespace(id).UpdateStatus(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
		errs = append(errs, pull.IgnoreNotFound(p.write(resourceMemberClusters, err)))
	}
	return errors.Join(errs...)
}

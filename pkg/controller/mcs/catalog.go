package mcs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	catalogclientset "k8s.io/multiclusterservices/client/catalog/clientset/versioned"
	cataloginformers "k8s.io/multiclusterservices/client/catalog/informers/externalversions"
	cataloglisters "k8s.io/multiclusterservices/client/catalog/listers/catalog/v1alpha1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/clustersetip"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/eventrecorder"
)

// In catalog mode (Config.Catalog) the clusterset is described by the
// service catalog in the hub (package catalog) instead of by
// namespace sameness: ServiceExports are not read; GlobalServices,
// ServiceBindings and GlobalServiceImports are resolved into the
// same KEP-1645 objects the export model writes (a ServiceImport and
// EndpointSlices per source cluster), placed under the local names the
// imports ask for. Members' writers, derived mode, and the proxies see no
// difference.

// CatalogConfig is where the catalog is.
type CatalogConfig struct {
	// Hub reads the catalog objects and writes their status; HubKube reads
	// the teams' namespaces and records events.
	Hub     catalogclientset.Interface
	HubKube kubernetes.Interface
	// HealthProbesPerTeam and HealthProbes bound the addresses that
	// health checks probe, of one team and in all (health.go); zero is
	// DefaultHealthProbesPerTeam, DefaultHealthProbes.
	HealthProbesPerTeam, HealthProbes int
	// ObjectsPerTeam bounds each team's global services, bindings and
	// imports (catalog.Catalog.MaxObjectsPerTeam; 0: no bound).
	ObjectsPerTeam int
	// OwnNetworks are the networks of the controller's own interfaces:
	// an address there is refused as a binding's endpoint, so that no
	// team probes (through health checks) or serves the network the
	// controller dials from.
	OwnNetworks []netip.Prefix
}

func init() {
	utilruntime.Must(catalogv1alpha1.AddToScheme(scheme.Scheme))
}

// catalogKeyPrefix starts the clusterset IP allocator's key of a global
// service, which can never be a namespace/name.
const catalogKeyPrefix = "catalog:"

// catalogState is the hub's catalog as the controller caches it, and what
// its last resolution decided.
type catalogState struct {
	cfg      CatalogConfig
	globals  cataloglisters.GlobalServiceLister
	bindings cataloglisters.ServiceBindingLister
	imports  cataloglisters.GlobalServiceImportLister
	teams    corelisters.NamespaceLister
	synced   []cache.InformerSynced
	recorder events.EventRecorder
	// queue holds the one key of the catalog: any change resolves it all
	// again (a catalog is small next to the endpoints it stands for).
	queue  workqueue.TypedRateLimitingInterface[string]
	health *healthChecker

	mu sync.Mutex
	// bound are the members' Services the catalog binds, as
	// cluster/namespace/name: their changes resolve the catalog again.
	bound map[string]bool
	// placed are the local keys (namespace/name) the last resolution
	// placed somewhere.
	placed map[string]bool
}

const catalogQueueKey = "catalog"

func newCatalogState(cfg CatalogConfig) *catalogState {
	if cfg.HealthProbesPerTeam <= 0 {
		cfg.HealthProbesPerTeam = DefaultHealthProbesPerTeam
	}
	if cfg.HealthProbes <= 0 {
		cfg.HealthProbes = DefaultHealthProbes
	}
	s := &catalogState{
		cfg:    cfg,
		queue:  workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "catalog"}),
		bound:  map[string]bool{},
		placed: map[string]bool{},
	}
	s.health = newHealthChecker(func() { s.queue.Add(catalogQueueKey) })
	return s
}

// runCatalog starts the hub's informers and, once they have synced, the
// catalog's worker and health checks.
func (c *Controller) runCatalog(ctx context.Context, run func(func(context.Context))) error {
	s := c.catalog
	shutdown, err := c.startCatalog(ctx)
	if err != nil {
		return err
	}
	run(func(ctx context.Context) {
		<-ctx.Done()
		s.queue.ShutDown()
		shutdown()
	})
	run(func(ctx context.Context) {
		for c.processCatalog(ctx) {
		}
	})
	run(s.health.run)
	s.queue.Add(catalogQueueKey)
	return nil
}

// startCatalog starts the hub's informers and waits for them; shutdown
// stops its event recorder.
func (c *Controller) startCatalog(ctx context.Context) (shutdown func(), err error) {
	s := c.catalog
	hub := cataloginformers.NewSharedInformerFactory(s.cfg.Hub, 0)
	kube := informers.NewSharedInformerFactory(s.cfg.HubKube, 0)
	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.queue.Add(catalogQueueKey) },
		UpdateFunc: func(old, cur any) { s.queue.Add(catalogQueueKey) },
		DeleteFunc: func(any) { s.queue.Add(catalogQueueKey) },
	}
	catalogObjects := cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue.AddFunc, DeleteFunc: enqueue.DeleteFunc,
		// Status writes (ours) change nothing the resolution reads.
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(metav1.Object)
			n, ok2 := cur.(metav1.Object)
			if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && apiequality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) {
				return
			}
			s.queue.Add(catalogQueueKey)
		},
	}
	objs := hub.Catalog().V1alpha1()
	s.globals, s.bindings, s.imports = objs.GlobalServices().Lister(), objs.ServiceBindings().Lister(), objs.GlobalServiceImports().Lister()
	for _, inf := range []cache.SharedIndexInformer{objs.GlobalServices().Informer(), objs.ServiceBindings().Informer(), objs.GlobalServiceImports().Informer()} {
		_, _ = inf.AddEventHandler(catalogObjects)
		s.synced = append(s.synced, inf.HasSynced)
	}
	nsInf := kube.Core().V1().Namespaces().Informer()
	_, _ = nsInf.AddEventHandler(enqueue)
	s.teams = kube.Core().V1().Namespaces().Lister()
	s.synced = append(s.synced, nsInf.HasSynced)
	var stopEvents func()
	s.recorder, stopEvents = eventrecorder.New(s.cfg.HubKube)
	hub.Start(ctx.Done())
	kube.Start(ctx.Done())
	wctx, cancel := context.WithTimeout(ctx, c.cfg.InitialSyncTimeout+time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), s.synced...) {
		stopEvents()
		return nil, errors.New("the hub's catalog caches did not sync (are the catalog CRDs installed in the hub, and the controller allowed to read them?)")
	}
	return stopEvents, nil
}

func (c *Controller) processCatalog(ctx context.Context) bool {
	s := c.catalog
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	if err := c.syncCatalog(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Resolving the service catalog failed; retrying")
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
}

// syncCatalog resolves the catalog and records, for every local name it
// places (and every one it placed before), what each member should hold;
// then it writes the catalog objects' status.
func (c *Controller) syncCatalog(ctx context.Context) error {
	s := c.catalog
	cat := catalog.Catalog{Teams: map[string][]string{}}
	cat.GlobalServices, _ = s.globals.List(labels.Everything())
	cat.Bindings, _ = s.bindings.List(labels.Everything())
	cat.Imports, _ = s.imports.List(labels.Everything())
	namespaces, _ := s.teams.List(labels.Everything())
	for _, ns := range namespaces {
		if owned := catalog.MemberNamespaces(ns.Annotations); len(owned) > 0 {
			cat.Teams[ns.Name] = owned
		}
	}
	members, membership := c.membersAt()
	for _, m := range members {
		if m.hasSynced() {
			cat.Members = append(cat.Members, m.id)
			cat.KubernetesRanges = append(cat.KubernetesRanges, kubernetesRanges(m, c.cfg.MemberPodCIDRs[m.id])...)
		}
	}
	for _, p := range slices.Concat(c.cfg.ClusterSetIPRanges, c.catalog.cfg.OwnNetworks) {
		cat.KubernetesRanges = append(cat.KubernetesRanges, catalog.KubernetesRange{Prefix: p})
	}
	// What the configuration refuses in the export model it refuses in
	// the catalog: a team that owns every namespace still binds no
	// Service of kube-system and imports nothing there.
	cat.RefusedNamespaces, cat.ExportNamespaces = c.cfg.RefusedNamespaces, c.cfg.ExportNamespaces
	cat.MaxObjectsPerTeam = c.catalog.cfg.ObjectsPerTeam
	res := catalog.Resolve(cat)
	reasons := map[string]string{}
	for key, cond := range res.Valid {
		reasons[key] = cond.Reason
	}
	c.metrics.setCatalog(reasons)

	// The probes first: the bindings' status says which of their
	// addresses are over the limits.
	var checks []healthTarget
	for _, svc := range res.Services {
		for _, b := range svc.Bindings {
			if b.Spec.HealthCheck != nil {
				checks = append(checks, healthTargets(b)...)
			}
		}
	}
	s.health.set(limitHealthTargets(checks, s.cfg.HealthProbesPerTeam, s.cfg.HealthProbes))

	desired := map[string]*desiredState{}
	bound := map[string]bool{}
	st := newCatalogStatus(res)
	for _, key := range slices.Sorted(maps.Keys(res.Services)) {
		svc := res.Services[key]
		exports, unbound := catalog.Exports(svc, func(cluster string, name catalogv1alpha1.LocalName) *v1.Service {
			bound[cluster+"/"+name.Namespace+"/"+name.Name] = true
			m := c.member(cluster)
			if m == nil {
				return nil
			}
			got, err := m.services.Services(name.Namespace).Get(name.Name)
			if err != nil {
				return nil
			}
			return got
		})
		for name, why := range unbound {
			st.binding(svc.Global.Namespace, name, metav1.ConditionFalse, "ServiceNotFound", why)
		}
		r := export.Merge(exports)
		gkey := catalogKeyPrefix + key
		var ips []string
		ipError := ""
		if len(exports) == 0 || len(svc.Placements) == 0 {
			// A global service imported nowhere needs no IP: a team
			// with many of them would hold the shared range for nothing.
			c.clustersetIPs.Release(gkey)
		} else if r.Spec.Type == mcsv1beta1.ClusterSetIP {
			c.adoptClusterSetIPs(gkey, svc.Placements)
			var err error
			if ips, err = c.clustersetIPs.Allocate(gkey, r.Spec.IPFamilies); err != nil {
				ipError = err.Error()
			}
		}
		// The sources: each valid binding's endpoints, as every
		// placement gets them (namespace and name set per placement).
		var clusters []string
		sources := map[string][]*discoveryv1.EndpointSlice{}
		var bindings []*catalogv1alpha1.ServiceBinding
		for _, b := range svc.Bindings {
			if _, no := unbound[b.Name]; no {
				continue
			}
			bindings = append(bindings, b)
			if !slices.Contains(clusters, b.Spec.Cluster) {
				clusters = append(clusters, b.Spec.Cluster)
			}
		}
		slices.Sort(clusters)
		for _, b := range bindings {
			// As a placement in the binding's own terms would get them:
			// for the binding's status.
			c.bindingSlices(b, catalog.Placement{LocalName: catalogv1alpha1.LocalName{Namespace: b.Namespace, Name: b.Spec.GlobalService}}, r, sources)
		}
		for _, p := range svc.Placements {
			m := c.member(p.Cluster)
			if m == nil {
				continue
			}
			lk := p.LocalName.Namespace + "/" + p.LocalName.Name
			if n, err := m.namespaces.Get(p.LocalName.Namespace); err != nil || n.Status.Phase == v1.NamespaceTerminating {
				st.placement(p, metav1.ConditionFalse, "NamespaceNotFound", fmt.Sprintf("namespace %s does not exist in cluster %s", p.LocalName.Namespace, p.Cluster), nil)
				continue
			}
			if len(exports) == 0 {
				st.placement(p, metav1.ConditionFalse, "NoBackends", "the global service has no valid binding with endpoints", nil)
				continue
			}
			v := &desiredState{Import: catalog.Import(p, svc, r, ips, c.cfg.ManagedBy), Clusters: clusters, IPError: ipError, Slices: map[string]*discoveryv1.EndpointSlice{}}
			for _, b := range bindings {
				for _, sl := range c.bindingSlices(b, p, r, nil) {
					v.Slices[sl.Name] = sl
				}
			}
			d := desired[lk]
			if d == nil {
				d = &desiredState{Variants: map[string]*desiredState{}}
				desired[lk] = d
			}
			d.Variants[p.Cluster] = v
			// Ready once the member holds what was placed (its import's
			// events resolve the catalog again).
			if have, err := m.imports.ServiceImports(p.LocalName.Namespace).Get(p.LocalName.Name); err == nil && c.wrote(have) &&
				have.Annotations[catalog.AnnotationGlobalService] == key && (len(ips) == 0 || slices.Equal(have.Spec.IPs, ips) || c.derived(m)) {
				st.placement(p, metav1.ConditionTrue, "Imported", fmt.Sprintf("imported into cluster %s as %s", p.Cluster, lk), have.Spec.IPs)
			} else {
				st.placement(p, metav1.ConditionFalse, "Pending", fmt.Sprintf("being written into cluster %s as %s", p.Cluster, lk), nil)
			}
		}
		st.global(svc, clusters, ips, ipError, bindings)
		for _, b := range bindings {
			st.bindingReady(b, sources[b.Name], s.health)
		}
	}

	// Names placed before and no more, and imports this controller
	// wrote that nothing places (a switch from the export model), are
	// removed from every member.
	s.mu.Lock()
	stale := maps.Clone(s.placed)
	s.bound = bound
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
	c.releaseStaleGlobals(res)
	return st.write(ctx, c)
}

// bindingSlices are the slices placement p gets from binding b: those of
// its Service (from the trusted managers only, within the source
// cluster's pod ranges), or of its addresses. sources collects them by
// binding, for the binding's status.
func (c *Controller) bindingSlices(b *catalogv1alpha1.ServiceBinding, p catalog.Placement, r export.Result, sources map[string][]*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	served := r.ServedPorts[b.Name]
	var out []*discoveryv1.EndpointSlice
	if b.Spec.Service == nil {
		var healthy func(string) bool
		if b.Spec.HealthCheck != nil {
			healthy = func(addr string) bool { return c.catalog.health.healthy(b.Namespace+"/"+b.Name, addr) }
		}
		out = catalog.BindingSlices(b, p, c.cfg.ManagedBy, served, healthy)
	} else if src := c.member(b.Spec.Cluster); src != nil && src.hasSynced() && (c.leases.alive(b.Spec.Cluster) || !c.anyAlive()) {
		// As in the export model (syncClusterset): slices Kubernetes
		// wrote for the bound Service, within the source's ranges. A
		// Service that is gone has none.
		ns, name := b.Spec.Service.Namespace, b.Spec.Service.Name
		if svc, err := src.services.Services(ns).Get(name); err == nil {
			ranges := src.endpointRanges(c.cfg.MemberPodCIDRs)
			for _, sl := range indexed[*discoveryv1.EndpointSlice](src.localSlices, byService, ns+"/"+name) {
				sl, reports := trustedPart(&c.cfg, &memberSnapshot{ID: src.id, RangesKnown: ranges.Known}, sl, svc)
				for _, r := range reports {
					c.reportSource(src, r)
				}
				if sl == nil {
					continue
				}
				if is := catalog.ServiceSlice(sl, b, p, c.cfg.ManagedBy, served, r.Spec.TrafficDistribution); is != nil {
					if dropped := export.KeepWithin(is, ranges.Prefixes); len(dropped) > 0 {
						c.reportOutsidePodRanges(src, sl, dropped)
					}
					out = append(out, is)
				}
			}
		}
	}
	if sources != nil {
		sources[b.Name] = out
	}
	return out
}

// kubernetesRanges are the addresses member m hands out, which an
// address binding may not name: its pod ranges (configured, and its
// nodes' pod CIDRs), its nodes' own addresses, and its Service ranges
// (its ServiceCIDRs).
func kubernetesRanges(m *member, configured []netip.Prefix) []catalog.KubernetesRange {
	var out []catalog.KubernetesRange
	cidrs, addrs := m.nodeRanges()
	for _, p := range slices.Concat(configured, cidrs, addrs) {
		out = append(out, catalog.KubernetesRange{Prefix: p})
	}
	serviceCIDRs, _ := m.serviceCIDRs.List(labels.Everything())
	for _, sc := range serviceCIDRs {
		for _, cidr := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(cidr); err == nil {
				out = append(out, catalog.KubernetesRange{Prefix: p.Masked()})
			}
		}
	}
	return out
}

// anyAlive tells whether some member's lease is alive (when none is, the
// last known endpoints stay, as in the export model).
func (c *Controller) anyAlive() bool {
	for _, m := range c.memberList() {
		if c.leases.alive(m.id) {
			return true
		}
	}
	return false
}

// adoptClusterSetIPs gives global service gkey, when it has no clusterset
// IP yet, the IPs that an import of ours at one of its placements already
// carries under the export model's key (namespace/name): a clusterset
// switched from the export model to the catalog keeps its IPs, and
// clients that resolved them keep working.
func (c *Controller) adoptClusterSetIPs(gkey string, placements []catalog.Placement) {
	for _, p := range placements {
		m := c.member(p.Cluster)
		if m == nil {
			continue
		}
		si, err := m.imports.ServiceImports(p.LocalName.Namespace).Get(p.LocalName.Name)
		if err != nil || !c.wrote(si) || len(si.Spec.IPs) == 0 {
			continue
		}
		owner, ok := c.clustersetIPs.Owner(si.Spec.IPs[0])
		if ok && owner == gkey {
			return
		}
		if ok && !strings.HasPrefix(owner, catalogKeyPrefix) {
			c.clustersetIPs.Release(owner)
			c.clustersetIPs.Restore([]clustersetip.Claim{{Key: gkey, IPs: si.Spec.IPs, Created: si.CreationTimestamp.Time}})
			return
		}
	}
}

// releaseStaleGlobals frees the clusterset IPs of keys that no global
// service of res holds: global services deleted, and the export model's
// keys after a switch.
func (c *Controller) releaseStaleGlobals(res catalog.Result) {
	for _, key := range c.clustersetIPs.Keys() {
		if g, ok := strings.CutPrefix(key, catalogKeyPrefix); !ok || res.Services[g] == nil {
			c.clustersetIPs.Release(key)
		}
	}
}

// catalogBinds tells whether the catalog binds member m's Service key.
func (c *Controller) catalogBinds(m *member, key string) bool {
	c.catalog.mu.Lock()
	defer c.catalog.mu.Unlock()
	return c.catalog.bound[m.id+"/"+key]
}

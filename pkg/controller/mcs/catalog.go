package mcs

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

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

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	catalogclientset "k8s.io/multiclusterservices/client/catalog/clientset/versioned"
	cataloginformers "k8s.io/multiclusterservices/client/catalog/informers/externalversions"
	cataloglisters "k8s.io/multiclusterservices/client/catalog/listers/catalog/v1alpha1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/catalogmodel"
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
	// health checks probe, of one team and in all (catalogmodel.Checker); zero is
	// catalogmodel.DefaultHealthProbesPerTeam and DefaultHealthProbes.
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
	health *catalogmodel.Checker

	mu sync.Mutex
	// bound are the members' Services the catalog binds, as
	// cluster/namespace/name: their changes resolve the catalog again.
	bound map[string]bool
	// placed are the local keys (namespace/name) the last resolution
	// placed somewhere.
	placed map[string]bool
}

const catalogQueueKey = "catalog"

// newCatalogState returns the catalog's state; changed is called when a
// health check's answer changes (nil: the catalog's queue is given the
// catalog's key).
func newCatalogState(cfg CatalogConfig, changed func()) *catalogState {
	if cfg.HealthProbesPerTeam <= 0 {
		cfg.HealthProbesPerTeam = catalogmodel.DefaultHealthProbesPerTeam
	}
	if cfg.HealthProbes <= 0 {
		cfg.HealthProbes = catalogmodel.DefaultHealthProbes
	}
	s := &catalogState{
		cfg:    cfg,
		queue:  workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "catalog"}),
		bound:  map[string]bool{},
		placed: map[string]bool{},
	}
	if changed == nil {
		changed = func() { s.queue.Add(catalogQueueKey) }
	}
	s.health = catalogmodel.NewChecker(changed)
	return s
}

// runCatalog starts the hub's informers and, once they have synced, the
// catalog's worker and health checks.
func (cm catalogModel) runCatalog(ctx context.Context, run func(func(context.Context))) error {
	s := cm.c.catalog
	shutdown, err := cm.startCatalog(ctx)
	if err != nil {
		return err
	}
	run(func(ctx context.Context) {
		<-ctx.Done()
		s.queue.ShutDown()
		shutdown()
	})
	run(func(ctx context.Context) {
		for cm.processCatalog(ctx) {
		}
	})
	run(s.health.Run)
	s.queue.Add(catalogQueueKey)
	return nil
}

// startCatalog starts the hub's informers and waits for them; shutdown
// stops its event recorder.
func (cm catalogModel) startCatalog(ctx context.Context) (shutdown func(), err error) {
	s := cm.c.catalog
	return s.start(ctx, cm.c.cfg.InitialSyncTimeout+time.Minute, func() { s.queue.Add(catalogQueueKey) })
}

// start starts the hub's informers of the catalog, waits for them at most
// timeout, and calls changed at every change of what a resolution reads
// there; shutdown stops its event recorder. The controller and pull
// mode's planner read the catalog so.
func (s *catalogState) start(ctx context.Context, timeout time.Duration, changed func()) (shutdown func(), err error) {
	hub := cataloginformers.NewSharedInformerFactory(s.cfg.Hub, 0)
	kube := informers.NewSharedInformerFactory(s.cfg.HubKube, 0)
	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(old, cur any) { changed() },
		DeleteFunc: func(any) { changed() },
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
			changed()
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
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), s.synced...) {
		stopEvents()
		return nil, errors.New("the hub's catalog caches did not sync (are the catalog CRDs installed in the hub, and this identity allowed to read them?)")
	}
	return stopEvents, nil
}

func (cm catalogModel) processCatalog(ctx context.Context) bool {
	s := cm.c.catalog
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	if err := cm.syncCatalog(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Resolving the service catalog failed; retrying")
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
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

// allocateCatalogIPs gives each global service of merged that needs
// clusterset IPs its own from ips, adopting first what a local name at one
// of its placements already holds (adoptCatalogIPs), frees those of the
// ones that need none, and returns what each got. held is where a mode
// keeps what a local name holds: push mode's imports in the members, pull
// mode's plan in the hub.
func allocateCatalogIPs(ips *clustersetip.Allocator, merged []*catalogmodel.Merged, held func(catalog.Placement) (clustersetip.Claim, bool)) map[string]catalogmodel.Allocation {
	out := map[string]catalogmodel.Allocation{}
	for _, g := range merged {
		switch g.IPs() {
		case catalogmodel.ReleaseIPs:
			ips.Release(g.IPKey)
		case catalogmodel.AllocateIPs:
			adoptCatalogIPs(ips, g.IPKey, g.Service.Placements, held)
			var a catalogmodel.Allocation
			var err error
			if a.IPs, err = ips.Allocate(g.IPKey, g.Result.Spec.IPFamilies); err != nil {
				a.Error = err.Error()
			}
			out[g.IPKey] = a
		}
	}
	return out
}

// adoptCatalogIPs gives global service gkey, when it has no clusterset
// IP yet, the IPs that a local name at one of its placements already
// holds (held) under the export model's key (namespace/name): a
// clusterset switched from the export model to the catalog keeps its IPs,
// and clients that resolved them keep working.
func adoptCatalogIPs(ips *clustersetip.Allocator, gkey string, placements []catalog.Placement, held func(catalog.Placement) (clustersetip.Claim, bool)) {
	for _, p := range placements {
		claim, ok := held(p)
		if !ok || len(claim.IPs) == 0 {
			continue
		}
		owner, ok := ips.Owner(claim.IPs[0])
		if ok && owner == gkey {
			return
		}
		if ok && !strings.HasPrefix(owner, catalogmodel.KeyPrefix) {
			ips.Release(owner)
			claim.Key = gkey
			ips.Restore([]clustersetip.Claim{claim})
			return
		}
	}
}

// heldIPs is what an import of ours at placement p holds: push mode's
// half of allocateCatalogIPs.
func (cm catalogModel) heldIPs(p catalog.Placement) (clustersetip.Claim, bool) {
	m := cm.c.members.get(p.Cluster)
	if m == nil {
		return clustersetip.Claim{}, false
	}
	si, err := m.imports.ServiceImports(p.LocalName.Namespace).Get(p.LocalName.Name)
	if err != nil || !cm.c.wrote(si) {
		return clustersetip.Claim{}, false
	}
	return clustersetip.Claim{IPs: si.Spec.IPs, Created: si.CreationTimestamp.Time}, true
}

// releaseStaleGlobals frees the clusterset IPs of keys that no global
// service of res holds: global services deleted, and the export model's
// keys after a switch.
func releaseStaleGlobals(ips *clustersetip.Allocator, res catalog.Result) {
	for _, key := range ips.Keys() {
		if g, ok := strings.CutPrefix(key, catalogmodel.KeyPrefix); !ok || res.Services[g] == nil {
			ips.Release(key)
		}
	}
}

// catalogBinds tells whether the catalog binds member m's Service key.
func (cm catalogModel) catalogBinds(m *member, key string) bool {
	s := cm.c.catalog
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bound[m.id+"/"+key]
}

package mcs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/catalogmodel"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/clustersetip"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

// The planner of pull mode (docs/architecture.md, "Pull mode"): it runs
// in the hub, reads what every member's agent publishes in the member's
// hub namespace (its MemberCluster, its MemberExports and their slices,
// its Lease), plans each name with planName, the function push mode
// plans with, allocates clusterset IPs with the same allocator, and
// writes the plan once, into the plan namespace: per name a ServicePlan
// and one slice set per source (hubPlanOf). Members × names objects, and
// no credential of any member: each agent writes its own part.

var (
	hubMemberExports  = hubv1alpha1.SchemeGroupVersion.WithResource("memberexports")
	hubMemberClusters = hubv1alpha1.SchemeGroupVersion.WithResource("memberclusters")
	hubServicePlans   = hubv1alpha1.SchemeGroupVersion.WithResource("serviceplans")
)

// byPlannedService indexes what the hub holds of a name by its
// namespace/name in the members; byPlannedNamespace by that namespace.
const (
	byPlannedService = "plannedService"

	// The resources the planner writes, as its writes metric names them.
	resourceServicePlans   = "serviceplans"
	resourceEndpointSlices = "endpointslices"
	resourceMemberClusters = "memberclusters/status"
	byPlannedNamespace     = "plannedNamespace"
)

// HubPlannerConfig is what pull mode's planner plans with.
type HubPlannerConfig struct {
	// Config is the planning part of the controller's configuration:
	// ManagedBy, ClusterSetIPRanges and their limits, RefusedNamespaces,
	// ExportNamespaces, MemberPodCIDRs (the ranges the operator states),
	// EndpointTTL (members whose Lease is older have expired),
	// ClusterSelection, Workers. Members are the hub's member namespaces,
	// not Config.Members.
	Config Config
	// Hub and HubDynamic are the planner's clients of the hub.
	Hub        kubernetes.Interface
	HubDynamic dynamic.Interface
	// Recorder, when set, says on a member's MemberExport in the hub
	// what of its endpoints is not planned.
	Recorder events.EventRecorder
	// Resync is how often the informers resync (0: never).
	Resync time.Duration
	// Registry, when set, gets the planner's metrics.
	Registry metrics.KubeRegistry
	// Profiles, when set, is the hub's Cluster Inventory: the
	// ClusterProfiles whose status.properties win over what members
	// publish of theirs (pull.MemberProperties).
	Profiles *HubProfiles
	// Catalog, when set, plans the hub's service catalog
	// (--service-model=catalog) instead of the members' exports.
	Catalog *CatalogConfig
}

// HubProfiles is where the planner reads ClusterProfiles in the hub.
type HubProfiles struct {
	// Resource is the ClusterProfile version the hub serves.
	Resource schema.GroupVersionResource
	// Namespace is the inventory namespace, Selector picks its profiles.
	Namespace string
	Selector  labels.Selector
	// ClusterSet, when set, is the clusterset planned: a profile that
	// names another is not read.
	ClusterSet string
}

// HubPlanner is pull mode's planner.
type HubPlanner struct {
	cfg      Config
	hub      kubernetes.Interface
	hubDyn   dynamic.Interface
	recorder events.EventRecorder
	logger   klog.Logger
	queue    workqueue.TypedRateLimitingInterface[string]
	ips      *clustersetip.Allocator

	hubInformers  informers.SharedInformerFactory
	memberNS      cache.SharedIndexInformer
	published     informers.SharedInformerFactory
	leaseInf      informers.SharedInformerFactory
	planned       informers.SharedInformerFactory
	dyn           dynamicinformer.DynamicSharedInformerFactory
	planDyn       dynamicinformer.DynamicSharedInformerFactory
	exports       cache.SharedIndexInformer
	memberCluster cache.SharedIndexInformer
	slices        cache.SharedIndexInformer
	leases        cache.SharedIndexInformer
	plans         cache.SharedIndexInformer
	planSlices    cache.SharedIndexInformer
	// profileInf and profiles read the hub's ClusterProfiles, those of
	// profileClusterSet (HubProfiles.ClusterSet); nil without
	// HubPlannerConfig.Profiles.
	profileInf        dynamicinformer.DynamicSharedInformerFactory
	profiles          cache.SharedIndexInformer
	profilesRead      cache.InformerSynced
	profileClusterSet string

	mu sync.Mutex
	// namespaces are, by member, the namespaces its MemberCluster names
	// (read once per change of it, not per plan).
	namespaces map[string]map[string]*v1.Namespace
	// entryPoints are, by member, the addresses its MemberCluster gives
	// of its nodes that serve node ports.
	entryPoints map[string][]string
	// properties are, by member, the cluster properties cluster selection
	// matches (pull.MemberProperties): what its MemberCluster published
	// (publishedProps) under what its ClusterProfile says
	// (profileProps).
	properties     map[string]map[string]string
	publishedProps map[string]map[string]string
	profileProps   map[string][]inventoryv1alpha1.Property
	// alive is each member's liveness at the last check.
	alive map[string]bool
	// reported are the reports already said, by slice UID and reason.
	reported map[string]bool

	// own are the planner's writes its informers have not shown yet.
	own *pull.OwnWrites
	// slots bound the writes in flight to the workers: a name's writes go
	// out at once, sharing them with every other name's.
	slots pull.WriteSlots

	// catalog is the hub's service catalog, in its model; nil in the
	// export model.
	catalog *catalogState

	writes  atomic.Int64
	metrics *plannerMetrics
	ready   chan struct{}
}

// NewHubPlanner returns pull mode's planner of cfg.
func NewHubPlanner(cfg HubPlannerConfig) (*HubPlanner, error) {
	if cfg.Config.EndpointTTL <= 0 {
		return nil, errors.New("the planner needs an endpoint TTL: a member whose Lease is older has expired")
	}
	if cfg.Config.ManagedBy == "" {
		return nil, errors.New("the planner needs the manager its imports are labelled with")
	}
	if cfg.Config.Workers <= 0 {
		cfg.Config.Workers = 4
	}
	p := &HubPlanner{
		cfg: cfg.Config, hub: cfg.Hub, hubDyn: cfg.HubDynamic, recorder: cfg.Recorder,
		logger:         klog.Background().WithName("planner"),
		queue:          workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "planner"}),
		ips:            clustersetip.New(cfg.Config.ClusterSetIPRanges),
		namespaces:     map[string]map[string]*v1.Namespace{},
		entryPoints:    map[string][]string{},
		properties:     map[string]map[string]string{},
		publishedProps: map[string]map[string]string{},
		profileProps:   map[string][]inventoryv1alpha1.Property{},
		alive:          map[string]bool{},
		reported:       map[string]bool{},
		own:            pull.NewOwnWrites(pull.CacheWait),
		slots:          pull.NewWriteSlots(cfg.Config.Workers),
		ready:          make(chan struct{}),
	}
	p.ips.SetLimits(cfg.Config.MaxClusterSetIPsPerNamespace, cfg.Config.MaxForeignImportsPerMember)
	p.ips.SetMemberLimit(cfg.Config.MaxClusterSetIPsPerMember)
	p.metrics = newPlannerMetrics(cfg.Registry, p)
	if cfg.Catalog != nil {
		p.catalog = newCatalogState(*cfg.Catalog, func() { p.queue.Add(catalogQueueKey) })
	}

	isMember, err := labels.NewRequirement(pull.LabelMemberCluster, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	p.hubInformers = informers.NewSharedInformerFactoryWithOptions(cfg.Hub, cfg.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labels.NewSelector().Add(*isMember).String() }))
	p.memberNS = p.hubInformers.Core().V1().Namespaces().Informer()
	// The agents' slices, in every namespace: only those of member
	// namespaces are read.
	p.published = informers.NewSharedInformerFactoryWithOptions(cfg.Hub, cfg.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: pull.AgentManager}).String()
		}))
	p.slices = p.published.Discovery().V1().EndpointSlices().Informer()
	p.leaseInf = informers.NewSharedInformerFactoryWithOptions(cfg.Hub, cfg.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", pull.AgentLeaseName).String()
		}))
	p.leases = p.leaseInf.Coordination().V1().Leases().Informer()
	p.planned = informers.NewSharedInformerFactoryWithOptions(cfg.Hub, cfg.Resync, informers.WithNamespace(pull.PlanNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: pull.PlannerManager}).String()
		}))
	p.planSlices = p.planned.Discovery().V1().EndpointSlices().Informer()
	if err := p.planSlices.SetTransform(digestPlanSlice); err != nil {
		return nil, err
	}
	p.dyn = dynamicinformer.NewDynamicSharedInformerFactory(cfg.HubDynamic, cfg.Resync)
	p.exports = p.dyn.ForResource(hubMemberExports).Informer()
	p.memberCluster = p.dyn.ForResource(hubMemberClusters).Informer()
	p.planDyn = dynamicinformer.NewFilteredDynamicSharedInformerFactory(cfg.HubDynamic, cfg.Resync, pull.PlanNamespace, nil)
	p.plans = p.planDyn.ForResource(hubServicePlans).Informer()
	if pr := cfg.Profiles; pr != nil {
		p.profileClusterSet = pr.ClusterSet
		p.profileInf = dynamicinformer.NewFilteredDynamicSharedInformerFactory(cfg.HubDynamic, cfg.Resync, pr.Namespace,
			func(o *metav1.ListOptions) { o.LabelSelector = pr.Selector.String() })
		p.profiles = p.profileInf.ForResource(pr.Resource).Informer()
		if err := p.profiles.SetTransform(typedFrom(func() runtime.Object { return &inventoryv1alpha1.ClusterProfile{} })); err != nil {
			return nil, err
		}
		profilesChanged := func(any) { p.profilesChanged() }
		reg, err := p.profiles.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: profilesChanged, UpdateFunc: func(_, obj any) { profilesChanged(obj) }, DeleteFunc: profilesChanged,
		})
		if err != nil {
			return nil, err
		}
		// Synced once the handler has read every profile, not only the
		// cache.
		p.profilesRead = reg.HasSynced
	}

	// The hub's objects are converted once, as they arrive, not at every
	// plan that reads them.
	for inf, typed := range map[cache.SharedIndexInformer]func() runtime.Object{
		p.exports:       func() runtime.Object { return &hubv1alpha1.MemberExport{} },
		p.memberCluster: func() runtime.Object { return &hubv1alpha1.MemberCluster{} },
		p.plans:         func() runtime.Object { return &hubv1alpha1.ServicePlan{} },
	} {
		if err := inf.SetTransform(typedFrom(typed)); err != nil {
			return nil, err
		}
	}
	serviceOfLabels := func(obj any) ([]string, error) {
		o, ok := obj.(metav1.Object)
		if !ok {
			return nil, nil
		}
		ns, name := o.GetLabels()[hubv1alpha1.LabelServiceNamespace], o.GetLabels()[hubv1alpha1.LabelServiceName]
		if ns == "" || name == "" {
			return nil, nil
		}
		return []string{ns + "/" + name}, nil
	}
	specService := func(obj any) (hubv1alpha1.ServiceName, bool) {
		switch o := obj.(type) {
		case *hubv1alpha1.MemberExport:
			return o.Spec.Service, true
		case *hubv1alpha1.ServicePlan:
			return o.Spec.Service, true
		}
		return hubv1alpha1.ServiceName{}, false
	}
	for _, inf := range []cache.SharedIndexInformer{p.exports, p.plans} {
		if err := inf.AddIndexers(cache.Indexers{
			byPlannedService: func(obj any) ([]string, error) {
				if s, ok := specService(obj); ok {
					return []string{s.Namespace + "/" + s.Name}, nil
				}
				return nil, nil
			},
			byPlannedNamespace: func(obj any) ([]string, error) {
				if s, ok := specService(obj); ok {
					return []string{s.Namespace}, nil
				}
				return nil, nil
			},
		}); err != nil {
			return nil, err
		}
	}
	for _, inf := range []cache.SharedIndexInformer{p.slices, p.planSlices} {
		if err := inf.AddIndexers(cache.Indexers{byPlannedService: serviceOfLabels}); err != nil {
			return nil, err
		}
	}

	// byKey enqueues the name an object is planned for. Of what the
	// planner writes (resource set), an event may be one of its own
	// writes it waits for: seen before the name is planned again.
	byKey := func(key func(obj any) (string, bool), resource string) cache.ResourceEventHandler {
		enqueue := func(obj any, deleted bool) {
			if o := pull.ObjectOf[metav1.Object](obj); resource != "" && o != nil {
				p.own.Seen(resource, o, deleted)
			}
			if k, ok := key(obj); ok {
				p.enqueue(k)
			}
		}
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { enqueue(obj, false) },
			UpdateFunc: func(_, obj any) { enqueue(obj, false) },
			DeleteFunc: func(obj any) { enqueue(obj, true) },
		}
	}
	specKey := func(obj any) (string, bool) {
		s, ok := specService(pull.ObjectOf[runtime.Object](obj))
		return s.Namespace + "/" + s.Name, ok && s.Namespace != "" && s.Name != ""
	}
	labelKey := func(obj any) (string, bool) {
		keys, _ := serviceOfLabels(pull.ObjectOf[metav1.Object](obj))
		if len(keys) == 0 {
			return "", false
		}
		return keys[0], true
	}
	all := func(any) { p.enqueueAll() }
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{p.exports, byKey(specKey, "")},
		{p.plans, byKey(specKey, resourceServicePlans)},
		{p.slices, byKey(labelKey, "")},
		{p.planSlices, byKey(labelKey, resourceEndpointSlices)},
		{p.memberNS, cache.ResourceEventHandlerFuncs{AddFunc: all, UpdateFunc: func(_, obj any) { all(obj) }, DeleteFunc: all}},
		{p.memberCluster, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { p.memberClusterChanged(obj, false) },
			UpdateFunc: func(_, obj any) { p.memberClusterChanged(obj, false) },
			DeleteFunc: func(obj any) { p.memberClusterChanged(obj, true) },
		}},
	} {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// typedFrom converts an unstructured object of the hub's API into the
// type newObj makes; deletion tombstones and other objects pass as they
// are.
func typedFrom(newObj func() runtime.Object) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		out := newObj()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		return out, nil
	}
}

// Ready is closed once the planner's caches synced and it plans.
func (p *HubPlanner) Ready() <-chan struct{} { return p.ready }

// Synced says, per member, whether its agent published its MemberCluster
// (the planner knows nothing else of it until then).
func (p *HubPlanner) Synced() map[string]bool {
	out := map[string]bool{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range p.memberIDs() {
		_, out[id] = p.namespaces[id]
	}
	return out
}

// Writes is how many writes the planner has made into the hub.
func (p *HubPlanner) Writes() int64 { return p.writes.Load() }

// Run plans until ctx is done.
func (p *HubPlanner) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer p.queue.ShutDown()
	for _, f := range []interface{ Start(<-chan struct{}) }{p.hubInformers, p.published, p.leaseInf, p.planned, p.dyn, p.planDyn} {
		f.Start(ctx.Done())
	}
	synced := []cache.InformerSynced{p.memberNS.HasSynced, p.exports.HasSynced, p.memberCluster.HasSynced, p.slices.HasSynced,
		p.leases.HasSynced, p.plans.HasSynced, p.planSlices.HasSynced}
	if p.profiles != nil {
		// Nothing is planned before the profiles are read: a member's
		// own word on a property its profile gives is never matched.
		p.profileInf.Start(ctx.Done())
		synced = append(synced, p.profilesRead)
	}
	if !cache.WaitForNamedCacheSync("planner", ctx.Done(), synced...) {
		return ctx.Err()
	}
	p.waitForMembers(ctx)
	if p.catalog != nil {
		if err := p.startCatalog(ctx); err != nil {
			return err
		}
	}
	p.restoreIPs()
	p.checkLiveness()
	p.logger.Info("Planning into the hub", "namespace", pull.PlanNamespace, "members", len(p.memberIDs()))
	p.enqueueAll()
	for range p.cfg.Workers {
		go wait.UntilWithContext(ctx, p.worker, time.Second)
	}
	close(p.ready)
	// A member expires when its Lease is not renewed: nothing is written
	// then, so liveness is looked at, not waited for.
	go wait.UntilWithContext(ctx, func(context.Context) { p.checkLiveness() }, time.Second)
	<-ctx.Done()
	return nil
}

// waitForMembers waits, at most the initial sync timeout, until every
// member namespace holds its MemberCluster, which its agent publishes
// once it has published every export its cluster had (Agent): as push
// mode's controller waits for every member's caches, so that a planner
// that starts beside its agents plans each name once, with every
// member's exports, rather than again (and every member's import again)
// as each member's arrive. A restarted planner finds them all and waits
// for nothing; a member whose agent does not come is planned without, as
// a member that is not synced.
func (p *HubPlanner) waitForMembers(ctx context.Context) {
	timeout := p.cfg.InitialSyncTimeout
	if timeout <= 0 {
		return
	}
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		for id, synced := range p.Synced() {
			if !synced {
				missing = append(missing, id)
			}
		}
		switch {
		case len(missing) == 0:
			return
		case time.Now().After(deadline):
			slices.Sort(missing)
			p.logger.Info("Planning without the members whose agent has not published them yet", "members", missing, "waited", timeout)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *HubPlanner) worker(ctx context.Context) {
	for {
		key, quit := p.queue.Get()
		if quit {
			return
		}
		start := time.Now()
		if err := p.sync(ctx, key); err != nil {
			p.metrics.sync.WithLabelValues("error").Observe(time.Since(start).Seconds())
			p.logger.Error(err, "Planning", "key", key)
			p.queue.AddRateLimited(key)
		} else {
			p.metrics.sync.WithLabelValues("success").Observe(time.Since(start).Seconds())
			p.queue.Forget(key)
		}
		p.queue.Done(key)
	}
}

// restoreIPs gives back to the allocator the clusterset IPs the plan
// holds: a restarted planner moves none.
func (p *HubPlanner) restoreIPs() {
	var claims []clustersetip.Claim
	claimed := map[string]bool{}
	for _, obj := range p.plans.GetStore().List() {
		sp, ok := obj.(*hubv1alpha1.ServicePlan)
		if !ok || sp.Spec.Import == nil || len(sp.Spec.Import.Spec.IPs) == 0 {
			continue
		}
		// In the catalog's model a global service holds its IPs under
		// its own key, however many local names it is placed under; in
		// the exports', a name keeps the IPs the catalog gave what its
		// members hold of it (a switch back), as push mode keeps what
		// the members' imports carry.
		key := sp.Spec.Service.Namespace + "/" + sp.Spec.Service.Name
		if g := sp.Spec.GlobalService; g != "" && p.catalog != nil {
			key = catalogmodel.KeyPrefix + g
		}
		if claimed[key] {
			continue
		}
		claimed[key] = true
		claims = append(claims, clustersetip.Claim{
			Key: key, IPs: sp.Spec.Import.Spec.IPs,
			Created: sp.CreationTimestamp.Time, Member: pull.PlanNamespace,
		})
	}
	if disputed := p.ips.Restore(claims); len(disputed) > 0 {
		p.logger.Info("Clusterset IPs the plan holds for two names are allocated afresh", "ips", disputed)
	}
}

// memberIDs are the members: the hub's namespaces labelled with their
// own name as cluster ID.
func (p *HubPlanner) memberIDs() []string {
	var out []string
	for _, obj := range p.memberNS.GetStore().List() {
		ns, ok := obj.(*v1.Namespace)
		if !ok || ns.Labels[pull.LabelMemberCluster] != ns.Name || ns.DeletionTimestamp != nil {
			continue
		}
		out = append(out, ns.Name)
	}
	slices.Sort(out)
	return out
}

// memberClusterChanged records a member's namespaces and properties and
// plans again the names of the namespaces that came or went (every name,
// when the member is new or gone, or its properties changed: it is a
// source of some imports with cluster selectors and the importer of
// others).
func (p *HubPlanner) memberClusterChanged(obj any, deleted bool) {
	mc := pull.ObjectOf[*hubv1alpha1.MemberCluster](obj)
	if mc == nil {
		return
	}
	if p.catalog != nil {
		// Its Service ranges, entry points and the catalog's imports it
		// holds are read by the catalog's resolution.
		p.queue.Add(catalogQueueKey)
	}
	id := mc.Namespace
	var now map[string]*v1.Namespace
	if !deleted {
		now = pull.MemberNamespaces(mc)
	}
	p.mu.Lock()
	before, had := p.namespaces[id]
	var propsChanged, entryPointsChanged bool
	if deleted {
		delete(p.namespaces, id)
		delete(p.publishedProps, id)
		delete(p.properties, id)
		delete(p.entryPoints, id)
	} else {
		p.namespaces[id] = now
		p.publishedProps[id] = mc.Spec.Properties
		propsChanged = p.mergeProperties(id)
		entryPointsChanged = !slices.Equal(p.entryPoints[id], mc.Spec.EntryPoints)
		p.entryPoints[id] = mc.Spec.EntryPoints
	}
	p.mu.Unlock()
	if !had || deleted || propsChanged && p.cfg.ClusterSelection {
		p.enqueueAll()
		return
	}
	if entryPointsChanged && len(p.cfg.IngressMembers) > 0 {
		// The member's NodePort ingresses are entered there: its
		// exports are planned again.
		objs, _ := p.exports.GetIndexer().ByIndex(cache.NamespaceIndex, id)
		for _, o := range objs {
			if me, ok := o.(*hubv1alpha1.MemberExport); ok {
				p.enqueue(me.Spec.Service.Namespace + "/" + me.Spec.Service.Name)
			}
		}
	}
	changed := map[string]bool{}
	for ns, n := range now {
		if b := before[ns]; b == nil || !b.CreationTimestamp.Equal(&n.CreationTimestamp) {
			changed[ns] = true
		}
	}
	for ns := range before {
		if now[ns] == nil {
			changed[ns] = true
		}
	}
	for ns := range changed {
		for _, inf := range []cache.SharedIndexInformer{p.exports, p.plans} {
			objs, _ := inf.GetIndexer().ByIndex(byPlannedNamespace, ns)
			for _, o := range objs {
				if sp, ok := o.(*hubv1alpha1.ServicePlan); ok {
					p.enqueue(sp.Spec.Service.Namespace + "/" + sp.Spec.Service.Name)
				} else if me, ok := o.(*hubv1alpha1.MemberExport); ok {
					p.enqueue(me.Spec.Service.Namespace + "/" + me.Spec.Service.Name)
				}
			}
		}
	}
}

// mergeProperties sets member id's properties from what it published and
// what its profile says, and tells whether they changed. Called with p.mu
// held, for a member whose MemberCluster is known.
func (p *HubPlanner) mergeProperties(id string) bool {
	props := pull.MemberProperties(id, p.publishedProps[id], p.profileProps[id])
	if maps.Equal(p.properties[id], props) {
		return false
	}
	p.properties[id] = props
	return true
}

// profilesChanged reads the hub's ClusterProfiles again and, where a
// member's properties change by them, plans every name again (as a
// member's own change of them does: it is a source of some imports with
// cluster selectors and the importer of others).
func (p *HubPlanner) profilesChanged() {
	var profiles []*inventoryv1alpha1.ClusterProfile
	for _, obj := range p.profiles.GetStore().List() {
		if cp, ok := obj.(*inventoryv1alpha1.ClusterProfile); ok {
			profiles = append(profiles, cp)
		}
	}
	byID := pull.ProfileProperties(profiles, p.profileClusterSet)
	p.mu.Lock()
	before := p.profileProps
	p.profileProps = byID
	changed := false
	// The members whose profile came, changed or went, and whose
	// MemberCluster is known.
	for id := range p.publishedProps {
		_, had := before[id]
		_, has := byID[id]
		if had || has {
			changed = p.mergeProperties(id) || changed
		}
	}
	p.mu.Unlock()
	if changed && p.cfg.ClusterSelection {
		p.enqueueAll()
	}
}

// enqueueAll plans every name again: those exported and those planned.
func (p *HubPlanner) enqueueAll() {
	for _, inf := range []cache.SharedIndexInformer{p.exports, p.plans} {
		for _, k := range inf.GetIndexer().ListIndexFuncValues(byPlannedService) {
			p.enqueue(k)
		}
	}
}

// leaseAlive says whether member id's agent renewed its Lease within the
// endpoint TTL.
func (p *HubPlanner) leaseAlive(id string, now time.Time) bool {
	obj, ok, _ := p.leases.GetStore().GetByKey(id + "/" + pull.AgentLeaseName)
	if !ok {
		return false
	}
	l, _ := obj.(*coordinationv1.Lease)
	return pull.AgentLeaseAlive(l, p.cfg.EndpointTTL, now)
}

// checkLiveness records each member's liveness and plans every name
// again when one changed.
func (p *HubPlanner) checkLiveness() {
	now := time.Now()
	changed := false
	p.mu.Lock()
	seen := map[string]bool{}
	for _, id := range p.memberIDs() {
		seen[id] = true
		alive := p.leaseAlive(id, now)
		if was, ok := p.alive[id]; !ok || was != alive {
			if ok {
				p.logger.Info("A member's liveness changed", "cluster", id, "alive", alive)
			}
			p.alive[id] = alive
			changed = true
		}
	}
	for id := range p.alive {
		if !seen[id] {
			delete(p.alive, id)
			changed = true
		}
	}
	states := map[string]int{"alive": 0, "expired": 0, "unsynced": 0}
	for id, alive := range p.alive {
		switch _, synced := p.namespaces[id]; {
		case !synced:
			states["unsynced"]++
		case alive:
			states["alive"]++
		default:
			states["expired"]++
		}
	}
	for state, n := range states {
		p.metrics.members.WithLabelValues(state).Set(float64(n))
	}
	p.mu.Unlock()
	if changed {
		p.enqueueAll()
	}
}

// readHubSnapshot is pull mode's readSnapshot: what the members
// published of ns/name, as planName reads a member in push mode.
func (p *HubPlanner) readHubSnapshot(ns, name string, planned *hubv1alpha1.ServicePlan) snapshot {
	key := ns + "/" + name
	s := snapshot{Namespace: ns, Name: name, Alive: map[string]bool{}, Now: time.Now()}
	exports := map[string]*hubv1alpha1.MemberExport{}
	objs, _ := p.exports.GetIndexer().ByIndex(byPlannedService, key)
	for _, o := range objs {
		if me, ok := o.(*hubv1alpha1.MemberExport); ok && me.Name == pull.MemberExportName(ns, name) {
			exports[me.Namespace] = me
		}
	}
	published := map[string][]*discoveryv1.EndpointSlice{}
	objs, _ = p.slices.GetIndexer().ByIndex(byPlannedService, key)
	for _, o := range objs {
		if sl, ok := o.(*discoveryv1.EndpointSlice); ok {
			published[sl.Namespace] = append(published[sl.Namespace], sl)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := p.memberIDs()
	if p.cfg.ClusterSelection {
		// Read only: memberClusterChanged replaces a member's map whole.
		s.Properties = make(map[string]map[string]string, len(ids))
		for _, id := range ids {
			if props, ok := p.properties[id]; ok {
				s.Properties[id] = props
			}
		}
	}
	for _, id := range ids {
		ms := memberSnapshot{ID: id}
		s.Alive[id] = p.alive[id]
		namespaces, synced := p.namespaces[id]
		ms.Synced = synced
		if !synced {
			s.Members = append(s.Members, ms)
			continue
		}
		ms.Namespace = namespaces[ns]
		if planned != nil && planned.Spec.Import != nil && slices.Contains(planned.Spec.ImportedIn, id) {
			// What the member holds: the last plan it was given.
			ms.ImportClusters = slices.Clone(planned.Spec.Import.Clusters)
		}
		// A Service only the catalog binds is no export.
		if me := exports[id]; me != nil && !me.Spec.CatalogOnly {
			src := pull.Read(me, ownedBy(published[id], me))
			ms.Export, ms.Service, ms.Slices, ms.SlicesChecked = src.Export, src.Service, src.Slices, true
			ms.IngressService, ms.EntryPoints = src.Ingress, p.entryPoints[id]
			if p.cfg.ClusterSelection {
				ms.ClusterSelectors = src.ClusterSelectors
			} else {
				ms.IgnoredSelectors = len(src.ClusterSelectors)
			}
			if ms.Namespace == nil {
				// Published with the export before the MemberCluster
				// caught up.
				ms.Namespace = src.Namespace
			}
			r := endpointRangesOf(p.cfg.MemberPodCIDRs, id, nil, nil)
			ms.EndpointRanges, ms.RangesKnown, ms.RangesSource = r.Prefixes, r.Known, r.Source
		}
		s.Members = append(s.Members, ms)
	}
	for _, m := range s.Members {
		for _, c := range m.ImportClusters {
			if _, ok := s.Alive[c]; !ok {
				s.Alive[c] = false
			}
		}
	}
	return s
}

// ownedBy are the slices of published that me owns: a slice left by an
// earlier export of the name (a different UID) is not read.
func ownedBy(published []*discoveryv1.EndpointSlice, me *hubv1alpha1.MemberExport) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, s := range published {
		if slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == me.UID }) {
			out = append(out, s)
		}
	}
	return out
}

// sync plans key and writes what of the plan differs from what the hub
// holds.
func (p *HubPlanner) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	if wait := p.own.Behind(key); wait > 0 {
		// Its own writes' events bring it back (or the wait ends).
		p.queue.AddAfter(key, wait)
		return nil
	}
	if p.catalog != nil {
		return p.syncCatalog(ctx)
	}
	// The catalog's plans of the name, left by a planner in the
	// catalog's model: the exports plan it now.
	if err := p.removeCatalogPlans(ctx, ns, name); err != nil {
		return err
	}
	planned := p.plannedOf(ns, name)
	s := p.readHubSnapshot(ns, name, planned)
	pl := planName(&p.cfg, s)
	d := pl.Desired
	switch {
	case d.Import != nil && d.Import.Spec.Type == mcsv1beta1.ClusterSetIP:
		ips, err := p.ips.AllocateFor(key, d.Import.Spec.IPFamilies, d.Clusters)
		d.Import.Spec.IPs = ips
		if err != nil {
			d.IPError = err.Error()
		}
	case !d.Retain:
		p.ips.Release(key)
	}
	p.report(ns, name, pl.Reports)
	if d.Retain {
		// A member that may export it is not known: what the members
		// hold of it stays as it is, but for their exports' conditions.
		want := &hubv1alpha1.ServicePlan{
			TypeMeta:   metav1.TypeMeta{APIVersion: hubv1alpha1.SchemeGroupVersion.String(), Kind: "ServicePlan"},
			ObjectMeta: metav1.ObjectMeta{Name: pull.PlanName(ns, name), Namespace: pull.PlanNamespace},
			Spec:       hubv1alpha1.ServicePlanSpec{Service: hubv1alpha1.ServiceName{Namespace: ns, Name: name}, Retain: true},
		}
		if planned != nil {
			want = planned.DeepCopy()
		}
		want.Spec.ExportConditions = plannedConditions(d.ExportConditions)
		if planned == nil && len(want.Spec.ExportConditions) == 0 {
			return nil
		}
		return p.writePlan(ctx, key, want, planned)
	}
	if d.Import == nil && len(d.ExportConditions) == 0 {
		return p.removePlan(ctx, ns, name, planned)
	}
	want, wantSlices := hubPlanOf(ns, name, d)
	if err := p.writePlan(ctx, key, want, planned); err != nil {
		return err
	}
	return p.writePlanSlices(ctx, key, p.planSlicesOf(ns, name, ""), wantSlices)
}

func (p *HubPlanner) plannedOf(ns, name string) *hubv1alpha1.ServicePlan {
	obj, ok, _ := p.plans.GetStore().GetByKey(pull.PlanNamespace + "/" + pull.PlanName(ns, name))
	if !ok {
		return nil
	}
	sp, _ := obj.(*hubv1alpha1.ServicePlan)
	return sp
}

// writePlan makes the hub's ServicePlan want, writing nothing when have
// says the same already; its write is waited for under key.
func (p *HubPlanner) writePlan(ctx context.Context, key string, want, have *hubv1alpha1.ServicePlan) error {
	want.Labels = map[string]string{
		hubv1alpha1.LabelServiceNamespace: want.Spec.Service.Namespace,
		hubv1alpha1.LabelServiceName:      want.Spec.Service.Name,
	}
	if g := want.Spec.GlobalService; g != "" {
		want.Labels[hubv1alpha1.LabelGlobalService] = pull.GlobalServiceDigest(g)
	}
	if have != nil && apiequality.Semantic.DeepEqual(have.Spec, want.Spec) && pull.HasLabels(have.Labels, want.Labels) {
		return nil
	}
	api := p.hubDyn.Resource(hubServicePlans).Namespace(pull.PlanNamespace)
	if have != nil {
		want.ResourceVersion = have.ResourceVersion
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return err
	}
	var stored *unstructured.Unstructured
	if have == nil {
		p.logger.V(2).Info("Planning a name", "service", want.Spec.Service.Namespace+"/"+want.Spec.Service.Name)
		stored, err = api.Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	} else {
		stored, err = api.Update(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
	}
	if err := p.write(resourceServicePlans, err); err != nil {
		return err
	}
	p.own.Wrote(key, resourceServicePlans, stored, p.plans.GetStore())
	return nil
}

// planSlicesOf are the plan's slices of ns/name that place global
// service global there ("": the export model's).
func (p *HubPlanner) planSlicesOf(ns, name, global string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	digest := ""
	if global != "" {
		digest = pull.GlobalServiceDigest(global)
	}
	for _, s := range indexed[*discoveryv1.EndpointSlice](p.planSlices.GetIndexer(), byPlannedService, ns+"/"+name) {
		if s.Labels[hubv1alpha1.LabelGlobalService] == digest {
			out = append(out, s)
		}
	}
	return out
}

// writePlanSlices makes the plan's slices have want; their writes are
// waited for under key.
func (p *HubPlanner) writePlanSlices(ctx context.Context, key string, have, want []*discoveryv1.EndpointSlice) error {
	return pull.ApplySlices(ctx, p.hub.DiscoveryV1().EndpointSlices(pull.PlanNamespace), have, want, planSliceUpToDate,
		func(stored *discoveryv1.EndpointSlice, err error) error {
			if err := p.write(resourceEndpointSlices, err); err != nil {
				return err
			}
			if stored != nil {
				p.own.Wrote(key, resourceEndpointSlices, stored, p.planSlices.GetStore())
			}
			return nil
		}, p.slots)
}

// removePlan takes ns/name's plan away: no member exports it.
func (p *HubPlanner) removePlan(ctx context.Context, ns, name string, planned *hubv1alpha1.ServicePlan) error {
	if err := p.writePlanSlices(ctx, ns+"/"+name, p.planSlicesOf(ns, name, ""), nil); err != nil {
		return err
	}
	return p.deletePlan(ctx, ns+"/"+name, planned)
}

// removeCatalogPlans removes the catalog's plans of ns/name, and their
// slices.
func (p *HubPlanner) removeCatalogPlans(ctx context.Context, ns, name string) error {
	objs, _ := p.plans.GetIndexer().ByIndex(byPlannedService, ns+"/"+name)
	for _, o := range objs {
		sp, ok := o.(*hubv1alpha1.ServicePlan)
		if !ok || sp.Spec.GlobalService == "" {
			continue
		}
		if err := p.writePlanSlices(ctx, ns+"/"+name, p.planSlicesOf(ns, name, sp.Spec.GlobalService), nil); err != nil {
			return err
		}
		if err := p.deletePlan(ctx, ns+"/"+name, sp); err != nil {
			return err
		}
	}
	return nil
}

// deletePlan deletes plan planned (nil: none).
func (p *HubPlanner) deletePlan(ctx context.Context, key string, planned *hubv1alpha1.ServicePlan) error {
	if planned == nil {
		return nil
	}
	p.logger.V(2).Info("Removing a plan", "service", key, "plan", planned.Name)
	return pull.IgnoreNotFound(p.write(resourceServicePlans, p.hubDyn.Resource(hubServicePlans).Namespace(pull.PlanNamespace).Delete(ctx, planned.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &planned.UID}})))
}

// report says once per slice and reason, on the member's MemberExport in
// the hub, what of its endpoints is not planned (outside the ranges the
// operator states, or vouched by nobody while they are unknown).
func (p *HubPlanner) report(ns, name string, reports []sourceReport) {
	for _, r := range reports {
		k := string(r.Slice.UID) + "/" + r.Reason + "/" + fmt.Sprint(r.Dropped)
		p.mu.Lock()
		said := p.reported[k]
		p.reported[k] = true
		p.mu.Unlock()
		if said {
			continue
		}
		p.logger.Info("Not planning endpoints a member published", "cluster", r.Cluster, "service", ns+"/"+name, "slice", r.Slice.Name, "reason", r.Reason, "dropped", r.Dropped, "why", r.Why)
		if p.recorder == nil {
			continue
		}
		obj, ok, _ := p.exports.GetStore().GetByKey(r.Cluster + "/" + pull.MemberExportName(ns, name))
		if me, isExport := obj.(*hubv1alpha1.MemberExport); ok && isExport {
			p.recorder.Eventf(me, nil, v1.EventTypeWarning, r.Reason, "PlanEndpointSlice", "EndpointSlice %s: not planned %v %s", r.Slice.Name, r.Dropped, r.Why)
		}
	}
}

// write counts a write of resource that reached the hub, and returns its
// error.
func (p *HubPlanner) write(resource string, err error) error {
	if err == nil {
		p.writes.Add(1)
		p.metrics.writes.WithLabelValues(resource).Inc()
	}
	return err
}

// planSliceUpToDate says whether the plan's slice have, as the planner
// caches it (digestPlanSlice), already says what want does.
func planSliceUpToDate(have, want *discoveryv1.EndpointSlice) bool {
	digest, ok := have.Annotations[annotationPlanDigest]
	return ok && have.AddressType == want.AddressType && pull.HasLabels(have.Labels, want.Labels) &&
		len(have.Annotations) == len(want.Annotations)+1 && pull.HasLabels(have.Annotations, want.Annotations) &&
		digest == planSliceDigest(want)
}

// annotationPlanDigest, on a plan slice in the planner's cache only,
// stands for its endpoints and ports (planSliceDigest).
const annotationPlanDigest = "planner.hub.multiclusterservices.k8s.io/digest"

// digestPlanSlice is the transform of the planner's cache of the plan's
// slices: their endpoints and ports are replaced by their digest. The
// planner reads them only to compare them with what it plans, and they
// are a third of what it holds (every source's endpoints of every name,
// as the members' published slices are another third).
func digestPlanSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	if _, done := s.Annotations[annotationPlanDigest]; done && s.Endpoints == nil && s.Ports == nil {
		// A transform may see an object again (client-go's contract):
		// this one is digested already.
		return s, nil
	}
	annotations := make(map[string]string, len(s.Annotations)+1)
	maps.Copy(annotations, s.Annotations)
	annotations[annotationPlanDigest] = planSliceDigest(s)
	s.Annotations, s.Endpoints, s.Ports, s.ManagedFields = annotations, nil, nil, nil
	return s, nil
}

// planSliceDigest is a digest of s's endpoints and ports, the same for
// an empty list and none, as the apiserver keeps them.
func planSliceDigest(s *discoveryv1.EndpointSlice) string {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(struct {
		Endpoints []discoveryv1.Endpoint     `json:"e,omitempty"`
		Ports     []discoveryv1.EndpointPort `json:"p,omitempty"`
	}{s.Endpoints, s.Ports})
	return hex.EncodeToString(h.Sum(nil))
}

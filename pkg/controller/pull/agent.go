package pull

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The member agent's publishing half (docs/architecture.md, "Pull mode"):
// level-triggered, one key per exported namespace/name. It reads its own
// cluster with its own credentials, and writes into its hub namespace
// only what differs from what is published there, so that a restart
// writes nothing that is already right.

var (
	serviceExports = mcsv1beta1.SchemeGroupVersion.WithResource("serviceexports")
	serviceImports = mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports")
	memberExports  = hubv1alpha1.SchemeGroupVersion.WithResource("memberexports")
	memberClusters = hubv1alpha1.SchemeGroupVersion.WithResource("memberclusters")
)

// memberClusterKey is the queue's key of the member's MemberCluster: no
// namespace/name key is without a slash.
const memberClusterKey = "member"

// The resources the agent writes in the hub, as OwnWrites names them.
const (
	resourceMemberExports  = "memberexports"
	resourceMemberClusters = "memberclusters"
	resourceEndpointSlices = "endpointslices"
)

// CacheWait bounds how long a writer waits for its cache to show its
// own last write before it writes again from that cache (OwnWrites): a
// watch delivers its event in milliseconds, seconds when the apiserver is
// loaded; past that the cache is not trusted to catch up by itself (its
// watch is broken, or the event was missed), and the write goes ahead
// from what the cache holds. The agent, the planner and push mode's
// member writers wait the same.
const CacheWait = 10 * time.Second

// AgentLeaseName is the Lease a member's agent renews in its hub
// namespace: the member's liveness, which the planner reads (one Lease
// per member, renewed by the member: members per period, not members²).
const AgentLeaseName = "member-agent"

// AgentLeaseAlive says whether an agent's Lease l was renewed within the
// planner's endpoint TTL at now: the rule the planner withdraws a member
// by, which kubectl mcs reports.
func AgentLeaseAlive(l *coordinationv1.Lease, ttl time.Duration, now time.Time) bool {
	return l != nil && l.Spec.RenewTime != nil && now.Sub(l.Spec.RenewTime.Time) < ttl
}

// DefaultLeaseRenewal is how often an agent renews its Lease in the hub.
const DefaultLeaseRenewal = 10 * time.Second

// AgentConfig is what a member agent publishes with.
type AgentConfig struct {
	// ClusterID is the member's cluster ID: its hub namespace.
	ClusterID string
	// Member and MemberDynamic are the agent's clients of its own
	// cluster; Hub and HubDynamic its hub identity's.
	Member        kubernetes.Interface
	MemberDynamic dynamic.Interface
	Hub           kubernetes.Interface
	HubDynamic    dynamic.Interface
	// SourceManagers are the endpointslice.kubernetes.io/managed-by
	// values whose slices are published (export.CheckSource), as the
	// mcs-controller's --source-endpointslice-managers.
	SourceManagers []string
	// Recorder writes events into the member: a slice not published, on
	// its export.
	Recorder events.EventRecorder
	// Resync is how often the informers resync (0: never).
	Resync time.Duration
	// LeaseRenewal is how often the agent renews its Lease in the hub
	// (0: DefaultLeaseRenewal); the planner's endpoint TTL must be
	// several of it.
	LeaseRenewal time.Duration
	// MemberReady asks this cluster's apiserver whether it is ready
	// (nil: its /readyz through Member); the Lease is renewed only while
	// it answers.
	MemberReady func(context.Context) error
	// ManagedBy is the manager the agent's writing half writes imports
	// as; Derived, whether it serves this cluster in derived mode. The
	// MemberCluster says which of the catalog's imports the cluster
	// holds, and whether their IPs are its own.
	ManagedBy string
	Derived   bool
}

// Agent publishes a member's exports into its hub namespace.
type Agent struct {
	cfg    AgentConfig
	logger klog.Logger
	queue  workqueue.TypedRateLimitingInterface[string]

	memberInformers informers.SharedInformerFactory
	memberSlices    informers.SharedInformerFactory
	exportInformer  cache.SharedIndexInformer
	// properties are this cluster's ClusterProperties, published in its
	// MemberCluster for cluster selection.
	properties cache.SharedIndexInformer
	// imports are this cluster's ServiceImports: those the catalog
	// placed are published in its MemberCluster.
	imports         cache.SharedIndexInformer
	hubInformers    informers.SharedInformerFactory
	hubDynamic      dynamicinformer.DynamicSharedInformerFactory
	published       cache.SharedIndexInformer
	publishedSlices discoverylisters.EndpointSliceLister
	publishedMember cache.SharedIndexInformer

	// initial are the exports the cluster had when the agent started whose
	// publication has not been tried yet; until none is left, a member
	// never published (no MemberCluster on the hub) is not published as
	// a member (holdMemberCluster).
	initialMu sync.Mutex
	initial   map[string]bool
	// own are the agent's writes into the hub its informers have not
	// shown yet, by the key they were synced for.
	own *OwnWrites
	// reported are the slice refusals already said, by slice UID and
	// reason.
	reportedMu sync.Mutex
	reported   map[string]bool
	writes     atomic.Int64
	renewals   atomic.Int64
	// ready is closed once the agent's caches (this cluster's, the hub's)
	// have synced and it publishes.
	ready chan struct{}
	// hubEvents watches the events of the member's hub namespace about
	// its MemberExports; started is when the agent started, before which
	// an event was relayed by the agent that ran then.
	hubEvents informers.SharedInformerFactory
	started   time.Time
}

// NewAgent returns the publishing half of clusterID's agent.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	if err := CheckClusterID(cfg.ClusterID); err != nil {
		return nil, err
	}
	if len(cfg.SourceManagers) == 0 {
		return nil, fmt.Errorf("no source EndpointSlice managers: no slice would be published")
	}
	a := &Agent{
		cfg:      cfg,
		logger:   klog.Background().WithName("member-agent").WithValues("cluster", cfg.ClusterID),
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "member-agent"}),
		reported: map[string]bool{},
		ready:    make(chan struct{}),
		own:      NewOwnWrites(CacheWait),
	}
	hasServiceName, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	a.memberInformers = informers.NewSharedInformerFactory(cfg.Member, cfg.Resync)
	// Only the slices of Services (a factory of their own: its selector
	// reaches every informer of a factory).
	a.memberSlices = informers.NewSharedInformerFactoryWithOptions(cfg.Member, cfg.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.NewSelector().Add(*hasServiceName).String()
		}))
	a.exportInformer = dynamicinformer.NewFilteredDynamicInformer(cfg.MemberDynamic, serviceExports, metav1.NamespaceAll, cfg.Resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	a.properties = dynamicinformer.NewFilteredDynamicInformer(cfg.MemberDynamic, aboutv1alpha1.Resource, metav1.NamespaceAll, cfg.Resync, cache.Indexers{}, nil).Informer()
	a.imports = dynamicinformer.NewFilteredDynamicInformer(cfg.MemberDynamic, serviceImports, metav1.NamespaceAll, cfg.Resync, cache.Indexers{}, nil).Informer()
	a.hubInformers = informers.NewSharedInformerFactoryWithOptions(cfg.Hub, cfg.Resync, informers.WithNamespace(cfg.ClusterID),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: AgentManager}).String()
		}))
	a.hubDynamic = dynamicinformer.NewFilteredDynamicSharedInformerFactory(cfg.HubDynamic, cfg.Resync, cfg.ClusterID, nil)
	a.published = a.hubDynamic.ForResource(memberExports).Informer()
	a.publishedMember = a.hubDynamic.ForResource(memberClusters).Informer()
	a.publishedSlices = a.hubInformers.Discovery().V1().EndpointSlices().Lister()
	// The planner's events about this member's MemberExports, said again
	// on the member's ServiceExports (relayEvent).
	a.hubEvents = informers.NewSharedInformerFactoryWithOptions(cfg.Hub, cfg.Resync, informers.WithNamespace(cfg.ClusterID),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("involvedObject.kind", "MemberExport").String()
		}))
	if _, err := a.hubEvents.Core().V1().Events().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: a.relayEvent}); err != nil {
		return nil, err
	}

	byKey := func(key func(obj any) (string, bool)) cache.ResourceEventHandler {
		enqueue := func(obj any) {
			if k, ok := key(obj); ok {
				a.queue.Add(k)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}
	}
	ownKey := func(obj any) (string, bool) {
		k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		return k, err == nil
	}
	sliceKey := func(obj any) (string, bool) {
		s := ObjectOf[*discoveryv1.EndpointSlice](obj)
		if s == nil || s.Labels[discoveryv1.LabelServiceName] == "" {
			return "", false
		}
		return s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName], true
	}
	publishedKey := func(obj any) (string, bool) {
		o := ObjectOf[metav1.Object](obj)
		if o == nil {
			return "", false
		}
		ns, name := o.GetLabels()[hubv1alpha1.LabelServiceNamespace], o.GetLabels()[hubv1alpha1.LabelServiceName]
		return ns + "/" + name, ns != "" && name != ""
	}
	// A namespace's creation time is published with each export in it,
	// and every namespace in the MemberCluster.
	onNamespace := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			a.enqueueNamespace(obj)
			a.queue.Add(memberClusterKey)
		},
		UpdateFunc: func(_, obj any) { a.queue.Add(memberClusterKey) },
		DeleteFunc: func(obj any) { a.queue.Add(memberClusterKey) },
	}
	always := func(key string) cache.ResourceEventHandler {
		return byKey(func(any) (string, bool) { return key, true })
	}
	// A Service is published with the export of its name, and, under an
	// ingress name, with the export it is the ingress of.
	onService := cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueueService,
		UpdateFunc: func(_, obj any) { a.enqueueService(obj) },
		DeleteFunc: a.enqueueService,
	}
	// The catalog's imports are published in the MemberCluster; others
	// are not read.
	catalogImport := func(obj any) bool {
		o := ObjectOf[metav1.Object](obj)
		return o != nil && o.GetAnnotations()[catalog.AnnotationGlobalService] != ""
	}
	onCatalogImport := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if catalogImport(obj) {
				a.queue.Add(memberClusterKey)
			}
		},
		UpdateFunc: func(old, obj any) {
			if catalogImport(old) || catalogImport(obj) {
				a.queue.Add(memberClusterKey)
			}
		},
		DeleteFunc: func(obj any) {
			if catalogImport(obj) {
				a.queue.Add(memberClusterKey)
			}
		},
	}
	// The MemberCluster's status is the planner's: the Services the
	// catalog binds, each published whether exported or not.
	onMemberCluster := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			a.queue.Add(memberClusterKey)
			a.boundChanged(nil, obj)
		},
		UpdateFunc: func(old, obj any) {
			a.queue.Add(memberClusterKey)
			a.boundChanged(old, obj)
		},
		DeleteFunc: func(obj any) {
			a.queue.Add(memberClusterKey)
			a.boundChanged(obj, nil)
		},
	}
	// A node that becomes an entry point, or stops being one, changes
	// the MemberCluster's entry points.
	onNode := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { a.queue.Add(memberClusterKey) },
		UpdateFunc: func(old, obj any) {
			o, n := ObjectOf[*v1.Node](old), ObjectOf[*v1.Node](obj)
			if o == nil || n == nil || !slices.Equal(export.EntryPoints([]*v1.Node{o}), export.EntryPoints([]*v1.Node{n})) {
				a.queue.Add(memberClusterKey)
			}
		},
		DeleteFunc: func(any) { a.queue.Add(memberClusterKey) },
	}
	// ownSeen passes an event of what the agent writes in the hub to h,
	// once it has ended any wait for that write (OwnWrites).
	ownSeen := func(resource string, h cache.ResourceEventHandler) cache.ResourceEventHandler {
		seen := func(obj any, deleted bool) {
			if o := ObjectOf[metav1.Object](obj); o != nil {
				a.own.Seen(resource, o, deleted)
			}
		}
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { seen(obj, false); h.OnAdd(obj, false) },
			UpdateFunc: func(old, obj any) { seen(obj, false); h.OnUpdate(old, obj) },
			DeleteFunc: func(obj any) { seen(obj, true); h.OnDelete(obj) },
		}
	}
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{a.exportInformer, byKey(ownKey)},
		{a.memberInformers.Core().V1().Services().Informer(), onService},
		{a.memberInformers.Core().V1().Nodes().Informer(), onNode},
		{a.memberSlices.Discovery().V1().EndpointSlices().Informer(), byKey(sliceKey)},
		{a.memberInformers.Core().V1().Namespaces().Informer(), onNamespace},
		{a.properties, always(memberClusterKey)},
		{a.memberInformers.Networking().V1().ServiceCIDRs().Informer(), always(memberClusterKey)},
		{a.imports, onCatalogImport},
		{a.published, ownSeen(resourceMemberExports, byKey(publishedKey))},
		{a.publishedMember, ownSeen(resourceMemberClusters, onMemberCluster)},
		{a.hubInformers.Discovery().V1().EndpointSlices().Informer(), ownSeen(resourceEndpointSlices, byKey(publishedKey))},
	} {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Writes is how many writes the agent has made into the hub, its Lease's
// renewals aside (Renewals).
func (a *Agent) Writes() int64 { return a.writes.Load() }

// Renewals is how many times the agent has renewed its Lease in the hub.
func (a *Agent) Renewals() int64 { return a.renewals.Load() }

// Ready is closed once the agent publishes (its caches synced).
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Run publishes until ctx is done.
func (a *Agent) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer a.queue.ShutDown()
	a.memberInformers.Start(ctx.Done())
	a.memberSlices.Start(ctx.Done())
	a.hubInformers.Start(ctx.Done())
	a.hubDynamic.Start(ctx.Done())
	a.started = time.Now()
	go a.exportInformer.Run(ctx.Done())
	go a.properties.Run(ctx.Done())
	go a.imports.Run(ctx.Done())
	if !cache.WaitForNamedCacheSync("member-agent", ctx.Done(),
		a.exportInformer.HasSynced, a.properties.HasSynced, a.imports.HasSynced, a.published.HasSynced, a.publishedMember.HasSynced,
		a.memberInformers.Networking().V1().ServiceCIDRs().Informer().HasSynced,
		a.memberInformers.Core().V1().Services().Informer().HasSynced,
		a.memberInformers.Core().V1().Namespaces().Informer().HasSynced,
		a.memberInformers.Core().V1().Nodes().Informer().HasSynced,
		a.memberSlices.Discovery().V1().EndpointSlices().Informer().HasSynced,
		a.hubInformers.Discovery().V1().EndpointSlices().Informer().HasSynced) {
		return ctx.Err()
	}
	a.logger.Info("Publishing into the hub", "namespace", a.cfg.ClusterID)
	// Events are relayed once the exports are known; none is waited for.
	a.hubEvents.Start(ctx.Done())
	a.holdMemberCluster()
	close(a.ready)
	a.queue.Add(memberClusterKey)
	go a.renewLease(ctx)
	for range workers {
		go wait.UntilWithContext(ctx, a.worker, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (a *Agent) worker(ctx context.Context) {
	for {
		key, quit := a.queue.Get()
		if quit {
			return
		}
		if err := a.sync(ctx, key); err != nil {
			a.logger.Error(err, "Publishing into the hub", "key", key)
			a.queue.AddRateLimited(key)
		} else {
			a.queue.Forget(key)
		}
		a.queue.Done(key)
	}
}

func (a *Agent) enqueueNamespace(obj any) {
	ns := ObjectOf[*v1.Namespace](obj)
	if ns == nil {
		return
	}
	exports, _ := a.exportInformer.GetIndexer().ByIndex(cache.NamespaceIndex, ns.Name)
	for _, e := range exports {
		if k, err := cache.MetaNamespaceKeyFunc(e); err == nil {
			a.queue.Add(k)
		}
	}
}

// enqueueService syncs the export of a Service's name and, when the
// Service has an ingress name (which its labels may not say: a Service
// of that name someone else made is published too, and the planner does
// not use it), the export in its namespace whose ingress name it is.
func (a *Agent) enqueueService(obj any) {
	svc := ObjectOf[*v1.Service](obj)
	if svc == nil {
		return
	}
	a.queue.Add(svc.Namespace + "/" + svc.Name)
	if !strings.HasPrefix(svc.Name, "ingress-") {
		return
	}
	exports, _ := a.exportInformer.GetIndexer().ByIndex(cache.NamespaceIndex, svc.Namespace)
	for _, e := range exports {
		if o, ok := e.(metav1.Object); ok && export.IngressName(o.GetNamespace(), o.GetName()) == svc.Name {
			a.queue.Add(o.GetNamespace() + "/" + o.GetName())
		}
	}
}

// boundChanged enqueues the Services whose binding by the catalog
// changed between MemberClusters old and cur (either nil).
func (a *Agent) boundChanged(old, cur any) {
	before, after := boundOf(old), boundOf(cur)
	for k := range before {
		if !after[k] {
			a.queue.Add(k)
		}
	}
	for k := range after {
		if !before[k] {
			a.queue.Add(k)
		}
	}
}

// boundOf are the Services the MemberCluster obj says the catalog binds,
// as namespace/name.
func boundOf(obj any) map[string]bool {
	out := map[string]bool{}
	u := ObjectOf[*unstructured.Unstructured](obj)
	if u == nil {
		return out
	}
	mc := &hubv1alpha1.MemberCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, mc); err != nil {
		return out
	}
	for _, s := range mc.Status.BoundServices {
		out[s.Namespace+"/"+s.Name] = true
	}
	return out
}

// bound says whether the catalog binds Service ns/name of this cluster.
func (a *Agent) bound(ns, name string) bool {
	obj, ok, _ := a.publishedMember.GetStore().GetByKey(a.cfg.ClusterID + "/" + hubv1alpha1.MemberClusterName)
	return ok && boundOf(obj)[ns+"/"+name]
}

// source reads what the member holds of ns/name.
func (a *Agent) source(ns, name string) (Source, error) {
	src := Source{Bound: a.bound(ns, name)}
	obj, ok, err := a.exportInformer.GetStore().GetByKey(ns + "/" + name)
	if err != nil {
		return src, err
	}
	if ok {
		u := obj.(*unstructured.Unstructured)
		se, sel := &mcsv1beta1.ServiceExport{}, &csv1beta1.ServiceExport{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, se); err != nil {
			return src, fmt.Errorf("ServiceExport %s/%s: %w", ns, name, err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sel); err != nil {
			return src, fmt.Errorf("ServiceExport %s/%s's clusterSelectors: %w", ns, name, err)
		}
		src.Export, src.ClusterSelectors = se, sel.Spec.ClusterSelectors
	}
	if n, err := a.memberInformers.Core().V1().Namespaces().Lister().Get(ns); err == nil {
		src.Namespace = n
	}
	services := a.memberInformers.Core().V1().Services().Lister().Services(ns)
	svc, err := services.Get(name)
	switch {
	case err == nil:
		src.Service = svc
	case !apierrors.IsNotFound(err):
		return src, err
	}
	in, err := services.Get(export.IngressName(ns, name))
	switch {
	case err == nil:
		src.Ingress = in
	case !apierrors.IsNotFound(err):
		return src, err
	}
	src.Slices, err = a.memberSlices.Discovery().V1().EndpointSlices().Lister().EndpointSlices(ns).List(
		labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
	return src, err
}

// holdMemberCluster: a member whose MemberCluster is not on the hub yet
// publishes it only once every export its cluster has now was published
// (or tried) once. The MemberCluster is what makes the planner count a
// member in, as push mode counts one once its caches synced: a planner
// that starts beside its agents then plans each name once, with every
// member's exports, not again as each member's arrive. A restarted agent
// finds its MemberCluster there and holds nothing.
func (a *Agent) holdMemberCluster() {
	if _, ok, _ := a.publishedMember.GetStore().GetByKey(a.cfg.ClusterID + "/" + hubv1alpha1.MemberClusterName); ok {
		return
	}
	initial := map[string]bool{}
	for _, k := range a.exportInformer.GetStore().ListKeys() {
		initial[k] = true
	}
	if len(initial) == 0 {
		return
	}
	a.initialMu.Lock()
	a.initial = initial
	a.initialMu.Unlock()
}

// tried records a first try at publishing key; the last one of those
// the MemberCluster waited for publishes it.
func (a *Agent) tried(key string) {
	a.initialMu.Lock()
	defer a.initialMu.Unlock()
	if a.initial == nil || !a.initial[key] {
		return
	}
	delete(a.initial, key)
	if len(a.initial) == 0 {
		a.initial = nil
		a.queue.Add(memberClusterKey)
	}
}

// holding says whether the MemberCluster waits for the first tries.
func (a *Agent) holding() bool {
	a.initialMu.Lock()
	defer a.initialMu.Unlock()
	return a.initial != nil
}

// sync publishes what the member holds of key, writing only what differs.
func (a *Agent) sync(ctx context.Context, key string) error {
	if wait := a.own.Behind(key); wait > 0 {
		// Synced from a cache that does not show its last writes yet, it
		// would create again what it has just created: their events
		// bring it back (or the wait ends).
		a.queue.AddAfter(key, wait)
		return nil
	}
	if key == memberClusterKey {
		if a.holding() {
			// tried enqueues it again.
			return nil
		}
		return a.syncMemberCluster(ctx)
	}
	defer a.tried(key)
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	src, err := a.source(ns, name)
	if err != nil {
		return err
	}
	want := PublishExport(src)
	have, err := a.publishedExport(ns, name)
	if err != nil {
		return err
	}
	if want == nil {
		if err := a.syncSlices(ctx, ns, name, nil); err != nil {
			return err
		}
		if have != nil {
			a.logger.V(2).Info("Unpublishing an export", "service", key)
			return IgnoreNotFound(a.write(a.memberExports().Delete(ctx, have.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &have.UID}})))
		}
		return nil
	}
	switch {
	case have == nil:
		a.logger.V(2).Info("Publishing an export", "service", key)
		if have, err = a.putExport(ctx, want, ""); err != nil {
			return err
		}
	case !exportUpToDate(have, want):
		if have, err = a.putExport(ctx, want, have.ResourceVersion); err != nil {
			return err
		}
	}
	published, refused := PublishSlices(src, have, a.cfg.SourceManagers)
	a.report(src.Export, refused)
	return a.syncSlices(ctx, ns, name, published)
}

// syncMemberCluster publishes the member's namespaces and properties,
// writing only when they differ from what the hub holds.
func (a *Agent) syncMemberCluster(ctx context.Context) error {
	namespaces, err := a.memberInformers.Core().V1().Namespaces().Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	properties := map[string]string{}
	for _, obj := range a.properties.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if value, found, _ := unstructured.NestedString(u.Object, "spec", "value"); found {
			properties[u.GetName()] = value
		}
	}
	nodes, err := a.memberInformers.Core().V1().Nodes().Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	serviceCIDRs, err := a.memberInformers.Networking().V1().ServiceCIDRs().Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	var imports []*mcsv1beta1.ServiceImport
	for _, obj := range a.imports.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetAnnotations()[catalog.AnnotationGlobalService] == "" {
			continue
		}
		si := &mcsv1beta1.ServiceImport{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, si); err == nil {
			imports = append(imports, si)
		}
	}
	want := PublishMemberCluster(Member{
		Namespaces: namespaces, Properties: properties, Nodes: nodes, ServiceCIDRs: serviceCIDRs,
		Derived: a.cfg.Derived, Imports: imports, ManagedBy: a.cfg.ManagedBy,
	})
	api := a.cfg.HubDynamic.Resource(memberClusters).Namespace(a.cfg.ClusterID)
	obj, ok, err := a.publishedMember.GetStore().GetByKey(a.cfg.ClusterID + "/" + hubv1alpha1.MemberClusterName)
	if err != nil {
		return err
	}
	if ok {
		have := &hubv1alpha1.MemberCluster{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, have); err == nil &&
			apiequality.Semantic.DeepEqual(have.Spec, want.Spec) {
			return nil
		}
		want.ResourceVersion = obj.(*unstructured.Unstructured).GetResourceVersion()
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return err
	}
	var stored *unstructured.Unstructured
	if ok {
		stored, err = api.Update(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
	} else {
		stored, err = api.Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	}
	if err := a.write(err); err != nil {
		return err
	}
	a.own.Wrote(memberClusterKey, resourceMemberClusters, stored, a.publishedMember.GetStore())
	return nil
}

// renewLease renews the member's Lease in the hub until ctx is done,
// while this cluster's apiserver answers its /readyz: the Lease vouches
// that what the member published is its cluster's current state, which
// an agent cut off from its own cluster cannot say. So a member whose
// API is down expires at the others after the planner's endpoint TTL, as
// push mode's controller withdraws a member whose /readyz it cannot
// reach. A renewal that fails is retried at the next period: the planner
// finds the member expired only after its endpoint TTL, several periods.
func (a *Agent) renewLease(ctx context.Context) {
	period := a.cfg.LeaseRenewal
	if period <= 0 {
		period = DefaultLeaseRenewal
	}
	leases := a.cfg.Hub.CoordinationV1().Leases(a.cfg.ClusterID)
	reachable := true
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		pctx, cancel := context.WithTimeout(ctx, period)
		err := a.memberReady(pctx)
		cancel()
		if err != nil {
			if reachable && ctx.Err() == nil {
				a.logger.Error(err, "This cluster's API does not answer: not renewing the member's Lease in the hub, so that its endpoints expire at the others after their TTL", "lease", AgentLeaseName)
			}
			reachable = false
			return
		}
		if !reachable {
			a.logger.Info("This cluster's API answers again: renewing the member's Lease in the hub", "lease", AgentLeaseName)
		}
		reachable = true
		now := metav1.NewMicroTime(time.Now())
		lease, err := leases.Get(ctx, AgentLeaseName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: AgentLeaseName},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: &a.cfg.ClusterID, LeaseDurationSeconds: ptr.To(int32(math.Ceil(period.Seconds()))),
					AcquireTime: &now, RenewTime: &now,
				},
			}, metav1.CreateOptions{})
		case err == nil:
			lease.Spec.RenewTime = &now
			lease.Spec.HolderIdentity = &a.cfg.ClusterID
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err != nil {
			if ctx.Err() == nil {
				a.logger.Error(err, "Renewing the member's Lease in the hub", "lease", AgentLeaseName)
			}
			return
		}
		a.renewals.Add(1)
	}, period)
}

// relayEvent says again, on the member's ServiceExport, an event the
// planner gave the export's MemberExport in the hub (endpoints it did not
// plan, and why): the member's users see their export, not the hub.
// Events from before the agent started were relayed by the agent that ran
// then; an event without a ServiceExport (unexported since) is dropped.
func (a *Agent) relayEvent(obj any) {
	e, ok := obj.(*v1.Event)
	if !ok || a.cfg.Recorder == nil || e.CreationTimestamp.Time.Before(a.started.Add(-time.Second)) {
		return
	}
	ns, name, ok := strings.Cut(e.InvolvedObject.Name, ".")
	if !ok {
		return
	}
	u, exists, err := a.exportInformer.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !exists {
		return
	}
	se, ok := u.(*unstructured.Unstructured)
	if !ok {
		return
	}
	action := e.Action
	if action == "" {
		action = "Plan"
	}
	a.cfg.Recorder.Eventf(se, nil, e.Type, e.Reason, action, "%s", e.Message)
}

// memberReady asks this cluster's apiserver whether it is ready.
func (a *Agent) memberReady(ctx context.Context) error {
	if a.cfg.MemberReady != nil {
		return a.cfg.MemberReady(ctx)
	}
	_, err := a.cfg.Member.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

// putExport creates want, or updates it from resourceVersion.
func (a *Agent) putExport(ctx context.Context, want *hubv1alpha1.MemberExport, resourceVersion string) (*hubv1alpha1.MemberExport, error) {
	want.ResourceVersion = resourceVersion
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return nil, err
	}
	var out *unstructured.Unstructured
	if resourceVersion == "" {
		out, err = a.memberExports().Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	} else {
		out, err = a.memberExports().Update(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
	}
	if err := a.write(err); err != nil {
		return nil, err
	}
	a.own.Wrote(want.Spec.Service.Namespace+"/"+want.Spec.Service.Name, resourceMemberExports, out, a.published.GetStore())
	return memberExportOf(out)
}

// syncSlices makes the slices published of ns/name want.
func (a *Agent) syncSlices(ctx context.Context, ns, name string, want []*discoveryv1.EndpointSlice) error {
	have, err := a.publishedSlices.EndpointSlices(a.cfg.ClusterID).List(labels.SelectorFromSet(publishedLabels(ns, name)))
	if err != nil {
		return err
	}
	store := a.hubInformers.Discovery().V1().EndpointSlices().Informer().GetStore()
	return ApplySlices(ctx, a.cfg.Hub.DiscoveryV1().EndpointSlices(a.cfg.ClusterID), have, want, sliceUpToDate,
		func(stored *discoveryv1.EndpointSlice, err error) error {
			if err := a.write(err); err != nil {
				return err
			}
			if stored != nil {
				a.own.Wrote(ns+"/"+name, resourceEndpointSlices, stored, store)
			}
			return nil
		}, nil)
}

// report says once per slice and reason, on the member's export, why a
// slice of the exported Service is not published.
func (a *Agent) report(se *mcsv1beta1.ServiceExport, refused []Refusal) {
	for _, r := range refused {
		key := string(r.Slice.UID) + "/" + string(r.Reason)
		a.reportedMu.Lock()
		said := a.reported[key]
		a.reported[key] = true
		a.reportedMu.Unlock()
		if said {
			continue
		}
		a.logger.Info("Not publishing an EndpointSlice of an exported Service", "endpointSlice", klog.KObj(r.Slice), "reason", r.Reason, "why", r.Why)
		if a.cfg.Recorder != nil && se != nil {
			a.cfg.Recorder.Eventf(se, r.Slice, v1.EventTypeWarning, string(r.Reason), "PublishEndpointSlice", "EndpointSlice %s is not exported: %s", r.Slice.Name, r.Why)
		}
	}
}

func (a *Agent) publishedExport(ns, name string) (*hubv1alpha1.MemberExport, error) {
	obj, ok, err := a.published.GetStore().GetByKey(a.cfg.ClusterID + "/" + MemberExportName(ns, name))
	if err != nil || !ok {
		return nil, err
	}
	return memberExportOf(obj.(*unstructured.Unstructured))
}

func (a *Agent) memberExports() dynamic.ResourceInterface {
	return a.cfg.HubDynamic.Resource(memberExports).Namespace(a.cfg.ClusterID)
}

// write counts a write that reached the hub, and returns its error.
func (a *Agent) write(err error) error {
	if err == nil {
		a.writes.Add(1)
	}
	return err
}

func memberExportOf(u *unstructured.Unstructured) (*hubv1alpha1.MemberExport, error) {
	me := &hubv1alpha1.MemberExport{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, me); err != nil {
		return nil, fmt.Errorf("MemberExport %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return me, nil
}

package mcs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/clustersetip"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// Config configures a Controller.
type Config struct {
	Members []topology.Member
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the
	// slices written, and marks the imports written.
	ManagedBy string
	// ClusterSetIPRanges are the ranges clusterset IPs come from.
	ClusterSetIPRanges []netip.Prefix
	// RefusedNamespaces are namespaces whose exports are refused.
	RefusedNamespaces []string
	// ExportNamespaces lists, per cluster ID, the only namespaces that
	// cluster may export from; a cluster not listed may export from any
	// namespace not refused. A team that owns one member should not be
	// able to publish endpoints under every other team's names.
	ExportNamespaces map[string][]string
	// SourceManagers are the endpointslice.kubernetes.io/managed-by values
	// of the exported Services' slices that are mirrored. Anyone who may
	// write an EndpointSlice in an exporting namespace could otherwise
	// publish any address to every member under the Service's name.
	SourceManagers []string
	// MemberPodCIDRs are, per cluster ID, the ranges the member's pods
	// get their IPs from, for network plugins that allocate them without
	// writing the nodes' spec.podCIDRs: a member's endpoints are mirrored
	// only within these, its nodes' pod CIDRs and its nodes' addresses.
	// Where neither is known, only what the EndpointSlice controller
	// wrote for Pods is mirrored (member.endpointRanges).
	MemberPodCIDRs map[string][]netip.Prefix
	// EndpointTTL is how long a source cluster's endpoints outlive the
	// last time its API was reached.
	EndpointTTL time.Duration
	// LeaseNamespace holds the per-source-cluster Leases in every member.
	LeaseNamespace string
	// Identity is written as the holder of those Leases.
	Identity string
	// Workers is the number of workers per queue.
	Workers int
	// DerivedMembers are the cluster IDs of the members served in derived
	// mode: each import is represented there by an ordinary Service that
	// any Service proxy programs (members whose proxies do not program
	// ServiceImports). The others are served natively.
	DerivedMembers map[string]bool
	// DerivedGrace is how long a derived Service keeps serving after its
	// member switched to native mode, for clients that still hold its
	// IPs from earlier DNS answers.
	DerivedGrace time.Duration
	// IngressMembers are the cluster IDs of the members whose pods the
	// other members cannot reach, nor they the others' (private or
	// overlapping pod networks): between such a member and any other,
	// traffic goes through the exporting cluster's ingress.
	IngressMembers map[string]bool
	// IngressServiceType is the type of the ingress Services created for
	// exports of ClusterIP Services: NodePort (the default) or
	// LoadBalancer.
	IngressServiceType v1.ServiceType
	// Catalog, when set, serves the service catalog of the hub instead of
	// ServiceExports (namespace sameness): see catalog.go.
	Catalog *CatalogConfig
	// InitialSyncTimeout bounds how long start-up waits for every member's
	// caches before working with the members that did sync.
	InitialSyncTimeout time.Duration
	// ClusterSelection is the MultiClusterServiceClusterSelection gate:
	// resolve exports' clusterSelectors (KEP-5939) into the imports (see
	// clusterselection.go). Off, those fields are neither read nor written.
	ClusterSelection bool
	// ClusterProperties returns a member's merged cluster properties (its
	// ClusterProfile's and its own, inventory.MergeProperties), read when
	// its ClusterProperties change; nil uses its own only.
	ClusterProperties func(ctx context.Context, clusterID string) (map[string]string, error)
}

// Controller is the mcs-controller.
type Controller struct {
	cfg Config

	// membersMu guards the member set, which changes at run time as
	// members join and leave (Join, Leave). Readers take a snapshot.
	membersMu sync.RWMutex
	members   []*member
	byID      map[string]*member
	// runCtx is Run's context once its workers run: members joining
	// after that are served under it.
	runCtx context.Context

	// queue holds the names whose exports must be merged again.
	queue workqueue.TypedRateLimitingInterface[string]
	vips  *clustersetip.Allocator
	ttl   *sourceLeases

	mu      sync.RWMutex
	desired map[string]*desiredState

	metrics *Metrics
	ready   chan struct{}
	// catalog is the hub's catalog in catalog mode, nil otherwise.
	catalog *catalogState
	// logger is for what happens outside a request's context (event
	// handlers, reports): Run's logger once it runs.
	logger klog.Logger
	// told holds what was reported once and must not be again: slices not
	// mirrored, addresses outside pod ranges, users' Services that native
	// names reach.
	told sync.Map
	// retiring holds, per member/import, since when a derived Service has
	// been left over in a member now served natively.
	retiring sync.Map
	// switching holds, per member/import, since when a derived import
	// has announced its clusterset IPs to the proxies of a member being
	// switched to native mode.
	switching sync.Map
}

// managedLabel marks the ServiceImports this controller owns, so that
// imports written by anyone else are never touched; proxies program only
// imports whose label names a trusted manager.
const managedLabel = mcsproxy.LabelImportManagedBy

// wrote tells whether this controller wrote o (an import, or a Service it
// created for native names): the only objects it changes or deletes.
func (c *Controller) wrote(o metav1.Object) bool {
	return o.GetLabels()[managedLabel] == c.cfg.ManagedBy
}

// fieldManager names the controller's writes of imported EndpointSlices in
// their managedFields, whatever its user agent, so that a slice someone
// else wrote can be told from its own.
const fieldManager = "mcs-controller"

// New builds a controller; it starts nothing.
func New(cfg Config, metrics *Metrics) (*Controller, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	var members []*member
	for _, tm := range cfg.Members {
		m, err := newMember(tm, cfg.ManagedBy, newRecorder)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", tm.ClusterID, err)
		}
		members = append(members, m)
	}
	return newController(cfg, metrics, members), nil
}

// newController builds a controller over members already built.
func newController(cfg Config, metrics *Metrics, members []*member) *Controller {
	c := &Controller{
		cfg:     cfg,
		byID:    map[string]*member{},
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "clusterset"}),
		vips:    clustersetip.New(cfg.ClusterSetIPRanges),
		desired: map[string]*desiredState{},
		metrics: metrics,
		ready:   make(chan struct{}),
		logger:  klog.Background(),
	}
	for _, m := range members {
		c.members = append(c.members, m)
		c.byID[m.id] = m
	}
	c.ttl = newSourceLeases(c)
	if cfg.Catalog != nil {
		c.catalog = newCatalogState(*cfg.Catalog)
	}
	return c
}

func init() {
	// Events name ServiceExports and ServiceImports.
	utilruntime.Must(mcsv1beta1.Install(scheme.Scheme))
}

func newRecorder(kube kubernetes.Interface) record.EventRecorder {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "mcs-controller"})
}

func newLimiter() *rate.Limiter {
	// Overall retry rate across keys, as in client-go's default controller
	// rate limiter but with room for thousands of names: after a member
	// outage every name of the member is retried at once.
	return rate.NewLimiter(rate.Limit(500), 5000)
}

func rateLimiter() workqueue.TypedRateLimiter[string] {
	// Backoff is capped well below client-go's default 1000 s so that a
	// member coming back is caught up within seconds.
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: newLimiter()},
	)
}

// Ready is closed once start-up is done and the queues are being worked.
func (c *Controller) Ready() <-chan struct{} { return c.ready }

// Synced returns, per member cluster ID, whether its caches have synced.
func (c *Controller) Synced() map[string]bool {
	out := map[string]bool{}
	for _, m := range c.memberList() {
		out[m.id] = m.hasSynced()
	}
	return out
}

// Run starts the informers, waits for caches (at most
// InitialSyncTimeout), restores clusterset IPs from the imports the members
// already have, and works the queues until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx)
	c.logger = logger
	defer c.queue.ShutDown()
	initial := c.memberList()
	for _, m := range initial {
		c.startInformers(ctx, m)
	}
	c.waitForCaches(ctx)
	if ctx.Err() != nil {
		c.stopMembers()
		return nil
	}
	// A member whose Service ranges overlap the clusterset's is served,
	// as when a ServiceCIDR is added at run time (serviceCIDRChanged):
	// a restart must not make a member leave. Only when every member
	// overlaps is the clusterset range itself wrong, and nothing starts.
	var overlapping []error
	synced := 0
	for _, m := range initial {
		if m.hasSynced() {
			synced++
		}
		if err := c.checkServiceCIDRs(m); err != nil {
			overlapping = append(overlapping, err)
		}
	}
	if synced > 0 && len(overlapping) == synced {
		c.stopMembers()
		return errors.Join(overlapping...)
	}
	for _, err := range overlapping {
		logger.Error(err, "A member's Service ranges overlap the clusterset's; it is served, its imports whose clusterset IPs lie there say so, and no new clusterset IP is taken there while another is free")
	}
	c.reserveServiceRanges()
	c.ttl.restore(ctx)
	c.restoreClusterSetIPs()

	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	if c.catalogMode() {
		if err := c.runCatalog(ctx, run); err != nil {
			c.stopMembers()
			return err
		}
	}
	for i := 0; i < c.cfg.Workers; i++ {
		run(func(ctx context.Context) { wait.UntilWithContext(ctx, c.clustersetWorker, time.Second) })
	}
	c.membersMu.Lock()
	c.runCtx = ctx
	c.membersMu.Unlock()
	for _, m := range initial {
		c.serve(m)
	}
	run(c.ttl.run)
	run(func(ctx context.Context) { c.watchLateSyncs(ctx, initial) })
	if c.metrics != nil {
		c.metrics.register(c)
	}
	close(c.ready)
	logger.Info("mcs-controller started", "members", len(initial))
	<-ctx.Done()
	c.queue.ShutDown()
	c.stopMembers()
	wg.Wait()
	return nil
}

// memberList returns a snapshot of the members.
func (c *Controller) memberList() []*member {
	c.membersMu.RLock()
	defer c.membersMu.RUnlock()
	return slices.Clone(c.members)
}

// member returns the member of cluster ID id, or nil.
func (c *Controller) member(id string) *member {
	c.membersMu.RLock()
	defer c.membersMu.RUnlock()
	return c.byID[id]
}

// stopMembers stops every member's informers and workers.
func (c *Controller) stopMembers() {
	for _, m := range c.memberList() {
		m.stop()
	}
}

// startInformers starts m's informers, with the event handlers that feed
// the queues, under a context of its own that ends when it leaves.
func (c *Controller) startInformers(ctx context.Context, m *member) {
	m.ctx, m.cancel = context.WithCancel(ctx)
	c.addHandlers(m)
	if c.cfg.ClusterSelection && m.sel == nil {
		if err := c.addSelectionCaches(m); err != nil {
			c.logger.Error(err, "Cluster selection caches not built; the member never syncs", "cluster", m.id)
			m.synced = append(m.synced, func() bool { return false })
		}
	}
	m.start(m.ctx.Done())
}

// serve starts m's workers: its write queue, the probe that renews its
// source Lease, and a full merge once its nodes are listed.
func (c *Controller) serve(m *member) {
	spawn := func(f func(context.Context)) {
		m.wg.Add(1)
		go func() { defer m.wg.Done(); f(m.ctx) }()
	}
	for i := 0; i < c.cfg.Workers; i++ {
		spawn(func(ctx context.Context) {
			wait.UntilWithContext(ctx, func(ctx context.Context) { c.memberWorker(ctx, m) }, time.Second)
		})
	}
	spawn(func(ctx context.Context) {
		wait.UntilWithContext(ctx, func(ctx context.Context) { c.ttl.probe(ctx, m) }, c.ttl.period())
	})
	// Nodes are not waited for (they are optional); once they are
	// listed, every name is merged again within its source's pod ranges.
	spawn(func(ctx context.Context) {
		if cache.WaitForCacheSync(ctx.Done(), m.inf.nodes.HasSynced) {
			c.enqueueAll()
		}
	})
}

// checkServiceCIDRs refuses clusterset ranges that overlap member m's
// Service ranges (its ServiceCIDR objects): a clusterset IP there would be
// some member's Service IP, and every import given one would lose it to
// that Service, or take it. A member joining is refused; at start-up and
// at run time an overlap is reported instead (serviceCIDRChanged).
func (c *Controller) checkServiceCIDRs(m *member) error {
	if !m.hasSynced() {
		return nil
	}
	for _, o := range c.serviceRangeOverlaps(m) {
		if err := mcsproxy.CheckDisjoint(c.cfg.ClusterSetIPRanges, fmt.Sprintf("ServiceCIDR %s of cluster %s", o.ServiceCIDR, m.id), o.Prefixes); err != nil {
			return err
		}
	}
	return nil
}

// serviceRangeOverlap is a member's ServiceCIDR whose ranges overlap the
// clusterset's: a Service there may be given a clusterset IP.
type serviceRangeOverlap struct {
	// ServiceCIDR is the object's name, Prefixes its ranges that overlap.
	ServiceCIDR string
	Prefixes    []netip.Prefix
}

// overlapsOf returns, by name, the ServiceCIDRs of cidrs whose ranges
// overlap the clusterset ranges. One being deleted still counts: its
// finalizer keeps it until no Service holds an IP of it.
func overlapsOf(clusterset []netip.Prefix, cidrs []*networkingv1.ServiceCIDR) []serviceRangeOverlap {
	var out []serviceRangeOverlap
	for _, sc := range cidrs {
		var overlapping []netip.Prefix
		for _, s := range sc.Spec.CIDRs {
			p, err := netip.ParsePrefix(s)
			if err == nil && slices.ContainsFunc(clusterset, p.Masked().Overlaps) {
				overlapping = append(overlapping, p.Masked())
			}
		}
		if len(overlapping) > 0 {
			out = append(out, serviceRangeOverlap{ServiceCIDR: sc.Name, Prefixes: overlapping})
		}
	}
	slices.SortFunc(out, func(a, b serviceRangeOverlap) int { return strings.Compare(a.ServiceCIDR, b.ServiceCIDR) })
	return out
}

// serviceRangeOverlaps returns member m's ServiceCIDRs that overlap the
// clusterset ranges, as far as its cache knows them.
func (c *Controller) serviceRangeOverlaps(m *member) []serviceRangeOverlap {
	cidrs, _ := m.serviceCIDRs.List(labels.Everything())
	return overlapsOf(c.cfg.ClusterSetIPRanges, cidrs)
}

// reserveServiceRanges tells the allocator the members' Service ranges
// that overlap the clusterset's: no clusterset IP is handed out there
// while another is free.
func (c *Controller) reserveServiceRanges() {
	var reserved []netip.Prefix
	for _, m := range c.memberList() {
		for _, o := range c.serviceRangeOverlaps(m) {
			reserved = append(reserved, o.Prefixes...)
		}
	}
	c.vips.SetReserved(reserved)
}

// ReasonServiceCIDROverlap is the reason of the warning event on a
// member's ServiceCIDR that overlaps the clusterset IP ranges, and of the
// ClusterSetIPInServiceRange condition of the imports whose IPs lie there.
const ReasonServiceCIDROverlap = "ServiceCIDROverlapsClusterSet"

// serviceCIDRChanged checks member m's Service ranges against the
// clusterset's on every change of its ServiceCIDRs (sc, nil when deleted),
// not only at start and join: a ServiceCIDR added later would let a user
// ask for a ClusterIP equal to an import's clusterset IP and take its
// traffic in m. The allocator keeps new clusterset IPs out of the overlap,
// the ServiceCIDR gets a warning event (once), the imports whose IPs lie
// there say so (serviceRangeCondition) and mcs_controller_service_cidrs_overlapping_clusterset
// counts it.
//
// The member stays: the danger is to the imports whose IPs the range
// holds, in that member only, and leaving would withdraw every one of its
// exports from the clusterset and every import from its clients, for a
// change its administrator can undo; nothing would bring it back either,
// since its inventory entry still counts it as joined. IPs already
// allocated there are not moved: whoever may add a ServiceCIDR in one
// member could otherwise move clusterset IPs that every member's clients
// hold. (A cluster joining with an overlap is refused, since nothing of it
// is served yet.)
func (c *Controller) serviceCIDRChanged(m *member, sc *networkingv1.ServiceCIDR) {
	c.reserveServiceRanges()
	if sc == nil || sc.DeletionTimestamp != nil || c.member(m.id) != m {
		// Gone or going; or m is not served (a join being checked,
		// which refuses it): nothing is written into it.
		return
	}
	overlaps := overlapsOf(c.cfg.ClusterSetIPRanges, []*networkingv1.ServiceCIDR{sc})
	if len(overlaps) == 0 {
		return
	}
	if _, told := c.told.LoadOrStore(m.id+"/"+string(sc.UID)+"/"+ReasonServiceCIDROverlap+fmt.Sprint(overlaps[0].Prefixes), true); told {
		return
	}
	c.logger.Error(nil, "A member's ServiceCIDR overlaps the clusterset IP ranges: a Service there may take an import's clusterset IP", "cluster", m.id, "serviceCIDR", sc.Name, "ranges", overlaps[0].Prefixes, "clusterSetRanges", c.cfg.ClusterSetIPRanges)
	m.recorder.Eventf(sc, v1.EventTypeWarning, ReasonServiceCIDROverlap,
		"ranges %v overlap the clusterset IP ranges %v: a Service of cluster %s may be given an import's clusterset IP and take its traffic in this cluster. The mcs-controller hands out no new clusterset IP here while another is free, and the imports whose IPs lie here say so (condition %s); delete this ServiceCIDR, or use ranges outside the clusterset's",
		overlaps[0].Prefixes, c.cfg.ClusterSetIPRanges, m.id, ConditionClusterSetIPInServiceRange)
}

// ConditionClusterSetIPInServiceRange is a ServiceImport condition of
// this controller's, present while one of the import's clusterset IPs
// lies in one of its member's Service ranges (a ServiceCIDR added after
// the member joined): a Service there may be given that IP, and the
// proxies of that member would send the import's traffic to it.
const ConditionClusterSetIPInServiceRange = "ClusterSetIPInServiceRange"

// serviceRangeCondition is the ClusterSetIPInServiceRange condition of
// si in m, and whether it applies. A derived import is never at risk: its
// IPs are its derived Service's, which m gave it.
func (c *Controller) serviceRangeCondition(m *member, si *mcsv1beta1.ServiceImport) (metav1.Condition, bool) {
	if si.Annotations[export.AnnotationDerivedService] != "" {
		return metav1.Condition{}, false
	}
	var in []string
	for _, o := range c.serviceRangeOverlaps(m) {
		for _, s := range si.Spec.IPs {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			for _, p := range o.Prefixes {
				if p.Contains(ip.Unmap()) {
					in = append(in, fmt.Sprintf("%s (ServiceCIDR %s, %s)", s, o.ServiceCIDR, p))
				}
			}
		}
	}
	if len(in) == 0 {
		return metav1.Condition{}, false
	}
	return metav1.Condition{
		Type: ConditionClusterSetIPInServiceRange, Status: metav1.ConditionTrue, Reason: ReasonServiceCIDROverlap,
		Message: fmt.Sprintf("clusterset IPs of this import lie in cluster %s's Service ranges: %s; a Service there may be given one and take this import's traffic in %s. The IPs are not moved (every member's clients hold them): remove the ServiceCIDR", m.id, strings.Join(in, ", "), m.id),
	}, true
}

func (c *Controller) waitForCaches(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, c.cfg.InitialSyncTimeout)
	defer cancel()
	_ = wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, m := range c.memberList() {
			if !m.hasSynced() {
				return false, nil
			}
		}
		return true, nil
	})
	for _, m := range c.memberList() {
		if !m.hasSynced() {
			klog.FromContext(ctx).Info("Member caches not synced; its exports are ignored and its imports and slices left alone until it syncs (are the MCS CRDs installed and the controller authorized?)", "cluster", m.id, "context", m.Context)
		}
	}
}

// watchLateSyncs re-merges everything when one of the members the
// controller started with syncs its caches after start-up: its exports
// and imports were unknown until then. (Members joining later are served
// only once synced.)
func (c *Controller) watchLateSyncs(ctx context.Context, initial []*member) {
	logger := klog.FromContext(ctx)
	pending := map[*member]bool{}
	for _, m := range initial {
		if !m.hasSynced() {
			pending[m] = true
		}
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for m := range pending {
			if m.ctx.Err() != nil {
				delete(pending, m)
			} else if m.hasSynced() {
				delete(pending, m)
				if err := c.checkServiceCIDRs(m); err != nil {
					// As at start-up (Run): served, and said.
					logger.Error(err, "Member caches synced late, and its Service ranges overlap the clusterset's; it is served, its imports whose clusterset IPs lie there say so", "cluster", m.id)
					c.reserveServiceRanges()
				}
				logger.Info("Member caches synced late; merging again", "cluster", m.id)
				c.restoreClusterSetIPs()
				c.enqueueAll()
			}
		}
	}, time.Second)
}

// restoreClusterSetIPs adopts the IPs of the imports members already have.
func (c *Controller) restoreClusterSetIPs() {
	var claims []clustersetip.Claim
	for _, m := range c.memberList() {
		if !m.hasSynced() {
			continue
		}
		imports, _ := m.imports.List(labels.SelectorFromSet(labels.Set{managedLabel: c.cfg.ManagedBy}))
		for _, si := range imports {
			// A derived import carries its derived Service's IPs,
			// which are the member's, not the clusterset's.
			if len(si.Spec.IPs) > 0 && si.Annotations[export.AnnotationDerivedService] == "" {
				key := si.Namespace + "/" + si.Name
				// In catalog mode an import holds its global service's IPs;
				// in the export model its name does, whoever wrote it.
				if g := si.Annotations[catalog.AnnotationGlobalService]; g != "" && c.catalogMode() {
					key = catalogKeyPrefix + g
				}
				claims = append(claims, clustersetip.Claim{Key: key, IPs: si.Spec.IPs, Created: si.CreationTimestamp.Time})
			}
		}
	}
	c.vips.Restore(claims)
	c.logger.Info("Restored clusterset IPs from existing imports", "imports", len(claims), "allocated", c.vips.Allocated())
}

// enqueueAll merges every name any member exports or imports again. It
// runs on rare transitions (a member syncing, a lease expiring), never on
// the hot path.
func (c *Controller) enqueueAll() {
	keys := map[string]bool{}
	c.mu.RLock()
	for k := range c.desired {
		keys[k] = true
	}
	c.mu.RUnlock()
	for _, m := range c.memberList() {
		for _, k := range m.exportKeys() {
			keys[k] = true
		}
	}
	for k := range keys {
		c.queue.Add(k)
	}
}

func (c *Controller) clustersetWorker(ctx context.Context) {
	for c.processClusterset(ctx) {
	}
}

func (c *Controller) processClusterset(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if c.catalogMode() {
		// Whatever changed, the catalog is resolved again as a whole.
		c.catalog.queue.Add(catalogQueueKey)
		c.queue.Forget(key)
		return true
	}
	start := time.Now()
	err := c.syncClusterset(ctx, key)
	c.metrics.observeExportSync(time.Since(start), err)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Merging exports failed; retrying", "key", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Controller) memberWorker(ctx context.Context, m *member) {
	for c.processMember(ctx, m) {
	}
}

func (c *Controller) processMember(ctx context.Context, m *member) bool {
	key, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(key)
	start := time.Now()
	err := c.syncMember(ctx, m, key)
	c.metrics.observeSliceSync(m.id, time.Since(start), err)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Writing into member failed; retrying", "cluster", m.id, "key", key, "err", err)
		m.queue.AddRateLimited(key)
		return true
	}
	m.queue.Forget(key)
	return true
}

// enqueueMembers asks every member to write key.
func (c *Controller) enqueueMembers(key string) {
	for _, m := range c.memberList() {
		m.queue.Add(key)
	}
}

func (c *Controller) addHandlers(m *member) {
	merge := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	write := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			m.queue.Add(key)
		}
	}
	on := func(f func(any)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, o any) { f(o) }, DeleteFunc: f}
	}
	handle := func(i cache.SharedIndexInformer, h cache.ResourceEventHandler) {
		_, _ = i.AddEventHandler(h)
	}
	f := m.inf
	// Exports and their Services change what the clusterset imports. Our
	// own status writes on exports change nothing the merge reads.
	handle(f.exports, cache.ResourceEventHandlerFuncs{
		AddFunc:    merge,
		DeleteFunc: merge,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*mcsv1beta1.ServiceExport)
			n, ok2 := cur.(*mcsv1beta1.ServiceExport)
			if ok1 && ok2 && (o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) && apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
				return
			}
			merge(cur)
		},
	})
	handle(f.services, on(func(obj any) {
		// A derived Service is put right if anyone else changes it.
		if key, ok := c.derivedServiceOwner(obj); ok {
			m.queue.Add(key)
		}
		// An ingress Service's node ports and load-balancer addresses
		// are the entry points other members get.
		if key, ok := c.ingressOwner(obj); ok {
			c.queue.Add(key)
		}
		// Only Services somebody exports (or the catalog binds) matter.
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil && c.sourceOf(m, key) {
			c.queue.Add(key)
		}
	}))
	handle(f.localSlices, on(func(obj any) {
		if s := eventObject[*discoveryv1.EndpointSlice](obj); s != nil {
			key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
			if c.catalogMode() && c.catalogBinds(m, key) {
				c.queue.Add(key)
			} else if _, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil && !c.catalogMode() {
				c.queue.Add(key)
			}
		}
	}))
	// What this controller wrote is put right if anyone else changes it.
	// An import someone else wrote reserves its IPs, and the import of
	// ours that has one of them hears of it (its status says so).
	foreign := func(obj any, gone bool) {
		si := eventObject[*mcsv1beta1.ServiceImport](obj)
		if si == nil || c.wrote(si) {
			return
		}
		var ips []string
		if !gone {
			ips = si.Spec.IPs
		}
		c.vips.SetForeign(m.id+"/"+si.Namespace+"/"+si.Name, ips)
		for _, ip := range si.Spec.IPs {
			if owner, ok := c.vips.Owner(ip); ok {
				c.enqueueMembers(owner)
			}
		}
	}
	// In catalog mode, the catalog's imports say whether they are written.
	placed := func(obj any) {
		if si := eventObject[*mcsv1beta1.ServiceImport](obj); si != nil && c.catalogMode() && si.Annotations[catalog.AnnotationGlobalService] != "" {
			c.catalog.queue.Add(catalogQueueKey)
		}
	}
	handle(f.imports, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { foreign(obj, false); write(obj); placed(obj) },
		UpdateFunc: func(old, cur any) {
			foreign(old, true)
			foreign(cur, false)
			write(cur)
			placed(cur)
		},
		DeleteFunc: func(obj any) { foreign(obj, true); write(obj); placed(obj) },
	})
	handle(f.importedSlices, on(func(obj any) {
		if s := eventObject[*writtenSlice](obj); s != nil {
			m.queue.Add(s.Namespace() + "/" + s.importName())
		}
	}))
	// A namespace appearing or going changes where a name is imported.
	handle(f.namespaces, on(func(obj any) {
		ns := namespaceName(obj)
		for _, k := range c.keysInNamespace(ns) {
			c.queue.Add(k)
		}
	}))
	// Where a member's pods can be bounds the addresses it may publish.
	handle(f.nodes, cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initialList bool) {
			if !initialList {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Node)
			n, ok2 := cur.(*v1.Node)
			if ok1 && ok2 && slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) && apiequality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses) {
				// A node's readiness makes it an entry point of its
				// cluster's ingresses, or not.
				if nodeReadyChanged(o, n) && c.needsIngress(m.id, c.memberList()) {
					for _, k := range m.exportKeys() {
						c.queue.Add(k)
					}
				}
				return
			}
			c.enqueueAll()
		},
	})
	// A member's Service ranges decide the IP families its imports can
	// serve, and whether their clusterset IPs are safe there.
	handle(f.serviceCIDRs, on(func(obj any) {
		c.serviceCIDRChanged(m, eventObject[*networkingv1.ServiceCIDR](obj))
		for _, k := range c.desiredKeys() {
			m.queue.Add(k)
		}
	}))
}

// sourceOf tells whether member m's Service key is a source of the
// clusterset: exported (somewhere, since a Service change can make an
// export valid), or bound by the catalog.
func (c *Controller) sourceOf(m *member, key string) bool {
	if c.catalogMode() {
		return c.catalogBinds(m, key)
	}
	return c.isExportedSomewhere(key)
}

func (c *Controller) isExportedSomewhere(key string) bool {
	c.mu.RLock()
	_, ok := c.desired[key]
	c.mu.RUnlock()
	if ok {
		return true
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	for _, m := range c.memberList() {
		if _, err := m.exports.ServiceExports(ns).Get(name); err == nil {
			return true
		}
	}
	return false
}

func (c *Controller) desiredKeys() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	keys := make([]string, 0, len(c.desired))
	for k := range c.desired {
		keys = append(keys, k)
	}
	return keys
}

func (c *Controller) keysInNamespace(ns string) []string {
	var out []string
	for _, k := range c.desiredKeys() {
		if n, _, _ := cache.SplitMetaNamespaceKey(k); n == ns {
			out = append(out, k)
		}
	}
	for _, m := range c.memberList() {
		exports, _ := m.exports.ServiceExports(ns).List(labels.Everything())
		for _, se := range exports {
			out = append(out, se.Namespace+"/"+se.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func namespaceName(obj any) string {
	if ns := eventObject[*v1.Namespace](obj); ns != nil {
		return ns.Name
	}
	return ""
}

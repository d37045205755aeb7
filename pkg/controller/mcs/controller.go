package mcs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/clustersetip"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/eventrecorder"
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
	// cluster may export from; once any cluster is listed, a cluster not
	// listed exports from none (export.CheckExportNamespace). A team that owns one member should not be
	// able to publish endpoints under every other team's names.
	ExportNamespaces map[string][]string
	// SourceManagers are the endpointslice.kubernetes.io/managed-by values
	// of the exported Services' slices that are mirrored. Anyone who may
	// write an EndpointSlice in an exporting namespace could otherwise
	// publish any address to every member under the Service's name.
	SourceManagers []string
	// MemberPodCIDRs are, per cluster ID, the ranges the member's pods
	// get their IPs from, as the operator states them: a member named
	// here has its endpoints mirrored only within these, whatever its
	// Node objects say. Where it names no member, nodes' pod CIDRs and
	// addresses are used; where nothing is known, only what the
	// EndpointSlice controller wrote for Pods is mirrored
	// (endpointRangesOf).
	MemberPodCIDRs map[string][]netip.Prefix
	// MaxClusterSetIPsPerNamespace bounds the names of one namespace (or
	// catalog team) that hold clusterset IPs, and
	// MaxForeignImportsPerMember the imports someone else wrote whose IPs
	// one member reserves: no party starves the shared pool (0: no bound).
	MaxClusterSetIPsPerNamespace int
	MaxForeignImportsPerMember   int
	// MaxClusterSetIPsPerMember bounds the names holding clusterset IPs
	// that one member exports (0: no bound).
	MaxClusterSetIPsPerMember int
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
	// ExportClusters is the MultiClusterServiceExportClusters gate: every
	// export's status.clusters names the members the Service is imported
	// in (export_clusters.go). Off, the field is never written.
	ExportClusters bool
	// ClusterProperties returns a member's merged cluster properties (its
	// ClusterProfile's and its own, inventory.MergeProperties), read when
	// its ClusterProperties change; nil uses its own only.
	ClusterProperties func(ctx context.Context, clusterID string) (map[string]string, error)
	// HubPlan, in pull mode, makes the controller a member agent's writing
	// half: its one member is the agent's cluster, and it writes what the
	// hub's planner planned (hub_plan_model.go) instead of merging exports.
	HubPlan *HubPlanSource
}

// Controller is the mcs-controller.
type Controller struct {
	cfg Config

	members memberSet

	// queue holds the names whose exports must be merged again.
	queue workqueue.TypedRateLimitingInterface[string]
	// clustersetIPs allocates the names' clusterset IPs; reservations
	// keeps out of its hands what the members hold that it did not give.
	clustersetIPs *clustersetip.Allocator
	reservations  *reservations
	// view is what every member's writes read of the others, made once.
	view clustersetView
	// leases are the source clusters' Leases, their endpoints' TTL.
	leases *sourceLeases

	mu      sync.RWMutex
	desired map[string]*desiredState

	metrics *Metrics
	ready   chan struct{}
	// source is where the desired state comes from (desired_source.go); catalog
	// is the hub's catalog when that is the source.
	source  desiredSource
	catalog *catalogState
	// logger is for what happens outside a request's context (event
	// handlers, reports): Run's logger once it runs.
	logger klog.Logger
}

// managedLabel marks the ServiceImports this controller owns, so that
// imports written by anyone else are never touched; proxies program only
// imports whose label names a trusted manager.
const managedLabel = mcsproxy.LabelImportManagedBy

// wrote tells whether this controller wrote o (an import, or a Service it
// created for native names): the only objects it changes or deletes.
func (c *Controller) wrote(o metav1.Object) bool { return wroteBy(c.cfg.ManagedBy, o) }

func wroteBy(manager string, o metav1.Object) bool { return o.GetLabels()[managedLabel] == manager }

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
	c := newController(cfg, metrics, members)
	if cfg.HubPlan != nil {
		if cfg.Catalog != nil || len(cfg.Members) != 1 {
			return nil, errors.New("a controller that writes the hub's plan has one member, its own cluster, and no catalog")
		}
		s, err := newHubPlanModel(c, *cfg.HubPlan)
		if err != nil {
			return nil, err
		}
		c.source = s
	}
	return c, nil
}

// newController builds a controller over members already built.
func newController(cfg Config, metrics *Metrics, members []*member) *Controller {
	c := &Controller{
		cfg:           cfg,
		queue:         workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "clusterset"}),
		clustersetIPs: clustersetip.New(cfg.ClusterSetIPRanges),
		desired:       map[string]*desiredState{},
		metrics:       metrics,
		ready:         make(chan struct{}),
		logger:        klog.Background(),
	}
	c.clustersetIPs.SetLimits(cfg.MaxClusterSetIPsPerNamespace, cfg.MaxForeignImportsPerMember)
	c.clustersetIPs.SetMemberLimit(cfg.MaxClusterSetIPsPerMember)
	c.members.byID = map[string]*member{}
	for _, m := range members {
		c.members.list = append(c.members.list, m)
		c.members.byID[m.id] = m
	}
	c.leases = newSourceLeases(c)
	c.reservations = &reservations{
		ips: c.clustersetIPs, ranges: cfg.ClusterSetIPRanges, manager: cfg.ManagedBy, members: &c.members,
		enqueue: c.enqueueMembers,
		ipKey:   func(si *mcsv1beta1.ServiceImport) string { return c.source.ipKey(si) },
		logger:  c.logger,
	}
	c.view = clustersetView{retainedSource: c.retainedSource, serviceRangeOverlaps: c.reservations.serviceRangeOverlaps}
	c.source = exportModel{c}
	if cfg.Catalog != nil {
		c.catalog = newCatalogState(*cfg.Catalog, nil)
		c.source = catalogModel{c}
	}
	return c
}

func init() {
	// Events name ServiceExports and ServiceImports.
	utilruntime.Must(mcsv1beta1.Install(scheme.Scheme))
}

// newRecorder returns a member's event recorder and the function that
// shuts its broadcaster down.
func newRecorder(kube kubernetes.Interface) (events.EventRecorder, func()) {
	return eventrecorder.New(kube)
}

// Ready is closed once start-up is done and the queues are being worked.
func (c *Controller) Ready() <-chan struct{} { return c.ready }

// Synced returns, per member cluster ID, whether its caches have synced.
func (c *Controller) Synced() map[string]bool {
	out := map[string]bool{}
	for _, m := range c.members.all() {
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
	c.reservations.logger = logger
	defer c.queue.ShutDown()
	initial := c.members.all()
	for _, m := range initial {
		c.startInformers(ctx, m)
	}
	c.waitForCaches(ctx)
	if ctx.Err() != nil {
		c.members.stop()
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
		if err := c.reservations.checkServiceCIDRs(m); err != nil {
			overlapping = append(overlapping, err)
		}
	}
	if synced > 0 && len(overlapping) == synced {
		c.members.stop()
		return errors.Join(overlapping...)
	}
	for _, err := range overlapping {
		logger.Error(err, "A member's Service ranges overlap the clusterset's; it is served, its imports whose clusterset IPs lie there say so, and no new clusterset IP is taken there while another is free")
	}
	c.reservations.reserveServiceRanges()
	c.leases.restore(ctx)
	for _, m := range initial {
		if m.hasSynced() {
			c.reservations.reserveForeignOf(m)
		}
	}
	c.reservations.restoreClusterSetIPs()

	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	if err := c.source.start(ctx, run); err != nil {
		c.members.stop()
		return err
	}
	for i := 0; i < c.cfg.Workers; i++ {
		run(func(ctx context.Context) {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				work(c.queue, func(key string) error { return c.source.plan(ctx, key) })
			}, time.Second)
		})
	}
	c.members.serveFrom(ctx)
	for _, m := range initial {
		c.serve(m)
	}
	run(c.leases.run)
	run(func(ctx context.Context) { c.watchLateSyncs(ctx, initial) })
	if c.metrics != nil {
		c.metrics.register(c)
	}
	close(c.ready)
	logger.Info("mcs-controller started", "members", len(initial))
	<-ctx.Done()
	c.queue.ShutDown()
	c.members.stop()
	wg.Wait()
	return nil
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
	// A member built from clientsets alone (tests) has no configuration
	// to watch with: its exports' selectors go unsaid.
	if !c.cfg.ClusterSelection && m.selectorMarks == nil && m.Config != nil {
		if err := c.addIgnoredSelectorMarks(m); err != nil {
			c.logger.Error(err, "The cache of exports' ignored clusterSelectors not built; they are ignored without a word", "cluster", m.id)
		}
	}
	m.start(m.ctx.Done())
}

// serve starts m's workers: its write queue, the probe that renews it as
// a source cluster, the writer of every source's Lease into it, and a
// full merge once its nodes are listed.
func (c *Controller) serve(m *member) {
	spawn := func(f func(context.Context)) {
		m.wg.Add(1)
		go func() { defer m.wg.Done(); f(m.ctx) }()
	}
	for i := 0; i < c.cfg.Workers; i++ {
		spawn(func(ctx context.Context) {
			wait.UntilWithContext(ctx, func(ctx context.Context) { work(m.queue, c.writeInto(ctx, m)) }, time.Second)
		})
	}
	// The probe keeps its period however slow the member answers (a
	// sliding period would stretch every probe's interval by its own
	// latency); the Leases of every source are written into m by m's own
	// writer, which each answer wakes and none waits for.
	spawn(func(ctx context.Context) {
		wait.NonSlidingUntilWithContext(ctx, func(ctx context.Context) { c.leases.probe(ctx, m) }, c.leases.period())
	})
	spawn(func(ctx context.Context) { c.leases.writeLeases(ctx, m) })
	// Nodes are not waited for (they are optional); once they are
	// listed, every name is merged again within its source's pod ranges.
	spawn(func(ctx context.Context) {
		if cache.WaitForCacheSync(ctx.Done(), m.inf.nodes.HasSynced) {
			c.enqueueAll()
		}
	})
}

func (c *Controller) waitForCaches(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, c.cfg.InitialSyncTimeout)
	defer cancel()
	_ = wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, m := range c.members.all() {
			if !m.hasSynced() {
				return false, nil
			}
		}
		return true, nil
	})
	for _, m := range c.members.all() {
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
				if err := c.reservations.checkServiceCIDRs(m); err != nil {
					// As at start-up (Run): served, and said.
					logger.Error(err, "Member caches synced late, and its Service ranges overlap the clusterset's; it is served, its imports whose clusterset IPs lie there say so", "cluster", m.id)
					c.reservations.reserveServiceRanges()
				}
				logger.Info("Member caches synced late; merging again", "cluster", m.id)
				c.reservations.reserveForeignOf(m)
				c.reservations.restoreClusterSetIPs()
				c.enqueueAll()
			}
		}
	}, time.Second)
}

package mcs

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"
	mcslisters "sigs.k8s.io/mcs-api/pkg/client/listers/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// Index names of the EndpointSlice informers.
const (
	// byService indexes a member's own slices by namespace/Service.
	byService = "service"
	// byImport indexes the slices this controller wrote by namespace/import.
	byImport = "import"
	// byClusterSetIP indexes a member's ServiceImports by clusterset IP.
	byClusterSetIP = "clusterSetIP"
)

// member is one member cluster: its clients, informer caches and write queue.
type member struct {
	topology.Member
	id string

	kube kubernetes.Interface
	mcs  mcsclientset.Interface

	exports      mcslisters.ServiceExportLister
	imports      mcslisters.ServiceImportLister
	services     corelisters.ServiceLister
	namespaces   corelisters.NamespaceLister
	serviceCIDRs networkinglisters.ServiceCIDRLister
	// nodes tell where the member's pods can be. Optional: a member whose
	// nodes cannot be read (older RBAC) is not limited by them.
	nodes corelisters.NodeLister
	// localSlices are the member's own slices (those of its Services);
	// importedSlices are the slices this controller wrote into it, as
	// writtenSlices.
	localSlices    cache.Indexer
	importedSlices cache.Indexer

	inf       informerSet
	factories []interface{ Start(<-chan struct{}) }
	// sel are the caches of cluster selection; nil with its gate off.
	sel *selectionCaches
	// selectorMarks says which exports have clusterSelectors, with the
	// gate off (selection_ignored.go).
	selectorMarks cache.SharedIndexInformer
	synced        []cache.InformerSynced

	// queue holds the names whose import, slices and export status must
	// be written into this member.
	queue workqueue.TypedRateLimitingInterface[string]
	// leasesDue wakes the writer of the source Leases this member holds:
	// a probe answered (sourceLeases.probe, writeLeases).
	leasesDue chan struct{}
	// joinedAt is the controller's membership count when the member
	// joined (Controller.membership).
	joinedAt uint64
	recorder events.EventRecorder
	// stopEvents shuts down the broadcaster behind recorder, once: a
	// member that left must not keep a goroutine and a client per
	// cluster that ever joined.
	stopEvents func()
	// state is what the controller remembers of the member between
	// syncs; it goes with the member.
	state *memberState
	// stale is set once the member has been unreachable past its endpoint
	// lease (sourceLeases.checkExpiry): its watches will have to list it
	// again, its caches may hold what it had before, and nothing is
	// written from them (a withdrawal retried in the moments between its
	// return and the next probe would be undone moments later). Once it
	// answers it is joined again through new watches (Controller.rejoin,
	// rejoining while that runs), and the new member written into. A
	// shorter absence (a probe or two missed under load) keeps its
	// watches, which resume where they were.
	stale, rejoining atomic.Bool

	// ctx ends when the member leaves the clusterset (or the controller
	// stops): its informers stop, and wg holds its workers.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewKubeClient is a client of cfg's apiserver for its built-in types,
// sent and read as protobuf, as Kubernetes' own controllers send them:
// the apiserver encodes every watch event of the slices and Services the
// controller, the planner and the agents read and write, and protobuf
// costs it less than JSON. Custom resources (the MCS API, the hub's) are
// served as JSON only: their clients keep cfg as it is.
func NewKubeClient(cfg *rest.Config) (kubernetes.Interface, error) {
	kubeCfg := rest.CopyConfig(cfg)
	if kubeCfg.ContentType == "" {
		kubeCfg.ContentType = runtime.ContentTypeProtobuf
		kubeCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	return kubernetes.NewForConfig(kubeCfg)
}

func newMember(m topology.Member, managedBy string, recorder func(kubernetes.Interface) (events.EventRecorder, func())) (*member, error) {
	cfg := *m.Config
	kube, err := NewKubeClient(&cfg)
	if err != nil {
		return nil, err
	}
	mcs, err := mcsclientset.NewForConfig(&cfg)
	if err != nil {
		return nil, err
	}
	rec, stopEvents := recorder(kube)
	mb, err := newMemberWith(m, kube, mcs, managedBy, rec)
	if err != nil {
		stopEvents()
		return nil, err
	}
	mb.stopEvents = sync.OnceFunc(stopEvents)
	return mb, nil
}

// newMemberWith builds member m on the given clients (fake ones in unit
// tests of the controller's core).
func newMemberWith(m topology.Member, kube kubernetes.Interface, mcs mcsclientset.Interface, managedBy string, recorder events.EventRecorder) (*member, error) {
	mb := &member{Member: m, id: m.ClusterID, kube: kube, mcs: mcs, recorder: recorder, state: &memberState{}, stopEvents: func() {}}
	mb.leasesDue = make(chan struct{}, 1)
	mb.queue = workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "member-" + m.ClusterID})

	// No resync period: the controller is level-triggered from watch
	// events and never re-lists on a timer.
	core := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(dropManagedFields))
	mb.services = core.Core().V1().Services().Lister()
	mb.namespaces = core.Core().V1().Namespaces().Lister()
	mb.serviceCIDRs = core.Networking().V1().ServiceCIDRs().Lister()
	mb.nodes = core.Core().V1().Nodes().Lister()

	// A Service's own slices: those that name a Service and no import.
	// The slices this controller writes name their import's synthetic
	// Service too (export.ImportedSliceLabels); they are in the imported
	// informer, and cached once.
	own, _ := labels.NewRequirement(discoveryv1.LabelServiceName, selection.Exists, nil)
	notImported, _ := labels.NewRequirement(mcsv1beta1.LabelServiceName, selection.DoesNotExist, nil)
	local, localInformer := sliceInformer(kube, compactLocalSlice, labels.NewSelector().Add(*own, *notImported).String(), cache.Indexers{byService: indexByLabel(discoveryv1.LabelServiceName)})
	mb.localSlices = localInformer.GetIndexer()
	imported, importedInformer := sliceInformer(kube, toWrittenSlice, labels.Set{discoveryv1.LabelManagedBy: managedBy}.String(), cache.Indexers{byImport: byImportIndex})
	mb.importedSlices = importedInformer.GetIndexer()

	mcsFactory := mcsinformers.NewSharedInformerFactoryWithOptions(mcs, 0, mcsinformers.WithTransform(dropManagedFields))
	mb.exports = mcsFactory.Multicluster().V1beta1().ServiceExports().Lister()
	mb.imports = mcsFactory.Multicluster().V1beta1().ServiceImports().Lister()

	if err := mcsFactory.Multicluster().V1beta1().ServiceImports().Informer().AddIndexers(cache.Indexers{byClusterSetIP: clusterSetIPIndex}); err != nil {
		return nil, err
	}
	mb.factories = []interface{ Start(<-chan struct{}) }{core, local, imported, mcsFactory}
	mb.inf = informerSet{
		services:       core.Core().V1().Services().Informer(),
		namespaces:     core.Core().V1().Namespaces().Informer(),
		serviceCIDRs:   core.Networking().V1().ServiceCIDRs().Informer(),
		nodes:          core.Core().V1().Nodes().Informer(),
		localSlices:    localInformer,
		importedSlices: importedInformer,
		exports:        mcsFactory.Multicluster().V1beta1().ServiceExports().Informer(),
		imports:        mcsFactory.Multicluster().V1beta1().ServiceImports().Informer(),
	}
	for _, inf := range []cache.SharedIndexInformer{
		mb.inf.services, mb.inf.namespaces, mb.inf.serviceCIDRs, mb.inf.localSlices,
		mb.inf.importedSlices, mb.inf.exports, mb.inf.imports,
	} {
		mb.synced = append(mb.synced, inf.HasSynced)
	}
	return mb, nil
}

// sliceInformer returns an informer of the EndpointSlices that match
// selector, cached as transform makes them and indexed by indexers only:
// the slice caches are the controller's largest, and nothing looks their
// slices up by namespace, which the factory's own informers index.
func sliceInformer(kube kubernetes.Interface, transform cache.TransformFunc, selector string, indexers cache.Indexers) (informers.SharedInformerFactory, cache.SharedIndexInformer) {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(transform))
	inf := f.InformerFor(&discoveryv1.EndpointSlice{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return discoveryinformers.NewFilteredEndpointSliceInformer(c, metav1.NamespaceAll, resync, indexers, func(o *metav1.ListOptions) {
			o.LabelSelector = selector
		})
	})
	return f, inf
}

// compactLocalSlice is how a member's own slices are cached: what the
// controller mirrors of them (export.ImportedSlice), without managedFields,
// target references (they name the member's Pods) or deprecated topology,
// and with their endpoints in a list of their own size (decoding leaves it
// room for up to twice as many). Whether an endpoint's target is a Pod of
// the slice's namespace is kept, as podTarget, for export.Vouched.
func compactLocalSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return dropManagedFields(obj)
	}
	s.ManagedFields = nil
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		if ref := ep.TargetRef; ref != nil && ref.Kind == "Pod" && (ref.Namespace == "" || ref.Namespace == s.Namespace) {
			ep.TargetRef = podTarget
		} else {
			ep.TargetRef = nil
		}
		ep.DeprecatedTopology = nil
	}
	if cap(s.Endpoints) > len(s.Endpoints) {
		s.Endpoints = slices.Clone(s.Endpoints)
	}
	return s, nil
}

// podTarget is the target of every cached endpoint that names a Pod of its
// slice's namespace: one shared reference that names no Pod, so that the
// cache costs no more than without it. Nothing changes it.
var podTarget = &v1.ObjectReference{Kind: "Pod"}

// dropManagedFields keeps managedFields out of the caches: nothing the
// controller decides reads them, and at ten members they are a third of
// what the caches hold. An update made from a cached copy sends none,
// which leaves the apiserver's as they are.
func dropManagedFields(obj any) (any, error) {
	if o, err := meta.Accessor(obj); err == nil {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// informerSet holds a member's informers, for event handlers.
type informerSet struct {
	services, namespaces, serviceCIDRs, localSlices, importedSlices, exports, imports cache.SharedIndexInformer
	// nodes is not waited for (see member.nodes).
	nodes cache.SharedIndexInformer
}

// exportKeys returns the namespace/name of every export in the member.
func (m *member) exportKeys() []string {
	exports, _ := m.exports.List(labels.Everything())
	keys := make([]string, 0, len(exports))
	for _, se := range exports {
		keys = append(keys, se.Namespace+"/"+se.Name)
	}
	return keys
}

// hasSynced reports whether every cache of the member holds a full list.
// A member whose MCS CRDs are missing never syncs: its reflectors keep
// retrying, and until then nothing is concluded from its empty caches.
func (m *member) hasSynced() bool {
	for _, s := range m.synced {
		if !s() {
			return false
		}
	}
	return true
}

func (m *member) start(stop <-chan struct{}) {
	for _, f := range m.factories {
		f.Start(stop)
	}
}

// stop ends m's informers and workers, waits for the workers, and shuts
// its event broadcaster down (events recorded until then are sent).
func (m *member) stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.queue.ShutDown()
	m.wg.Wait()
	m.stopEvents()
}

// indexByLabel indexes namespaced objects by namespace/<value of label>.
func indexByLabel(label string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		slice, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return nil, nil
		}
		if v := slice.Labels[label]; v != "" {
			return []string{slice.Namespace + "/" + v}, nil
		}
		return nil, nil
	}
}

// nodeRanges returns m's nodes' pod CIDRs and their own addresses (as
// single-address prefixes); none when the nodes cannot be read.
func (m *member) nodeRanges() (cidrs, addrs []netip.Prefix) {
	if !m.inf.nodes.HasSynced() {
		return nil, nil
	}
	nodes, _ := m.nodes.List(labels.Everything())
	for _, n := range nodes {
		for _, s := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				cidrs = append(cidrs, p.Masked())
			}
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && (a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP) {
				addrs = append(addrs, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	return cidrs, addrs
}

// endpointRanges are where a member's endpoints may be, as far as anyone
// the controller believes says so.
type endpointRanges struct {
	Prefixes []netip.Prefix
	// Known is false when nothing says where the member's pods are:
	// then only what the endpoint's writer vouches for is mirrored.
	Known bool
	// Source says, for events and conditions, whose word the ranges are.
	Source string
}

// Sources of a member's endpoint ranges.
const (
	rangesFromOperator = "the mcs-controller's --member-pod-cidrs"
	rangesFromNodes    = "its nodes' spec.podCIDRs and addresses"
	rangesNotNamed     = "none: --member-pod-cidrs names other clusters but not this one"
	rangesUnknown      = "none: no node has spec.podCIDRs, and --member-pod-cidrs names no cluster"
)

// endpointRangesOf decides where the endpoints of cluster may be. The
// operator's ranges (configured: --member-pod-cidrs, by cluster ID) win
// outright: a member's Node objects are written by its own administrator,
// and two nodes with 0.0.0.0/1 and 128.0.0.0/1 would otherwise let it
// publish any address. Once the operator states ranges for any member, a
// member not named has none (confinement fails closed for IDs it does
// not name). Only where the operator states none are the member's nodes
// believed: their pod CIDRs, with their own addresses (host-network pods);
// node addresses alone say nothing of where pods are.
func endpointRangesOf(configured map[string][]netip.Prefix, cluster string, nodeCIDRs, nodeAddrs []netip.Prefix) endpointRanges {
	if own, named := configured[cluster]; named {
		return endpointRanges{Prefixes: own, Known: true, Source: rangesFromOperator}
	}
	if len(configured) > 0 {
		return endpointRanges{Source: rangesNotNamed}
	}
	if len(nodeCIDRs) == 0 {
		return endpointRanges{Source: rangesUnknown}
	}
	return endpointRanges{Prefixes: slices.Concat(nodeCIDRs, nodeAddrs), Known: true, Source: rangesFromNodes}
}

// endpointRanges returns where m's endpoints may be (endpointRangesOf).
// Nodes are listed only when the operator states no ranges.
func (m *member) endpointRanges(configured map[string][]netip.Prefix) endpointRanges {
	if len(configured) > 0 {
		return endpointRangesOf(configured, m.id, nil, nil)
	}
	cidrs, addrs := m.nodeRanges()
	return endpointRangesOf(configured, m.id, cidrs, addrs)
}

func clusterSetIPIndex(obj any) ([]string, error) {
	if si, ok := obj.(*mcsv1beta1.ServiceImport); ok {
		return si.Spec.IPs, nil
	}
	return nil, nil
}

// foreignImports returns the imports in m that carry ip and that this
// controller (managedBy) did not write, except key's own.
func (m *member) foreignImports(ip, key, managedBy string) []string {
	objs, _ := m.inf.imports.GetIndexer().ByIndex(byClusterSetIP, ip)
	var out []string
	for _, o := range objs {
		si, ok := o.(*mcsv1beta1.ServiceImport)
		if !ok || si.Labels[managedLabel] == managedBy || si.Namespace+"/"+si.Name == key {
			continue
		}
		out = append(out, si.Namespace+"/"+si.Name)
	}
	slices.Sort(out)
	return out
}

// indexed returns the objects of type T that indexer holds under index
// key key.
func indexed[T any](indexer cache.Indexer, index, key string) []T {
	objs, _ := indexer.ByIndex(index, key)
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// eventObject returns the object of type T an informer event carries,
// unwrapping a tombstone; the zero T when it carries another type.
func eventObject[T any](obj any) T {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, _ := obj.(T)
	return o
}

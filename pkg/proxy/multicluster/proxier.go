package multicluster

import (
	"iter"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

const eventAction = "ProgramServiceImport"

// Proxier is a proxy.Provider that adds ServiceImports to the Services and
// EndpointSlices the wrapped Provider receives from kube-proxy's informers.
// All methods are safe for concurrent use.
type Proxier struct {
	proxy.Provider

	events reporter
	logger klog.Logger

	// mu guards everything below and the importer's state: every handler
	// takes it once, for the whole event.
	mu sync.Mutex
	// im holds the imports and their slices and decides what the wrapped
	// Provider holds of them (decide.go).
	im *importer
	// reservedReported is, per local Service, the externalIPs and
	// load-balancer IPs inside the clusterset ranges last reported, and
	// droppedSlices the plain EndpointSlices that name an import's
	// synthetic Service, so that each is reported once.
	reservedReported map[types.NamespacedName]string
	droppedSlices    sets.Set[types.NamespacedName]

	// The proxier must not sync before imports are known, or clusterset
	// IPs would disappear from the rules at every restart. Synced calls
	// from the core informers are held until the MCS side has synced
	// (importer.mcsSynced).
	servicesSynced, endpointSlicesSynced           bool
	forwardedServicesSynced, forwardedSlicesSynced bool
	// synced is closed once both are forwarded: the wrapped Provider
	// programs imports from then on (Announce waits for it).
	synced chan struct{}
}

// importer is what the Proxier holds of imports, their MCS EndpointSlices
// and the local Services whose names they share, and the decisions made
// from it: which import owns a clusterset IP, which slices its Service
// gets, which source clusters serve (cluster selection), what a native
// name joins. It alone hands the wrapped Provider imports and their
// slices. Used with the Proxier's lock held.
type importer struct {
	provider proxy.Provider
	opts     *mcsproxy.Options
	events   *reporter
	logger   klog.Logger
	// optsGen counts the changes of opts that change translations (the
	// local cluster ID): a slice programmed with an older generation is
	// translated again.
	optsGen int

	// imports holds, per import name, every ServiceImport and MCS
	// EndpointSlice seen, programmed or not, so that a conflict that goes
	// away or an import that arrives after its slices is picked up at once.
	imports importTable
	// native holds, per Service name, what native names need (native.go).
	native map[types.NamespacedName]*nativeState
	// claims says who owns each clusterset IP (claims.go).
	claims *claimIndex
	// derivedOf maps an import to the local Service its annotation names
	// as its derived Service (derived mode), derivedBy the reverse; only
	// such imports are in them.
	derivedOf map[types.NamespacedName]types.NamespacedName
	derivedBy map[types.NamespacedName]sets.Set[types.NamespacedName]

	// mcsSynced is set once the ServiceImports that existed at start-up
	// have been delivered: from then on a slice without its import is
	// reported.
	mcsSynced bool
	// clusterSelection is the MultiClusterServiceClusterSelection gate.
	clusterSelection bool
	// listed is set once the informers have delivered the first full
	// state (listingDone). Until then a slice's event neither chooses its
	// import's source clusters again nor decides its native name again:
	// an import's S slices listed one after the other would each decide
	// over all of them, S² per import (3.3× the Services' feed at 100
	// sources with cluster selection, 10× at 50 with native names); the
	// import's own event decides over the slices it has, and listingDone
	// once more over all of them, before the first sync.
	listed bool
	// sweeper, once kube-proxy starts it, deletes what connection
	// attempts left in conntrack before a clusterset IP was programmed
	// (conntrack.go).
	sweeper *conntrackSweeper
	// choices counts the choices made (choose), and nativePlans the
	// native-name decisions (nativePlanOf): the work the tests count.
	choices, nativePlans int
}

type importState struct {
	obj *mcsv1beta1.ServiceImport
	// invalid is why obj cannot be translated, if it cannot. The IPs a
	// valid import claims are in claim.
	invalid *mcsproxy.RejectionError
	// programmedFrom is the ServiceImport whose translation the wrapped
	// Provider holds, if any. The translation itself is not kept: the
	// Provider keeps what it needs of it, and ServiceForImport, a pure
	// function, gives it again when it is to be updated or deleted.
	programmedFrom *mcsv1beta1.ServiceImport
	// reported is the last rejection reported, so that each is logged,
	// evented and counted once rather than on every event.
	reported mcsproxy.Reason
	// nativeReported is the last native-names error reported.
	nativeReported string
	// claim is the import's claim on its clusterset IPs (claims.go).
	claim claimOf
	// slices are the import's MCS EndpointSlices (in the import's
	// namespace, labelled with its name), sorted by name, and labels the
	// map their translations share; nativeLabels are the labels of those
	// handed over as the local Service's (native names). An entry lives
	// while the import or any of its slices does (importTable.forget).
	// Slices are found through their import, not by a map of their own: a
	// proxier holds one per slice as long as the slice exists. slicesBuf holds the
	// list while it has room: an import has a slice per source cluster,
	// and an entry per import is made anyway.
	slices               []*sliceState
	slicesBuf            [2]*sliceState
	labels, nativeLabels map[string]string
	// results are the import's cluster selector results and chosen the
	// source clusters they give it here (selection.go); nil with the gate
	// off.
	results []csv1beta1.ClusterSelectorResult
	chosen  choice
	// shownReason is the reason label of the import's selection gauge
	// series, "" when it has none: the other reasons' series are
	// deleted only when it changes, not at every event.
	shownReason string
}

// findSlice returns where the slice called name is, or would be, in
// st.slices.
func (st *importState) findSlice(name string) (int, bool) {
	return slices.BinarySearchFunc(st.slices, name, func(s *sliceState, name string) int {
		return strings.Compare(s.name(), name)
	})
}

// sliceState is what the Proxier keeps of one MCS EndpointSlice. Kept
// small: a proxier holds one per slice, as long as the slice exists. The
// import it belongs to is read from obj (importKeyOf).
type sliceState struct {
	obj *discoveryv1.EndpointSlice
	// invalid is why obj cannot be translated, if it cannot.
	invalid *mcsproxy.RejectionError
	// programmedFrom is the EndpointSlice whose translation the wrapped
	// Provider holds, translated with the options of generation
	// programmedGen, if any. As for imports, the translation itself is not
	// kept (a proxier holds every slice as long as it exists): the
	// Provider keeps what it needs of it, and EndpointSliceForImport, a
	// pure function, gives it again when it is to be updated or deleted.
	programmedFrom *discoveryv1.EndpointSlice
	programmedGen  int
	// reported is the rejection last reported, if any (a pointer, not the
	// reason itself: a proxier holds one sliceState per slice).
	reported *mcsproxy.RejectionError
	// native is obj translated as a slice of the local Service of the
	// import's name (native names); only slices of imports that ask for
	// native names have one.
	native *nativeCopy
}

// name is the slice's name; a state in an import's list always has obj or
// programmedFrom.
func (st *sliceState) name() string {
	if st.obj != nil {
		return st.obj.Name
	}
	return st.programmedFrom.Name
}

// nativeCopy is a slice translated for native names, derived from from
// with the options of generation gen.
type nativeCopy struct {
	slice, from *discoveryv1.EndpointSlice
	gen         int
}

// importKeyOf names the import an MCS EndpointSlice belongs to.
func importKeyOf(slice *discoveryv1.EndpointSlice) types.NamespacedName {
	return types.NamespacedName{Namespace: slice.Namespace, Name: mcsproxy.ImportNameOf(slice)}
}

// NewProxier wraps provider. recorder may be nil.
func NewProxier(logger klog.Logger, provider proxy.Provider, opts *mcsproxy.Options, recorder events.EventRecorder) *Proxier {
	logger = logger.WithName("multicluster")
	p := &Proxier{
		Provider:         provider,
		logger:           logger,
		events:           reporter{logger: logger, recorder: recorder},
		reservedReported: map[types.NamespacedName]string{},
		droppedSlices:    sets.New[types.NamespacedName](),
		synced:           make(chan struct{}),
	}
	im := &importer{
		provider:  provider,
		events:    &p.events,
		logger:    logger,
		imports:   importTable{},
		native:    map[types.NamespacedName]*nativeState{},
		claims:    newClaimIndex(),
		derivedOf: map[types.NamespacedName]types.NamespacedName{},
		derivedBy: map[types.NamespacedName]sets.Set[types.NamespacedName]{},
	}
	o := *opts
	o.Labels = im.imports.labelsOf
	im.opts = &o
	p.im = im
	// Before the first sync, and whether or not kube-proxy watches
	// ServiceCIDRs: the clusterset ranges are dropped where no import
	// holds them from the first ruleset on (OnServiceCIDRsChanged).
	p.OnServiceCIDRsChanged(nil)
	return p
}

// importTable is the Proxier's state per import name: what it holds of
// each import and its slices, and the labels their translations share.
// Used with the Proxier's lock held.
type importTable map[types.NamespacedName]*importState

// entry returns the entry of import key, made if there is none.
func (t importTable) entry(key types.NamespacedName) *importState {
	st := t[key]
	if st == nil {
		st = &importState{}
		t[key] = st
	}
	return st
}

// forget drops the entry of import key once it holds nothing: no import,
// nothing programmed, no slice.
func (t importTable) forget(key types.NamespacedName) {
	if st := t[key]; st != nil && st.obj == nil && st.programmedFrom == nil && len(st.slices) == 0 {
		delete(t, key)
	}
}

// labelsOf returns the one labels map every translated slice of import
// namespace/name shares (the proxier holds each translated slice as long
// as it exists): the translation's Options.Labels.
func (t importTable) labelsOf(namespace, name string) map[string]string {
	st := t.entry(types.NamespacedName{Namespace: namespace, Name: name})
	if st.labels == nil {
		st.labels = mcsproxy.SliceLabels(name)
	}
	return st.labels
}

// nativeLabelsOf returns the labels map of import key's slices handed
// over as the local Service's, made when native names first need it.
func (t importTable) nativeLabelsOf(key types.NamespacedName) map[string]string {
	st := t.entry(key)
	if st.nativeLabels == nil {
		st.nativeLabels = map[string]string{discoveryv1.LabelServiceName: key.Name}
	}
	return st.nativeLabels
}

// slicesOf returns import key's slices, sorted by name. Reconciling them
// leaves the list as it is.
func (t importTable) slicesOf(key types.NamespacedName) []*sliceState {
	if st := t[key]; st != nil {
		return st.slices
	}
	return nil
}

// allSlices yields every MCS EndpointSlice held. Reconciling them leaves
// the lists as they are.
func (t importTable) allSlices() iter.Seq[*sliceState] {
	return func(yield func(*sliceState) bool) {
		for _, imp := range t {
			for _, st := range imp.slices {
				if !yield(st) {
					return
				}
			}
		}
	}
}

// reconcileAllSlices reconciles every MCS EndpointSlice.
func (im *importer) reconcileAllSlices() {
	for st := range im.imports.allSlices() {
		im.reconcileSlice(st, nil)
	}
}

var _ proxy.Provider = &Proxier{}

func (p *Proxier) isMultiClusterSynced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.im.mcsSynced
}

func sortedKeys(s sets.Set[types.NamespacedName]) []types.NamespacedName {
	out := s.UnsortedList()
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// OnServiceCIDRsChanged hands the wrapped proxier the clusterset ranges
// beside the cluster's Service ranges. The nftables proxier drops a new
// connection to an address of those ranges that no Service holds, as it
// drops one to an unallocated ClusterIP; so a clusterset IP withdrawn,
// refused or never allocated is dropped on the node rather than following
// its routes (to a member or router that advertises the range, say, whose
// owner would receive the clients still holding the IP). The iptables
// proxier has no such rule (upstream's neither drops unallocated
// ClusterIPs there).
func (p *Proxier) OnServiceCIDRsChanged(cidrs []string) {
	p.Provider.OnServiceCIDRsChanged(withClusterSetRanges(cidrs, p.im.opts.ClusterSetIPCIDRs))
}

// withClusterSetRanges returns the Service ranges cidrs with the clusterset
// ranges the proxy admits added.
func withClusterSetRanges(cidrs []string, clusterset []netip.Prefix) []string {
	out := slices.Clone(cidrs)
	for _, r := range clusterset {
		if s := r.String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

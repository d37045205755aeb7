package multicluster

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/clusterselection"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Cluster selection (KEP-5939, gate MultiClusterServiceClusterSelection):
// the mcs-controller publishes, in each import's status, the source
// clusters each of its selectors matches for this cluster; this proxier
// gives the import's clusterset IPs the endpoints of the first result that
// has a usable endpoint (clusterselection.Choose), per address family and
// port, and of every source cluster when none has. The choice is made again at every
// change of the import or its slices, from the slices it already holds:
// no API write is on the failover path. (Until the informers have
// delivered the first full state, only the import's own events choose,
// and the first sync once more: importer.listed.) A change of choice hands the
// Provider the slices that join before those that leave, so that a sync
// in between sees a superset and no live connection loses its endpoint to
// a half-made change.

// SetClusterSelection turns cluster selection on (the gate); off, results
// are ignored and every source cluster serves.
func (p *Proxier) SetClusterSelection(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.im.clusterSelection = on
}

// OnServiceImportSelected records a ServiceImport with its cluster
// selector results (status.clusterSelectorResults, read by the watcher
// beside mcs-api's fields).
func (p *Proxier) OnServiceImportSelected(si *mcsv1beta1.ServiceImport, results []csv1beta1.ClusterSelectorResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.im.upsertImport(si, results)
}

// choice is, per address family and port of an import, the result whose
// clusters serve that traffic (the KEP makes eligibility per port and
// protocol, so each port chooses on its own); traffic not in it (or a nil
// choice) takes every source cluster.
type choice map[trafficKey]chosenResult

// trafficKey is one kind of traffic to an import: a port (name and
// protocol, TCP when unset, as an EndpointSlice's) of one address family.
type trafficKey struct {
	family   discoveryv1.AddressType
	port     string
	protocol v1.Protocol
}

// chosenResult is the index of the chosen result and its clusters.
type chosenResult struct {
	index    int
	clusters sets.Set[string]
}

// allowsPort tells whether port, one of slice's ports, is to be handed
// over with it: whether slice's cluster serves that port's traffic.
func (c choice) allowsPort(slice *discoveryv1.EndpointSlice, port discoveryv1.EndpointPort) bool {
	if len(c) == 0 {
		return true
	}
	r, ok := c[trafficKey{family: slice.AddressType, port: ptr.Deref(port.Name, ""), protocol: ptr.Deref(port.Protocol, v1.ProtocolTCP)}]
	return !ok || r.clusters.Has(slice.Labels[mcsv1beta1.LabelSourceCluster])
}

// allows tells whether slice is to be handed over at all: for one of its
// ports at least (a slice without ports serves nothing, and is).
func (c choice) allows(slice *discoveryv1.EndpointSlice) bool {
	if len(c) == 0 || len(slice.Ports) == 0 {
		return true
	}
	return slices.ContainsFunc(slice.Ports, func(port discoveryv1.EndpointPort) bool { return c.allowsPort(slice, port) })
}

// samePorts tells whether slice is handed over with the same ports under
// c and o.
func (c choice) samePorts(slice *discoveryv1.EndpointSlice, o choice) bool {
	for _, port := range slice.Ports {
		if c.allowsPort(slice, port) != o.allowsPort(slice, port) {
			return false
		}
	}
	return true
}

// handed returns what the Provider is to hold for slice, whose
// translation is translated, under c: the translation, or a copy with only
// the ports whose traffic slice's cluster serves (nil when slice is not
// allowed at all).
func (c choice) handed(slice, translated *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if translated == nil || !c.allows(slice) {
		return nil
	}
	n := 0
	for _, port := range slice.Ports {
		if c.allowsPort(slice, port) {
			n++
		}
	}
	if n == len(slice.Ports) {
		return translated
	}
	out := *translated
	out.Ports = make([]discoveryv1.EndpointPort, 0, n)
	for i, port := range slice.Ports {
		if c.allowsPort(slice, port) {
			out.Ports = append(out.Ports, translated.Ports[i])
		}
	}
	return &out
}

// handedOrStub is handed for a slice the Provider holds, from, whose
// translation (or stub, programmedTranslation) is translated: the stub
// names the slice whatever its ports.
func (c choice) handedOrStub(from, translated *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if len(translated.Ports) != len(from.Ports) {
		return translated
	}
	if h := c.handed(from, translated); h != nil {
		return h
	}
	return translated
}

func (c choice) equal(o choice) bool {
	if len(c) != len(o) {
		return false
	}
	for key, r := range c {
		if other, ok := o[key]; !ok || other.index != r.index || !other.clusters.Equal(r.clusters) {
			return false
		}
	}
	return true
}

// index is what the gauge kubeproxy_multicluster_cluster_selection_result
// shows: the latest result any traffic uses, AllClusters when all traffic
// takes every cluster.
func (c choice) index() int {
	latest := clusterselection.AllClusters
	for _, r := range c {
		latest = max(latest, r.index)
	}
	return latest
}

// locality is where a proxy runs, as a choice sees it: its node and its
// cluster's ID, each "" while unknown.
type locality struct{ node, cluster string }

// choose decides import st's choice, made at l: per address family and
// port, the first result with an eligible endpoint for that port and
// protocol that is ready or serving (clusterselection.Choose), or every
// cluster if none has; nil without results. The Provider is then handed
// each slice with only the ports its cluster serves (choice.handed). A
// pure function of the import, its slices and l.
func choose(st *importState, l locality) choice {
	if st.obj == nil || len(st.results) == 0 {
		return nil
	}
	// internalTrafficPolicy Local: only this node's endpoints are
	// eligible, and only this cluster's slices name this cluster's nodes
	// (another cluster may have a node of the same name).
	node := ""
	if itp := st.obj.Spec.InternalTrafficPolicy; itp != nil && *itp == v1.ServiceInternalTrafficPolicyLocal {
		node = "\x00" // no node: nothing is local
		if l.node != "" && l.cluster != "" {
			node = l.node
		}
	}
	var raw []*discoveryv1.EndpointSlice
	for _, s := range st.slices {
		if s.obj == nil || s.invalid != nil {
			continue
		}
		if node != "" && s.obj.Labels[mcsv1beta1.LabelSourceCluster] != l.cluster {
			continue
		}
		raw = append(raw, s.obj)
	}
	out := choice{}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		for _, port := range st.obj.Spec.Ports {
			key := trafficKey{family: family, port: port.Name, protocol: port.Protocol}
			if key.protocol == "" {
				key.protocol = v1.ProtocolTCP
			}
			i, clusters := clusterselection.Choose(st.results, raw, clusterselection.Traffic{
				PortName: key.port, Protocol: key.protocol, LocalNode: node, AddressType: family,
			})
			if i != clusterselection.AllClusters {
				out[key] = chosenResult{index: i, clusters: clusters}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// reselect decides import key's choice again, for an event that changed
// what it depends on (a slice, the cluster ID), and selects it.
func (im *importer) reselect(key types.NamespacedName) {
	if st := im.imports[key]; st != nil {
		var next choice
		if im.clusterSelection {
			next = im.choose(st)
		}
		im.selectChoice(key, st, next)
	}
}

// choose is choose for import st where this proxy runs, counted.
func (im *importer) choose(st *importState) choice {
	im.choices++
	l := locality{cluster: im.opts.LocalClusterID}
	if im.events.node != nil {
		l.node = im.events.node.Name
	}
	return choose(st, l)
}

// listingDone is called once the informers have delivered the first full
// state, before the first sync: every import chooses over all its slices
// and decides its native name over them, and from then on every slice's
// event decides again (importer.listed).
func (im *importer) listingDone() {
	im.listed = true
	for key, st := range im.imports {
		if im.clusterSelection {
			im.reselect(key)
		}
		im.reconcileNativeOf(key, st)
	}
}

// selectChoice makes next import key's choice and, if it changed, hands
// the Provider the slices that gain ports (joining ones among them), then
// those that gain and lose or stay (the event's own change), then those
// that lose ports (leaving ones among them), so that a sync in between
// sees a superset; and reports the change. It decides nothing: next is
// choose's.
func (im *importer) selectChoice(key types.NamespacedName, st *importState, next choice) {
	st.showSelection(key, next)
	if next.equal(st.chosen) {
		return
	}
	prev := st.chosen
	st.chosen = next
	var gaining, staying, losing []*sliceState
	for _, s := range st.slices {
		gained, lost := portChange(s, prev, next)
		switch {
		case gained && !lost:
			gaining = append(gaining, s)
		case lost && !gained:
			losing = append(losing, s)
		default:
			staying = append(staying, s)
		}
	}
	for _, s := range slices.Concat(gaining, staying, losing) {
		im.handOverSlice(s, st, nil, prev)
	}
	clusterSelectionChanges.WithLabelValues(selectionDirection(prev.index(), next.index())).Inc()
	if st.obj != nil && len(st.results) > 0 {
		im.events.selectionChanged(st.obj, prev.index(), next.index(), selectionChange(st.results, len(st.obj.Spec.Ports) > 1, prev, next), im.mcsSynced)
	}
}

// portChange tells whether slice s, handed over under prev, gains ports
// under next and whether it loses some (joining: it gains all of them;
// leaving, or gone: it loses all).
func portChange(s *sliceState, prev, next choice) (gained, lost bool) {
	if s.obj == nil || s.programmedFrom == nil {
		// Gone, or not handed over yet: a leave or a join, whatever the
		// choice (handOverSlice decides which).
		return s.programmedFrom == nil, s.programmedFrom != nil
	}
	for _, port := range s.obj.Ports {
		was, will := prev.allowsPort(s.obj, port), next.allowsPort(s.obj, port)
		gained = gained || will && !was
		lost = lost || was && !will
	}
	return gained, lost
}

// showSelection sets import key's gauge of the chosen result: only while
// the import has results, so that imports without cluster selection add
// no series. Called with the Proxier's lock held.
func (st *importState) showSelection(key types.NamespacedName, next choice) {
	reason := ""
	if st.obj != nil && len(st.results) > 0 {
		reason = selectionReason(next.index())
	}
	if reason != st.shownReason {
		// Every other reason's series goes, not only the one this
		// entry showed: an entry made again (the import deleted and
		// recreated, the proxier restarted) knows none it showed.
		for _, r := range selectionReasons {
			if r != reason {
				clusterSelectionResult.DeleteLabelValues(key.Namespace, key.Name, r)
			}
		}
	}
	if reason != "" {
		clusterSelectionResult.WithLabelValues(key.Namespace, key.Name, reason).Set(float64(next.index()))
	}
	st.shownReason = reason
}

// The reasons of the selection gauge.
const (
	reasonFirstResult           = "first_result"
	reasonEarlierResultsUnready = "earlier_results_unready"
	reasonNoResultReady         = "no_result_ready"
)

var selectionReasons = []string{reasonFirstResult, reasonEarlierResultsUnready, reasonNoResultReady}

// selectionReason says why the result of index i is the one chosen.
func selectionReason(i int) string {
	switch {
	case i == clusterselection.AllClusters:
		return reasonNoResultReady
	case i == 0:
		return reasonFirstResult
	}
	return reasonEarlierResultsUnready
}

// selectionDirection names a change of chosen result from index prev to
// next: every source cluster (AllClusters) comes after the last result.
func selectionDirection(prev, next int) string {
	rank := func(i int) int {
		if i == clusterselection.AllClusters {
			return math.MaxInt
		}
		return i
	}
	switch {
	case rank(next) > rank(prev):
		return "failover"
	case rank(next) < rank(prev):
		return "failback"
	}
	return "within"
}

// selectionChange says, for a user reading the import's events, what a
// change of choice was and why: per family (and port, for an import of
// several), from which result to which.
func selectionChange(results []csv1beta1.ClusterSelectorResult, perPort bool, prev, next choice) string {
	keys := sets.New[trafficKey]()
	for key := range prev {
		keys.Insert(key)
	}
	for key := range next {
		keys.Insert(key)
	}
	ordered := keys.UnsortedList()
	slices.SortFunc(ordered, func(a, b trafficKey) int {
		return cmp.Or(cmp.Compare(a.family, b.family), cmp.Compare(a.port, b.port), cmp.Compare(a.protocol, b.protocol))
	})
	var parts []string
	for _, key := range ordered {
		from, hadFrom := prev[key]
		to, hasTo := next[key]
		if !hadFrom {
			from.index = clusterselection.AllClusters
		}
		if !hasTo {
			to.index = clusterselection.AllClusters
		}
		if from.index == to.index && (!hadFrom || from.clusters.Equal(to.clusters)) {
			continue
		}
		traffic := string(key.family)
		if perPort {
			traffic = fmt.Sprintf("%s port %s/%s", key.family, key.port, key.protocol)
		}
		fromText := describeResult(from)
		changed := hadFrom && (from.index >= len(results) || !sets.New(results[from.index].Clusters...).Equal(from.clusters))
		switch {
		case changed:
			parts = append(parts, fmt.Sprintf("the cluster selector results changed; using %s for %s instead of %s", describeResult(to), traffic, fromText))
		case to.index == clusterselection.AllClusters:
			parts = append(parts, fmt.Sprintf("no result has a ready or serving endpoint for %s; using every source cluster instead of %s", traffic, fromText))
		case from.index == clusterselection.AllClusters || to.index < from.index:
			parts = append(parts, fmt.Sprintf("%s has a ready or serving endpoint for %s; using it instead of %s", describeResult(to), traffic, fromText))
		default:
			parts = append(parts, fmt.Sprintf("%s has no ready or serving endpoint for %s; using %s", fromText, traffic, describeResult(to)))
		}
	}
	return strings.Join(parts, "; ")
}

func describeResult(r chosenResult) string {
	if r.index == clusterselection.AllClusters {
		return "every source cluster"
	}
	return fmt.Sprintf("result %d (%s)", r.index, strings.Join(sets.List(r.clusters), ","))
}

// selectedImport is a v1beta1 import as the watcher caches it with
// cluster selection on: mcs-api's object and the KEP's results, which
// mcs-api's types do not have.
type selectedImport struct {
	*mcsv1beta1.ServiceImport
	results []csv1beta1.ClusterSelectorResult
}

// resultsOf returns the cluster selector results an informer object
// carries, if any.
func resultsOf(obj any) []csv1beta1.ClusterSelectorResult {
	if si, ok := obj.(*selectedImport); ok {
		return si.results
	}
	return nil
}

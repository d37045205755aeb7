package multicluster

import (
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/multiclusterservices/clusterselection"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Native names: an exporter may ask (mcsproxy.AnnotationNativeNames on the
// import) that a local Service of the import's name serve the import's
// remote endpoints too, always (RemoteAndLocal) or while its own fall short
// (LocalFirst). This proxier decides it on its own, from the slices it
// already watches: the import's remote endpoints are handed to the
// wrapped Provider inside the local Service's own slices (or as slices of
// that Service where none can carry them), or taken back, at every change
// of the local slices, the import or its slices. No API write is on that
// path, so failover and failback work while the mcs-controller is down.
//
// The decision is cluster selection (selection.go), made by the same
// functions: LocalFirst is the selector list [{cluster.clusterset.k8s.io
// In [@SameAsImporter@]}] resolved for this cluster and chosen with its
// minimum over the local Service's slices (this cluster's) and the
// import's remote ones, RemoteAndLocal no selector (every cluster)
// (mcsproxy.SelectForLocalService). What differs is where the choice goes:
// into the local Service's slices, not the import's synthetic Service's.

// nativeState is what the proxier holds for the native name of one
// Service namespace/name.
type nativeState struct {
	// local are the local Service's own slices, as delivered.
	local []*discoveryv1.EndpointSlice
	// carriers are the local slices handed to the Provider with remote
	// endpoints added (proxy.Carrying), by local slice name; the Provider
	// holds every other local slice as it came.
	carriers map[string]*carrier
	// joined are the import's slices handed to the Provider as slices of
	// the local Service on their own, by slice name: those no local slice
	// can carry (another address type or other ports), or all of them
	// when the Service has no slice of its own.
	joined map[string]*discoveryv1.EndpointSlice
	// strategy is the policy the remote endpoints were decided by.
	strategy mcsproxy.NativeNames
	// accepted: the local Service's owner accepts native names
	// (mcsproxy.AcceptsNativeNames); without it none are served.
	accepted bool
}

// setNativeNamesAccepted records whether local Service service takes
// native names, and decides its native name again when that changes.
func (im *importer) setNativeNamesAccepted(service *v1.Service, accepted bool) {
	key := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	st := im.native[key]
	if st == nil {
		if !accepted {
			return
		}
		st = &nativeState{}
		im.native[key] = st
	}
	if st.accepted == accepted {
		return
	}
	st.accepted = accepted
	im.reconcileNative(key)
}

// carrier is a local slice handed over with remote slices' endpoints, and
// what it was made of, so that an unchanged decision hands over the same
// object.
type carrier struct {
	obj    *discoveryv1.EndpointSlice
	local  *discoveryv1.EndpointSlice
	remote []*discoveryv1.EndpointSlice
}

// holds returns what the Provider holds for local, one of st's local
// slices.
func (st *nativeState) holds(local *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if c := st.carriers[local.Name]; c != nil {
		return c.obj
	}
	return local
}

func (st *nativeState) joinsRemote() bool { return len(st.carriers) > 0 || len(st.joined) > 0 }

// nativePlan is one decision for a local Service: what the Provider is to
// hold for it.
type nativePlan struct {
	key      types.NamespacedName
	strategy mcsproxy.NativeNames
	carriers map[string]*carrier
	joined   map[string]*discoveryv1.EndpointSlice
}

// localSliceChanged records a change of a local Service's slice (old or
// slice nil for an add or a delete), decides that Service's native name
// again, once the change is whole (an update decided in two halves would
// see the Service without the slice for a moment, and LocalFirst could
// fail over and back within one event), and hands the Provider the change
// (forwardLocal), its old and new objects being what the Provider holds and
// is to hold: the slice itself or the slice carrying remote endpoints.
// The remote endpoints ride in a local slice wherever one can carry them,
// so that a failover or failback is that one change; those that travel on
// their own are added before it and taken back after it (applyNative).
func (im *importer) localSliceChanged(old, slice *discoveryv1.EndpointSlice) {
	// A change names one Service, or two when a slice moves: buffers of
	// two, since every local slice of the cluster passes here.
	var ch localChange
	var keyBuf [2]types.NamespacedName
	var planBuf [2]nativePlan
	keys := keyBuf[:0]
	for i, s := range []*discoveryv1.EndpointSlice{old, slice} {
		if s == nil {
			continue
		}
		key := types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
		st := im.native[key]
		if st == nil {
			st = &nativeState{}
			im.native[key] = st
		}
		if i == 0 {
			ch.old = st.holds(old)
		} else {
			ch.cur, ch.curKey = slice, key
		}
		st.local = slices.DeleteFunc(st.local, func(x *discoveryv1.EndpointSlice) bool { return x.Name == s.Name })
		if i == 1 {
			st.local = append(st.local, slice)
		}
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	plans := planBuf[:0]
	for _, key := range keys {
		plans = append(plans, im.nativePlanOf(key))
	}
	im.applyNative(plans, &ch)
}

// localChange is a change of one local slice (at least one of old and cur
// is set): old is what the Provider holds for it before, cur the slice
// after (forwarded as the plan of curKey says).
type localChange struct {
	old, cur *discoveryv1.EndpointSlice
	curKey   types.NamespacedName
}

// reconcileNative decides the native name of Service key again after a
// change of its import or of the import's slices.
func (im *importer) reconcileNative(key types.NamespacedName) {
	im.reconcileNativeOf(key, im.imports[key])
}

// reconcileNativeOf is reconcileNative for a caller that holds imp, the
// entry of import key (nil: none), and so spares a lookup.
func (im *importer) reconcileNativeOf(key types.NamespacedName, imp *importState) {
	if im.native[key] == nil && !asksNativeNames(imp) {
		// No local Service of that name and nothing asked or reported:
		// the decision is "nothing", as it was (most imports, at every
		// change of their slices).
		return
	}
	im.applyNative([]nativePlan{im.nativePlanOf(key)}, nil)
}

// asksNativeNames tells whether import st says anything of native names,
// or has had a native-names error reported that may need clearing.
func asksNativeNames(st *importState) bool {
	if st == nil || st.obj == nil {
		return false
	}
	_, strategy := st.obj.Annotations[mcsproxy.AnnotationNativeNames]
	_, minimum := st.obj.Annotations[mcsproxy.AnnotationLocalFirstMinimum]
	return strategy || minimum || st.nativeReported != ""
}

// nativePlanOf is planNative for the local Service key as it stands,
// under the policy of the import of its name.
func (im *importer) nativePlanOf(key types.NamespacedName) nativePlan {
	im.nativePlans++
	policy, remote := im.nativePolicy(key)
	return planNative(key, policy, remote, im.native[key], im.opts.LocalClusterID)
}

// planNative decides what the Provider is to hold for the local Service
// key of cluster localCluster, which holds st (nil: nothing yet): the
// import's remote slices that policy selects, each carried by a local
// slice that can (the one carrying it already, if it still can, so that
// endpoints do not move between slices), else on its own. A pure
// function.
func planNative(key types.NamespacedName, policy mcsproxy.NativeNamesPolicy, remote []clusterselection.Source, st *nativeState, localCluster string) nativePlan {
	plan := nativePlan{key: key, strategy: policy.Strategy}
	if policy.Strategy == mcsproxy.NativeNamesOff {
		return plan
	}
	var local []*discoveryv1.EndpointSlice
	if st != nil {
		local = st.local
	}
	selected := mcsproxy.SelectForLocalService(policy, localCluster, local, remote)[len(local):]
	carriedBy := map[string]string{} // remote slice name -> local slice name
	if st != nil {
		for name, c := range st.carriers {
			for _, r := range c.remote {
				carriedBy[r.Name] = name
			}
		}
	}
	byLocal := map[string][]*discoveryv1.EndpointSlice{}
	for _, r := range selected {
		l := slices.IndexFunc(local, func(l *discoveryv1.EndpointSlice) bool {
			return l.Name == carriedBy[r.Name] && mcsproxy.CanCarry(l, r)
		})
		if l < 0 {
			l = slices.IndexFunc(local, func(l *discoveryv1.EndpointSlice) bool { return mcsproxy.CanCarry(l, r) })
		}
		if l < 0 {
			if plan.joined == nil {
				plan.joined = map[string]*discoveryv1.EndpointSlice{}
			}
			plan.joined[r.Name] = r
			continue
		}
		byLocal[local[l].Name] = append(byLocal[local[l].Name], r)
	}
	for _, l := range local {
		carried := byLocal[l.Name]
		if len(carried) == 0 {
			continue
		}
		if plan.carriers == nil {
			plan.carriers = map[string]*carrier{}
		}
		if c := st.carriers[l.Name]; c != nil && c.local == l && slices.Equal(c.remote, carried) {
			plan.carriers[l.Name] = c
			continue
		}
		plan.carriers[l.Name] = &carrier{obj: mcsproxy.Carrying(l, carried), local: l, remote: carried}
	}
	return plan
}

// applyNative hands the Provider what plans decide, with the local change
// ch (if any) in the middle: first what adds endpoints (remote slices that
// join on their own, local slices that come to carry more), then the
// change, then what takes endpoints back (local slices that carry fewer,
// remote slices that leave). A sync of the proxier between any two calls
// thus sees a superset of the endpoints before and after, never a Service
// left without them.
func (im *importer) applyNative(plans []nativePlan, ch *localChange) {
	// pending is a local slice whose final form waits for the last phase,
	// and what the Provider holds for it until then.
	type pending struct{ held, want *discoveryv1.EndpointSlice }
	var after []pending
	for _, plan := range plans {
		st := im.native[plan.key]
		if st == nil {
			if plan.joined == nil {
				continue
			}
			// A Service with no slice of its own (selector-less, as the
			// controller creates them where a member had none) still gets
			// the import's endpoints.
			st = &nativeState{}
			im.native[plan.key] = st
		}
		for name, s := range plan.joined {
			switch have, ok := st.joined[name]; {
			case !ok:
				im.provider.OnEndpointSliceAdd(s)
			case have != s:
				im.provider.OnEndpointSliceUpdate(have, s)
			}
		}
		for _, l := range st.local {
			if ch != nil && ch.cur == l {
				continue // the change, delivered in the middle
			}
			was, will := st.carriers[l.Name], plan.carriers[l.Name]
			held, want := l, l
			if was != nil {
				held = was.obj
			}
			if will != nil {
				want = will.obj
			}
			if held == want {
				continue
			}
			gained, lost := carriedDifference(was, will)
			switch {
			case !lost:
				im.provider.OnEndpointSliceUpdate(held, want)
			case gained:
				// Some remote endpoints come, others go: the union
				// first, the final form after the change.
				union := slices.Clone(will.remote)
				for _, r := range was.remote {
					if !slices.ContainsFunc(union, func(u *discoveryv1.EndpointSlice) bool { return u.Name == r.Name }) {
						union = append(union, r)
					}
				}
				both := mcsproxy.Carrying(l, union)
				im.provider.OnEndpointSliceUpdate(held, both)
				after = append(after, pending{held: both, want: want})
			default:
				after = append(after, pending{held: held, want: want})
			}
		}
	}
	if ch != nil {
		cur := ch.cur
		if cur != nil {
			if c := planOf(plans, ch.curKey).carriers[cur.Name]; c != nil {
				cur = c.obj
			}
		}
		im.forwardLocal(ch.old, cur)
	}
	for _, u := range after {
		im.provider.OnEndpointSliceUpdate(u.held, u.want)
	}
	for _, plan := range plans {
		st := im.native[plan.key]
		if st == nil {
			continue
		}
		joinedBefore, strategyBefore := st.joinsRemote(), st.strategy
		for name, s := range st.joined {
			if _, ok := plan.joined[name]; !ok {
				im.provider.OnEndpointSliceDelete(s)
			}
		}
		st.carriers, st.joined, st.strategy = plan.carriers, plan.joined, plan.strategy
		countNative(joinedBefore, strategyBefore, st.joinsRemote(), plan.strategy)
		if len(st.local) == 0 && len(st.joined) == 0 && !st.accepted {
			delete(im.native, plan.key)
		}
	}
}

// carriedDifference tells whether a local slice carrying will's remote
// slices instead of was's gains remote slices and whether it loses some
// (a remote slice that changed content is neither).
func carriedDifference(was, will *carrier) (gained, lost bool) {
	names := func(c *carrier) []string {
		if c == nil {
			return nil
		}
		out := make([]string, 0, len(c.remote))
		for _, r := range c.remote {
			out = append(out, r.Name)
		}
		return out
	}
	before, now := names(was), names(will)
	for _, n := range now {
		gained = gained || !slices.Contains(before, n)
	}
	for _, n := range before {
		lost = lost || !slices.Contains(now, n)
	}
	return gained, lost
}

func planOf(plans []nativePlan, key types.NamespacedName) *nativePlan {
	for i := range plans {
		if plans[i].key == key {
			return &plans[i]
		}
	}
	return &nativePlan{}
}

// nativePolicy returns the native-names policy of import key and its
// remote slices as slices of the local Service. Off when there is no valid
// import, when the import does not own its own clusterset IPs here (it
// lost them to a local Service or an older import: an import refused its
// own IPs is not trusted to add endpoints to a Service either), when it
// asks for nothing or asks wrongly or for a system Service (reported on
// the import), and while this cluster's ID is unknown: the import's slices
// of this very cluster would then count twice, beside the local Service's
// own.
func (im *importer) nativePolicy(key types.NamespacedName) (mcsproxy.NativeNamesPolicy, []clusterselection.Source) {
	imp := im.imports[key]
	if imp == nil || imp.obj == nil || imp.invalid != nil || im.opts.LocalClusterID == "" || im.claims.decide(&imp.claim) != nil {
		return mcsproxy.NativeNamesPolicy{}, nil
	}
	policy, err := mcsproxy.NativeNamesOf(imp.obj.Annotations)
	switch {
	case err != nil || policy.Strategy == mcsproxy.NativeNamesOff:
	case mcsproxy.SystemService(key.Namespace, key.Name):
		err = &mcsproxy.RejectionError{Reason: mcsproxy.ReasonSystemService, Message: fmt.Sprintf("native names are never served for the system Service %s", key)}
	case im.native[key] == nil || !im.native[key].accepted:
		// No local Service of the name, or one whose owner did not
		// accept native names: nobody's Service is joined by endpoints
		// someone else chose. (Where the cluster has none, the
		// mcs-controller creates one, which accepts them.)
		err = &mcsproxy.RejectionError{Reason: mcsproxy.ReasonNativeNamesNotAccepted,
			Message: fmt.Sprintf("local Service %s does not accept native names: its owner sets annotation %s=\"true\" to have the import's remote endpoints join it", key, mcsproxy.AnnotationAcceptNativeNames)}
	}
	if err != nil {
		if imp.nativeReported != err.Error() {
			imp.nativeReported = err.Error()
			var r *mcsproxy.RejectionError
			if !errors.As(err, &r) {
				r = &mcsproxy.RejectionError{Reason: mcsproxy.ReasonInvalidNativeNames, Message: err.Error()}
			}
			im.events.report(rejection{kind: kindServiceImport, obj: imp.obj, RejectionError: r})
		}
		return mcsproxy.NativeNamesPolicy{}, nil
	}
	imp.nativeReported = ""
	if policy.Strategy == mcsproxy.NativeNamesOff {
		return policy, nil
	}
	var remote []clusterselection.Source
	for _, ss := range im.imports.slicesOf(key) {
		cluster := ""
		if ss.obj != nil {
			cluster = ss.obj.Labels[mcsv1beta1.LabelSourceCluster]
		}
		if ss.obj == nil || ss.invalid != nil || cluster == im.opts.LocalClusterID {
			continue
		}
		if ss.native == nil || ss.native.from != ss.obj || ss.native.gen != im.optsGen {
			// One copy per slice and options, so that an unchanged slice
			// is the same object at every decision.
			translated := im.translationOf(ss, nil)
			if translated == nil {
				continue
			}
			native := *translated
			native.Labels = im.imports.nativeLabelsOf(key)
			ss.native = &nativeCopy{slice: &native, from: ss.obj, gen: im.optsGen}
		}
		remote = append(remote, clusterselection.Source{Cluster: cluster, Slice: ss.native.slice})
	}
	return policy, remote
}

// countNative keeps the native-names metrics from one decision: whether a
// local Service was joined by other clusters' endpoints before and after
// it, and under which strategy. A LocalFirst decision that changes it,
// the strategy staying LocalFirst, is a failover or a failback.
func countNative(before bool, strategyBefore mcsproxy.NativeNames, after bool, strategy mcsproxy.NativeNames) {
	if before {
		nativeNamesServices.WithLabelValues(string(strategyBefore)).Dec()
	}
	if after {
		nativeNamesServices.WithLabelValues(string(strategy)).Inc()
	}
	if strategy == mcsproxy.LocalFirst && strategyBefore == mcsproxy.LocalFirst && before != after {
		direction := "failback"
		if after {
			direction = "failover"
		}
		localFirstSwitchesTotal.WithLabelValues(direction).Inc()
	}
}

// forwardLocal hands the Provider a change of a local Service's slice.
func (im *importer) forwardLocal(old, cur *discoveryv1.EndpointSlice) {
	switch {
	case old == nil:
		im.provider.OnEndpointSliceAdd(cur)
	case cur == nil:
		im.provider.OnEndpointSliceDelete(old)
	default:
		im.provider.OnEndpointSliceUpdate(old, cur)
	}
}

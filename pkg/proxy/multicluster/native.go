package multicluster

import (
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Native names: an exporter may ask (mcsproxy.AnnotationNativeNames on the
// import) that a local Service of the import's name serve the import's
// remote endpoints too, always (RemoteAndLocal) or while its own fall short
// (LocalFirst). This proxier decides it on its own, from the slices it
// already watches: the import's remote slices are handed to the wrapped
// Provider as slices of the local Service, or taken back, at every change
// of the local slices, the import or its slices. No API write is on that
// path, so failover and failback work while the mcs-controller is down.

// nativeState is what the proxier holds for the native name of one
// Service namespace/name.
type nativeState struct {
	// local are the local Service's own slices, as delivered.
	local []*discoveryv1.EndpointSlice
	// joined are the import's slices handed to the Provider as slices of
	// the local Service, by slice name.
	joined map[string]*discoveryv1.EndpointSlice
	// strategy is the policy joined was decided by.
	strategy mcsproxy.NativeNames
}

// localSliceChanged records a change of a local Service's slice (old or
// slice nil for an add or a delete) and decides that Service's native name
// again, once the change is whole: an update decided in two halves would
// see the Service without the slice for a moment, and LocalFirst could
// fail over and back within one event. forward hands the change itself to
// the Provider, between the import's slices the decision adds and those it
// takes back (reconcileNative), so that a sync of the proxier between the
// calls never finds the Service with fewer endpoints than both before and
// after: on failover the remote endpoints are there before the local one
// leaves, on failback the local one is back before they go.
func (p *Proxier) localSliceChanged(old, slice *discoveryv1.EndpointSlice, forward func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keys []types.NamespacedName
	for _, s := range []*discoveryv1.EndpointSlice{old, slice} {
		if s == nil {
			continue
		}
		key := types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
		st := p.native[key]
		if st == nil {
			st = &nativeState{}
			p.native[key] = st
		}
		st.local = slices.DeleteFunc(st.local, func(x *discoveryv1.EndpointSlice) bool { return x.Name == s.Name })
		if s == slice {
			st.local = append(st.local, slice)
		}
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	for _, key := range keys {
		p.reconcileNativeAround(key, forward)
		forward = nil
	}
	if forward != nil {
		forward()
	}
}

// reconcileNative hands the Provider, as slices of the local Service key,
// the import key's remote slices that its policy selects, and takes back
// the others. Called with p.mu held.
func (p *Proxier) reconcileNative(key types.NamespacedName) { p.reconcileNativeAround(key, nil) }

// reconcileNativeAround is reconcileNative with a change of the local
// Service's own slices, around (if not nil), delivered between the slices
// added, first, and those taken back, last: a sync in between sees a
// superset of the endpoints before and after, never a Service left
// without them.
func (p *Proxier) reconcileNativeAround(key types.NamespacedName, around func()) {
	policy, remote := p.nativePolicy(key)
	st := p.native[key]
	if st == nil {
		if policy.Strategy == mcsproxy.NativeNamesOff {
			// Nothing held, nothing wanted: most imports and slices.
			if around != nil {
				around()
			}
			return
		}
		// A Service with no slice of its own (selector-less, as the
		// controller creates them where a member had none) still gets the
		// import's endpoints.
		st = &nativeState{}
		p.native[key] = st
	}
	joinedBefore, strategyBefore := len(st.joined) > 0, st.strategy
	defer func() { countNative(joinedBefore, strategyBefore, len(st.joined) > 0, policy.Strategy) }()
	st.strategy = policy.Strategy
	want := map[string]*discoveryv1.EndpointSlice{}
	if policy.Strategy != mcsproxy.NativeNamesOff {
		selected := mcsproxy.SelectForLocalService(policy, st.local, remote)
		for _, s := range selected[len(st.local):] {
			want[s.Name] = s
		}
	}
	for name, s := range want {
		switch have, ok := st.joined[name]; {
		case !ok:
			p.Provider.OnEndpointSliceAdd(s)
		case have != s:
			p.Provider.OnEndpointSliceUpdate(have, s)
		default:
			continue
		}
		if st.joined == nil {
			st.joined = map[string]*discoveryv1.EndpointSlice{}
		}
		st.joined[name] = s
	}
	if around != nil {
		around()
	}
	for name, s := range st.joined {
		if _, ok := want[name]; !ok {
			p.Provider.OnEndpointSliceDelete(s)
			delete(st.joined, name)
		}
	}
	if len(st.local) == 0 && len(st.joined) == 0 {
		delete(p.native, key)
	}
}

// nativePolicy returns the native-names policy of import key and its
// remote slices as slices of the local Service. Off when there is no valid
// import, when it asks for nothing or asks wrongly (reported on the
// import), and while this cluster's ID is unknown: the import's slices of
// this very cluster would then count twice, beside the local Service's
// own.
func (p *Proxier) nativePolicy(key types.NamespacedName) (mcsproxy.NativeNamesPolicy, []*discoveryv1.EndpointSlice) {
	imp := p.imports[key]
	if imp == nil || imp.obj == nil || imp.invalid != nil || p.opts.LocalClusterID == "" {
		return mcsproxy.NativeNamesPolicy{}, nil
	}
	policy, err := mcsproxy.NativeNamesOf(imp.obj.Annotations)
	if err != nil {
		if imp.nativeReported != err.Error() {
			imp.nativeReported = err.Error()
			p.report(rejection{kind: kindServiceImport, obj: imp.obj, RejectionError: &mcsproxy.RejectionError{Reason: mcsproxy.ReasonInvalidNativeNames, Message: err.Error()}})
		}
		return mcsproxy.NativeNamesPolicy{}, nil
	}
	imp.nativeReported = ""
	if policy.Strategy == mcsproxy.NativeNamesOff {
		return policy, nil
	}
	var remote []*discoveryv1.EndpointSlice
	for _, sliceKey := range p.slicesOf(key) {
		ss := p.slices[sliceKey]
		if ss == nil || ss.obj == nil || ss.invalid != nil || ss.obj.Labels[mcsv1beta1.LabelSourceCluster] == p.opts.LocalClusterID {
			continue
		}
		if ss.nativeFrom != ss.obj || ss.nativeGen != p.optsGen {
			// One copy per slice and options, so that an unchanged slice
			// is the same object at every decision.
			translated := p.translationOf(ss)
			if translated == nil {
				continue
			}
			native := *translated
			native.Labels = p.nativeLabelsOf(key)
			ss.native, ss.nativeFrom, ss.nativeGen = &native, ss.obj, p.optsGen
		}
		remote = append(remote, ss.native)
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

package multicluster

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/clusterselection"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Cluster selection (KEP-5939, gate MultiClusterServiceClusterSelection):
// the mcs-controller publishes, in each import's status, the source
// clusters each of its selectors matches for this cluster; this proxier
// gives the import's clusterset IPs the endpoints of the first result that
// has a usable endpoint (clusterselection.Choose), per address family, and
// of every source cluster when none has. The choice is made again at every
// change of the import or its slices, from the slices it already holds:
// no API write is on the failover path. A change of choice hands the
// Provider the slices that join before those that leave, so that a sync
// in between sees a superset and no live connection loses its endpoint to
// a half-made change.

// SetClusterSelection turns cluster selection on (the gate); off, results
// are ignored and every source cluster serves.
func (p *Proxier) SetClusterSelection(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clusterSelection = on
}

// OnServiceImportSelected records a ServiceImport with its cluster
// selector results (status.clusterSelectorResults, read by the watcher
// beside mcs-api's fields).
func (p *Proxier) OnServiceImportSelected(si *mcsv1beta1.ServiceImport, results []csv1beta1.ClusterSelectorResult) {
	p.upsertImport(si, results)
}

// choice is the result an import's endpoints come from, per address
// family; a family not in it (or a nil choice) takes every source cluster.
type choice map[discoveryv1.AddressType]chosenResult

// chosenResult is the index of the chosen result and its clusters.
type chosenResult struct {
	index    int
	clusters sets.Set[string]
}

func (c choice) allows(slice *discoveryv1.EndpointSlice) bool {
	r, ok := c[slice.AddressType]
	return !ok || r.clusters.Has(slice.Labels[mcsv1beta1.LabelSourceCluster])
}

func (c choice) equal(o choice) bool {
	if len(c) != len(o) {
		return false
	}
	for family, r := range c {
		if other, ok := o[family]; !ok || other.index != r.index || !other.clusters.Equal(r.clusters) {
			return false
		}
	}
	return true
}

// index is what the gauge kubeproxy_multicluster_cluster_selection_result
// shows: the latest result any family uses, AllClusters when every family
// takes every cluster.
func (c choice) index() int {
	latest := clusterselection.AllClusters
	for _, r := range c {
		latest = max(latest, r.index)
	}
	return latest
}

// choose decides import st's choice. One choice serves all the import's
// ports (the Provider gets whole slices): the KEP makes eligibility per
// port and protocol, so each port chooses, and the import takes the
// latest result any port needs (every port then has a usable endpoint
// where results widen, as locality ones do), or every cluster if a port
// finds none. Called with p.mu held.
func (p *Proxier) choose(st *importState) choice {
	if !p.clusterSelection || st.obj == nil || len(st.results) == 0 {
		return nil
	}
	// internalTrafficPolicy Local: only this node's endpoints are
	// eligible, and only this cluster's slices name this cluster's nodes
	// (another cluster may have a node of the same name).
	node := ""
	if itp := st.obj.Spec.InternalTrafficPolicy; itp != nil && *itp == v1.ServiceInternalTrafficPolicyLocal {
		node = "\x00" // no node: nothing is local
		if p.node != nil && p.opts.LocalClusterID != "" {
			node = p.node.Name
		}
	}
	var raw []*discoveryv1.EndpointSlice
	for _, s := range st.slices {
		if s.obj == nil || s.invalid != nil {
			continue
		}
		if node != "" && s.obj.Labels[mcsv1beta1.LabelSourceCluster] != p.opts.LocalClusterID {
			continue
		}
		raw = append(raw, s.obj)
	}
	out := choice{}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		latest := -1
		var chosen sets.Set[string]
		for _, port := range st.obj.Spec.Ports {
			i, clusters := clusterselection.Choose(st.results, raw, clusterselection.Traffic{
				PortName: port.Name, Protocol: port.Protocol, LocalNode: node, AddressType: family,
			})
			if i == clusterselection.AllClusters {
				chosen = nil
				break
			}
			if i > latest || chosen == nil {
				latest, chosen = i, clusters
			}
		}
		if chosen != nil {
			out[family] = chosenResult{index: latest, clusters: chosen}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// reselect decides import key's choice again and, if it changed, hands
// the Provider the slices that join, then those that leave, and reports
// the change. Called with p.mu held.
func (p *Proxier) reselect(key types.NamespacedName) {
	st := p.imports[key]
	if st == nil {
		return
	}
	next := p.choose(st)
	p.showSelection(key, st, next)
	if next.equal(st.chosen) {
		return
	}
	prev := st.chosen
	st.chosen = next
	// Joining slices, then those that stay (the event's own change), then
	// leaving ones.
	var staying, leaving []*sliceState
	for _, s := range st.slices {
		switch {
		case s.programmedFrom == nil:
			p.reconcileSlice(s, nil)
		case s.obj != nil && !next.allows(s.obj):
			leaving = append(leaving, s)
		default:
			staying = append(staying, s)
		}
	}
	for _, s := range append(staying, leaving...) {
		p.reconcileSlice(s, nil)
	}
	clusterSelectionChanges.Inc()
	if st.obj != nil && len(st.results) > 0 {
		p.reportSelectionChanged(st.obj, prev.index(), next.index(), selectionChange(st.results, prev, next))
	}
}

// showSelection sets import key's gauge of the chosen result: only while
// the import has results, so that imports without cluster selection add
// no series. Called with p.mu held.
func (p *Proxier) showSelection(key types.NamespacedName, st *importState, next choice) {
	if st.obj == nil || len(st.results) == 0 {
		clusterSelectionResult.DeleteLabelValues(key.Namespace, key.Name)
		return
	}
	clusterSelectionResult.WithLabelValues(key.Namespace, key.Name).Set(float64(next.index()))
}

// selectionChange says, for a user reading the import's events, what a
// change of choice was and why: per family, from which result to which.
func selectionChange(results []csv1beta1.ClusterSelectorResult, prev, next choice) string {
	var parts []string
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		from, hadFrom := prev[family]
		to, hasTo := next[family]
		if !hadFrom {
			from.index = clusterselection.AllClusters
		}
		if !hasTo {
			to.index = clusterselection.AllClusters
		}
		if from.index == to.index && (!hadFrom || from.clusters.Equal(to.clusters)) {
			continue
		}
		fromText := describeResult(from)
		changed := hadFrom && (from.index >= len(results) || !sets.New(results[from.index].Clusters...).Equal(from.clusters))
		switch {
		case changed:
			parts = append(parts, fmt.Sprintf("the cluster selector results changed; using %s for %s instead of %s", describeResult(to), family, fromText))
		case to.index == clusterselection.AllClusters:
			parts = append(parts, fmt.Sprintf("no result has a ready or serving endpoint for %s; using every source cluster instead of %s", family, fromText))
		case from.index == clusterselection.AllClusters || to.index < from.index:
			parts = append(parts, fmt.Sprintf("%s has a ready or serving endpoint for %s; using it instead of %s", describeResult(to), family, fromText))
		default:
			parts = append(parts, fmt.Sprintf("%s has no ready or serving endpoint for %s; using %s", fromText, family, describeResult(to)))
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

// selectedImportInformer returns an informer of v1beta1 ServiceImports
// read whole (dynamic client), each cached as a selectedImport: what keep
// keeps of mcs-api's object, and the results.
func selectedImportInformer(client dynamic.Interface, resync time.Duration, keep cache.TransformFunc) (dynamicinformer.DynamicSharedInformerFactory, cache.SharedIndexInformer) {
	f := dynamicinformer.NewDynamicSharedInformerFactory(client, resync)
	inf := f.ForResource(mcsv1beta1.SchemeGroupVersion.WithResource(mcsv1beta1.ServiceImportPluralName)).Informer()
	_ = inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		si := &mcsv1beta1.ServiceImport{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, si); err != nil {
			return nil, err
		}
		overlay := &csv1beta1.ServiceImport{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, overlay); err != nil {
			return nil, err
		}
		if _, err := keep(si); err != nil {
			return nil, err
		}
		return &selectedImport{ServiceImport: si, results: overlay.Status.ClusterSelectorResults}, nil
	})
	return f, inf
}

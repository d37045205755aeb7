package multicluster

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
)

// Story 1 of KEP-5939 as cluster-b (eu, with cluster-a) sees it: itself,
// then its region, then (no result) every cluster.
var storyResults = []csv1beta1.ClusterSelectorResult{
	{Clusters: []string{"cluster-b"}},
	{Clusters: []string{"cluster-a", "cluster-b"}},
}

func unready(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	for i := range s.Endpoints {
		no := false
		s.Endpoints[i].Conditions.Ready = &no
		s.Endpoints[i].Conditions.Serving = &no
	}
	return s
}

// TestClusterSelectionFailoverAndBack: the clusterset IP gets the first
// result with a ready endpoint; losing the last one moves to the next
// result, joining slices first and leaving ones after (a sync in between
// sees a superset); with no result left, every cluster; back again when
// they return. Each failover is one decision, counted.
func TestClusterSelectionFailoverAndBack(t *testing.T) {
	f, _ := syncedSelectionFixture(t)
	p := f.proxier
	DeliverSlice(p, mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1"))
	DeliverSlice(p, mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"))
	DeliverSlice(p, mcsSlice("ns", "api-c", "api", "cluster-c", "10.3.0.1"))
	si := serviceImport("ns", "api", 0, "10.250.0.10")
	p.OnServiceImportSelected(si, storyResults)
	f.expectCalls("SliceAdd ns/api-b", "ServiceAdd ns/api.clusterset")
	changes := func() map[string]float64 {
		out := map[string]float64{}
		for _, d := range []string{"failover", "failback", "within"} {
			out[d], _ = testutil.GetCounterMetricValue(clusterSelectionChanges.WithLabelValues(d))
		}
		return out
	}
	before := changes()

	// Own cluster down: the region; cluster-a joins before cluster-b's
	// unready slice is handed over.
	DeliverSlice(p, unready(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1")))
	f.expectCalls("SliceAdd ns/api-a", "SliceUpdate ns/api-b")
	if got := f.provider.readyOf("ns/api.clusterset"); len(got) != 1 || got[0] != "10.1.0.1" {
		t.Errorf("ready endpoints %v, want cluster-a's", got)
	}

	// The region down too: every cluster.
	DeliverSlice(p, unready(mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1")))
	f.expectCalls("SliceAdd ns/api-c", "SliceUpdate ns/api-a")

	// Own cluster back: only it; the others leave after its change.
	DeliverSlice(p, mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"))
	f.expectCalls("SliceUpdate ns/api-b", "SliceDelete ns/api-a", "SliceDelete ns/api-c")
	if got := f.provider.endpointsOf("ns/api.clusterset"); len(got) != 1 || got[0] != "10.2.0.1" {
		t.Errorf("endpoints %v, want cluster-b's only", got)
	}
	after := changes()
	// Own cluster to the region, the region to every cluster: two
	// failovers; every cluster to own cluster: one failback.
	if got := map[string]float64{"failover": after["failover"] - before["failover"], "failback": after["failback"] - before["failback"], "within": after["within"] - before["within"]}; !maps.Equal(got, map[string]float64{"failover": 2, "failback": 1, "within": 0}) {
		t.Errorf("changes counted %v, want two failovers and one failback", got)
	}

	// New results (a property changed): decided at once.
	moved := si.DeepCopy()
	moved.ResourceVersion = "2"
	p.OnServiceImportSelected(moved, []csv1beta1.ClusterSelectorResult{{Clusters: []string{"cluster-c"}}})
	f.expectCalls("SliceAdd ns/api-c", "SliceDelete ns/api-b")

	// No results: every cluster, as without cluster selection.
	none := moved.DeepCopy()
	none.ResourceVersion = "3"
	p.OnServiceImportSelected(none, nil)
	f.expectCalls("SliceAdd ns/api-a", "SliceAdd ns/api-b")
}

// internalTrafficPolicy Local: only this cluster's endpoints on this node
// count, never another cluster's on a node of the same name.
func TestClusterSelectionInternalTrafficPolicyLocal(t *testing.T) {
	f, _ := syncedSelectionFixture(t)
	p := f.proxier
	p.SetNode(&v1.ObjectReference{Kind: "Node", Name: "node-1"})
	p.SetLocalClusterID("cluster-b")
	onNode := func(s *discoveryv1.EndpointSlice, node string) *discoveryv1.EndpointSlice {
		s.Endpoints[0].NodeName = &node
		return s
	}
	DeliverSlice(p, onNode(mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1"), "node-1"))
	DeliverSlice(p, onNode(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"), "node-2"))
	si := serviceImport("ns", "api", 0, "10.250.0.10")
	local := v1.ServiceInternalTrafficPolicyLocal
	si.Spec.InternalTrafficPolicy = &local
	p.OnServiceImportSelected(si, []csv1beta1.ClusterSelectorResult{{Clusters: []string{"cluster-a"}}, {Clusters: []string{"cluster-b"}}})
	// Neither result has an endpoint on this node of this cluster: all.
	f.expectCalls("SliceAdd ns/api-a", "SliceAdd ns/api-b", "ServiceAdd ns/api.clusterset")
	DeliverSlice(p, onNode(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"), "node-1"))
	f.expectCalls("SliceUpdate ns/api-b", "SliceDelete ns/api-a")
}

// TestChoose is the choice alone, a pure function of an import, its
// slices and where the proxy runs: per port, the first result with a
// ready endpoint; every cluster (no entry) when none has one or there
// are no results; with internalTrafficPolicy Local, only this cluster's
// endpoints on this node count, and none while the node or the cluster
// is unknown.
func TestChoose(t *testing.T) {
	onNode := func(s *discoveryv1.EndpointSlice, node string) *discoveryv1.EndpointSlice {
		s.Endpoints[0].NodeName = &node
		return s
	}
	local := func(si *mcsv1beta1.ServiceImport) *mcsv1beta1.ServiceImport {
		itp := v1.ServiceInternalTrafficPolicyLocal
		si.Spec.InternalTrafficPolicy = &itp
		return si
	}
	http := trafficKey{family: discoveryv1.AddressTypeIPv4, port: "http", protocol: v1.ProtocolTCP}
	here := locality{node: "node-1", cluster: "cluster-b"}
	for _, tc := range []struct {
		name    string
		si      *mcsv1beta1.ServiceImport
		results []csv1beta1.ClusterSelectorResult
		slices  []*discoveryv1.EndpointSlice
		at      locality
		// want is the chosen result's index, -1 for every cluster.
		want int
	}{
		{name: "no results: every cluster", si: serviceImport("ns", "api", 0), want: -1,
			slices: []*discoveryv1.EndpointSlice{mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1")}, at: here},
		{name: "the first result has a ready endpoint", si: serviceImport("ns", "api", 0), results: storyResults, want: 0,
			slices: []*discoveryv1.EndpointSlice{mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1"), mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1")}, at: here},
		{name: "the first result's endpoints are not ready: the second", si: serviceImport("ns", "api", 0), results: storyResults, want: 1,
			slices: []*discoveryv1.EndpointSlice{mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1"), unready(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"))}, at: here},
		{name: "no result has a ready endpoint: every cluster", si: serviceImport("ns", "api", 0), results: storyResults, want: -1,
			slices: []*discoveryv1.EndpointSlice{unready(mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1")), unready(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"))}, at: here},
		{name: "Local: this cluster's endpoint on this node", si: local(serviceImport("ns", "api", 0)), results: storyResults, want: 0,
			slices: []*discoveryv1.EndpointSlice{onNode(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"), "node-1")}, at: here},
		{name: "Local: another cluster's node of the same name is not this node", si: local(serviceImport("ns", "api", 0)), results: storyResults, want: -1,
			slices: []*discoveryv1.EndpointSlice{onNode(mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1"), "node-1"), onNode(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"), "node-2")}, at: here},
		{name: "Local: the node unknown, nothing is local", si: local(serviceImport("ns", "api", 0)), results: storyResults, want: -1,
			slices: []*discoveryv1.EndpointSlice{onNode(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"), "node-1")}, at: locality{cluster: "cluster-b"}},
		{name: "Local: the cluster ID unknown, nothing is local", si: local(serviceImport("ns", "api", 0)), results: storyResults, want: -1,
			slices: []*discoveryv1.EndpointSlice{onNode(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"), "node-1")}, at: locality{node: "node-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &importState{obj: tc.si, results: tc.results}
			for _, s := range tc.slices {
				st.slices = append(st.slices, &sliceState{obj: s})
			}
			got := choose(st, tc.at)
			if tc.want < 0 {
				if got != nil {
					t.Errorf("choose: %v, want every cluster (nil)", got)
				}
				return
			}
			r, ok := got[http]
			if !ok || r.index != tc.want || len(got) != 1 {
				t.Errorf("choose: %v, want result %d for %v only", got, tc.want, http)
			} else if want := tc.results[tc.want].Clusters; !r.clusters.Equal(sets.New(want...)) {
				t.Errorf("choose: result %d's clusters %v, want %v", r.index, sets.List(r.clusters), want)
			}
		})
	}
}

// With the gate off, results are ignored: every cluster serves.
func TestClusterSelectionOffIgnoresResults(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	DeliverSlice(p, mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1"))
	DeliverSlice(p, mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"))
	p.OnServiceImportSelected(serviceImport("ns", "api", 0, "10.250.0.10"), storyResults)
	f.expectCalls("SliceAdd ns/api-a", "SliceAdd ns/api-b", "ServiceAdd ns/api.clusterset")
}

// TestWatcherReadsClusterSelectorResults: with cluster selection on, the
// watcher reads v1beta1 imports whole, so that the results in their status
// (which mcs-api's types drop) reach the Proxier, and follows their changes.
func TestWatcherReadsClusterSelectorResults(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, featuregate.Feature(clientfeatures.WatchListClient), false)
	f := newFixture(t)
	f.proxier.SetClusterSelection(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	si := serviceImport("ns", "api", 0, "10.250.0.10")
	si.TypeMeta = metav1.TypeMeta{APIVersion: mcsv1beta1.SchemeGroupVersion.String(), Kind: "ServiceImport"}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(si)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	setResults := func(u *unstructured.Unstructured, clusters ...string) {
		list := []any{}
		for _, c := range clusters {
			list = append(list, map[string]any{"clusters": []any{c}})
		}
		if err := unstructured.SetNestedSlice(u.Object, list, "status", "clusterSelectorResults"); err != nil {
			t.Fatal(err)
		}
	}
	setResults(u, "cluster-b")
	imports := mcsv1beta1.SchemeGroupVersion.WithResource(mcsv1beta1.ServiceImportPluralName)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		aboutv1alpha1.Resource: "ClusterPropertyList", imports: "ServiceImportList",
	}, clusterProperty("cluster-b"), u)
	ext := apiextensionsfake.NewSimpleClientset(serviceImportCRD("v1beta1"), crdServing(ClusterPropertyCRDName, "v1alpha1"))

	f.proxier.OnServiceSynced()
	f.proxier.OnEndpointSliceAdd(mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1"))
	f.proxier.OnEndpointSliceAdd(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"))
	f.proxier.OnEndpointSlicesSynced()
	w := &Watcher{Proxier: f.proxier, MCSClient: mcsfake.NewSimpleClientset(), CRDClient: ext, DynamicClient: dyn, ClusterSelection: true}
	w.Start(ctx)
	f.waitCalls("SliceAdd ns/api-b", "ServiceAdd ns/api.clusterset", "ServiceSynced", "SlicesSynced")
	if _, held := f.provider.slices["ns/api-a"]; held {
		t.Errorf("cluster-a's slice is programmed; the only result is cluster-b")
	}

	moved := u.DeepCopy()
	moved.SetResourceVersion("2")
	setResults(moved, "cluster-a")
	if _, err := dyn.Resource(imports).Namespace("ns").UpdateStatus(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitCalls("SliceAdd ns/api-a", "SliceDelete ns/api-b")
}

// notingEvents records the note of every event.
type notingEvents struct{ notes []string }

func (r *notingEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	ref := regarding.(*v1.ObjectReference)
	r.notes = append(r.notes, fmt.Sprintf("%s %s %s %s/%s: %s", eventtype, reason, action, ref.Namespace, ref.Name, fmt.Sprintf(note, args...)))
}

// syncedSelectionFixture is a synced proxier with cluster selection on,
// whose events are noted: every slice's event chooses again from then
// on (before, an import's own events do).
func syncedSelectionFixture(t *testing.T) (*fixture, *notingEvents) {
	f := newSyncedFixture(t)
	events := &notingEvents{}
	f.proxier.events.recorder = events
	f.proxier.SetClusterSelection(true)
	return f, events
}

func (r *notingEvents) take() []string {
	n := r.notes
	r.notes = nil
	return n
}

// A change of chosen result is one Normal event on the import saying from
// which result to which and why, once per change (a slice update that
// changes nothing records none) whose action names the change (the
// events library folds events of one action into a series), and the gauge shows the result's index,
// -1 for every cluster; the series goes with the import.
func TestClusterSelectionReportsChanges(t *testing.T) {
	f, events := syncedSelectionFixture(t)
	p := f.proxier
	// gauge is the one series of ns/api, "<value> <reason>".
	gauge := func() string {
		t.Helper()
		families, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var series []string
		for _, mf := range families {
			if mf.GetName() != "kubeproxy_multicluster_cluster_selection_result" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["namespace"] == "ns" && labels["name"] == "api" {
					series = append(series, fmt.Sprintf("%v %s", m.GetGauge().GetValue(), labels["reason"]))
				}
			}
		}
		if len(series) != 1 {
			t.Fatalf("gauge series of ns/api: %v, want one", series)
		}
		return series[0]
	}
	DeliverSlice(p, mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1"))
	DeliverSlice(p, mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"))
	si := serviceImport("ns", "api", 0, "10.250.0.10")
	p.OnServiceImportSelected(si, storyResults)
	if got := gauge(); got != "0 first_result" {
		t.Errorf("gauge %v, want 0 first_result", got)
	}
	events.take() // Programmed

	DeliverSlice(p, unready(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1")))
	want := []string{"Normal ClusterSelectionChanged Result0ToResult1 ns/api: result 0 (cluster-b) has no ready or serving endpoint for IPv4; using result 1 (cluster-a,cluster-b)"}
	if diff := cmp.Diff(want, events.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := gauge(); got != "1 earlier_results_unready" {
		t.Errorf("gauge %v, want 1 earlier_results_unready", got)
	}
	// The same state again: no change, no event.
	DeliverSlice(p, unready(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1")))
	if got := events.take(); len(got) != 0 {
		t.Errorf("events %v for no change", got)
	}

	DeliverSlice(p, unready(mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1")))
	want = []string{"Normal ClusterSelectionChanged Result1ToAllClusters ns/api: no result has a ready or serving endpoint for IPv4; using every source cluster instead of result 1 (cluster-a,cluster-b)"}
	if diff := cmp.Diff(want, events.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := gauge(); got != "-1 no_result_ready" {
		t.Errorf("gauge %v, want -1 no_result_ready", got)
	}

	DeliverSlice(p, mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"))
	want = []string{"Normal ClusterSelectionChanged AllClustersToResult0 ns/api: result 0 (cluster-b) has a ready or serving endpoint for IPv4; using it instead of every source cluster"}
	if diff := cmp.Diff(want, events.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// One series: the reason before went with the change.
	if got := gauge(); got != "0 first_result" {
		t.Errorf("gauge %v, want 0 first_result", got)
	}

	// New results: said to be the results' change.
	moved := si.DeepCopy()
	moved.ResourceVersion = "2"
	p.OnServiceImportSelected(moved, []csv1beta1.ClusterSelectorResult{{Clusters: []string{"cluster-a"}}})
	want = []string{"Normal ClusterSelectionChanged Result0ToAllClusters ns/api: the cluster selector results changed; using every source cluster for IPv4 instead of result 0 (cluster-b)"}
	if diff := cmp.Diff(want, events.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	p.OnServiceImportDelete(moved)
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == "kubeproxy_multicluster_cluster_selection_result" && len(mf.GetMetric()) != 0 {
			t.Errorf("%d gauge series after the import went, want 0", len(mf.GetMetric()))
		}
	}
}

// withMetrics adds a second port, metrics, to an MCS slice.
func withMetrics(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	name, proto, port := "metrics", v1.ProtocolTCP, int32(9090)
	s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
	return s
}

// readyForPort returns the addresses of the ready endpoints held for
// Service ns/name in slices that list port name: those a proxier programs
// for that port. Called with mu held.
func (r *recordingProvider) readyForPort(service, port string) []string {
	var out []string
	for _, s := range r.byService[service] {
		if !slices.ContainsFunc(s.Ports, func(p discoveryv1.EndpointPort) bool { return ptr.Deref(p.Name, "") == port }) {
			continue
		}
		for _, ep := range s.Endpoints {
			if ptr.Deref(ep.Conditions.Ready, true) {
				out = append(out, ep.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestClusterSelectionPerPort: each port of an import takes the first
// result with an endpoint for that port (KEP-5939: eligibility is per port
// and protocol). When cluster-b stops serving metrics, metrics moves to
// cluster-a while http stays in cluster-b: cluster-a's slice is handed over
// with the metrics port only, joining before cluster-b's change, and
// leaves after cluster-b serves metrics again; no port is left without a
// ready endpoint at any moment a sync could happen.
func TestClusterSelectionPerPort(t *testing.T) {
	f, events := syncedSelectionFixture(t)
	p := f.proxier
	DeliverSlice(p, withMetrics(mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1")))
	DeliverSlice(p, withMetrics(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1")))
	si := serviceImport("ns", "api", 0, "10.250.0.10")
	si.Spec.Ports = append(si.Spec.Ports, mcsv1beta1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090})
	p.OnServiceImportSelected(si, storyResults)
	f.provider.takeCalls()
	events.take()
	served := func() map[string][]string {
		return map[string][]string{"http": f.provider.readyForPort("ns/api.clusterset", "http"), "metrics": f.provider.readyForPort("ns/api.clusterset", "metrics")}
	}
	check := func(want map[string][]string) {
		t.Helper()
		f.provider.mu.Lock()
		defer f.provider.mu.Unlock()
		if diff := cmp.Diff(want, served()); diff != "" {
			t.Errorf("ready endpoints per port (-want +got):\n%s", diff)
		}
	}
	check(map[string][]string{"http": {"10.2.0.1"}, "metrics": {"10.2.0.1"}})
	f.provider.afterSlice = func() {
		for port, ready := range served() {
			if len(ready) == 0 {
				t.Errorf("port %s without a ready endpoint after %v", port, f.provider.calls[len(f.provider.calls)-1])
			}
		}
	}

	DeliverSlice(p, mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1")) // http only
	f.expectCalls("SliceAdd ns/api-a", "SliceUpdate ns/api-b")
	check(map[string][]string{"http": {"10.2.0.1"}, "metrics": {"10.1.0.1"}})
	want := []string{"Normal ClusterSelectionChanged Result0ToResult1 ns/api: result 0 (cluster-b) has no ready or serving endpoint for IPv4 port metrics/TCP; using result 1 (cluster-a,cluster-b)"}
	if diff := cmp.Diff(want, events.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	DeliverSlice(p, withMetrics(mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1")))
	f.expectCalls("SliceUpdate ns/api-b", "SliceDelete ns/api-a")
	check(map[string][]string{"http": {"10.2.0.1"}, "metrics": {"10.2.0.1"}})
}

// TestClusterSelectionDualStackPerFamily: each family of a dual-stack
// import chooses on its own endpoints: cluster-b's IPv6 endpoint going
// unready moves IPv6 to the region (cluster-a's IPv6 slice joins) while
// IPv4 stays in cluster-b.
func TestClusterSelectionDualStackPerFamily(t *testing.T) {
	f, _ := syncedSelectionFixture(t)
	p := f.proxier
	p.im.opts.ClusterSetIPCIDRs = append(p.im.opts.ClusterSetIPCIDRs, netip.MustParsePrefix("fd00:250::/64"))
	v6 := func(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
		s.AddressType = discoveryv1.AddressTypeIPv6
		return s
	}
	DeliverSlice(p, mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.1"))
	DeliverSlice(p, mcsSlice("ns", "api-b", "api", "cluster-b", "10.2.0.1"))
	DeliverSlice(p, v6(mcsSlice("ns", "api-a6", "api", "cluster-a", "fd00:1::1")))
	DeliverSlice(p, v6(mcsSlice("ns", "api-b6", "api", "cluster-b", "fd00:2::1")))
	si := serviceImport("ns", "api", 0, "10.250.0.10", "fd00:250::10")
	si.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	p.OnServiceImportSelected(si, storyResults)
	f.expectCalls("SliceAdd ns/api-b", "SliceAdd ns/api-b6", "ServiceAdd ns/api.clusterset")

	DeliverSlice(p, unready(v6(mcsSlice("ns", "api-b6", "api", "cluster-b", "fd00:2::1"))))
	f.expectCalls("SliceAdd ns/api-a6", "SliceUpdate ns/api-b6")
	f.provider.mu.Lock()
	ready := f.provider.readyOf("ns/api.clusterset")
	f.provider.mu.Unlock()
	if diff := cmp.Diff([]string{"10.2.0.1", "fd00:1::1"}, ready); diff != "" {
		t.Errorf("ready endpoints (-want +got):\n%s", diff)
	}
}

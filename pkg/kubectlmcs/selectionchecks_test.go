package kubectlmcs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// portSlice is an MCS slice of source with one port and one endpoint per
// readiness given.
func portSlice(source string, family discoveryv1.AddressType, port string, proto v1.Protocol, ready ...bool) discoveryv1.EndpointSlice {
	s := slice(source, ready...)
	s.AddressType = family
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To(port), Protocol: ptr.To(proto), Port: ptr.To[int32](8080)}}
	return s
}

func TestSelectionChecks(t *testing.T) {
	selectors := []csv1beta1.ClusterSelector{{}, {}}
	results := []csv1beta1.ClusterSelectorResult{{Clusters: []string{"b"}}, {Clusters: []string{"c", "a"}}}
	twoPorts := imp("a", "b", "c")
	twoPorts.Spec.Ports = []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}, {Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}}
	for _, tc := range []struct {
		name      string
		selection *Selection
		slices    []discoveryv1.EndpointSlice
		want      []string
	}{
		{name: "no selectors", selection: &Selection{}, want: nil},
		{name: "own cluster ready", selection: &Selection{Generation: 2, ObservedGeneration: 2, Selectors: selectors, Results: results},
			slices: []discoveryv1.EndpointSlice{
				portSlice("b", discoveryv1.AddressTypeIPv4, "http", v1.ProtocolTCP, true),
				portSlice("b", discoveryv1.AddressTypeIPv4, "dns", v1.ProtocolUDP, true),
				portSlice("a", discoveryv1.AddressTypeIPv4, "http", v1.ProtocolTCP, true),
			},
			want: []string{"ok b cluster selection: using result 0 (b)"}},
		{name: "own cluster down for one port", selection: &Selection{Generation: 2, ObservedGeneration: 2, Selectors: selectors, Results: results},
			slices: []discoveryv1.EndpointSlice{
				portSlice("b", discoveryv1.AddressTypeIPv4, "http", v1.ProtocolTCP, false),
				portSlice("b", discoveryv1.AddressTypeIPv4, "dns", v1.ProtocolUDP, true),
				portSlice("a", discoveryv1.AddressTypeIPv4, "http", v1.ProtocolTCP, true),
			},
			want: []string{
				"ok b cluster selection (IPv4 80/TCP): result 0 (b) skipped: no ready or serving endpoint; using result 1 (a,c)",
				"ok b cluster selection (IPv4 53/UDP): using result 0 (b)",
			}},
		{name: "nothing ready anywhere", selection: &Selection{Generation: 1, ObservedGeneration: 1, Selectors: selectors, Results: results},
			slices: []discoveryv1.EndpointSlice{
				portSlice("b", discoveryv1.AddressTypeIPv6, "http", v1.ProtocolTCP, false),
				portSlice("b", discoveryv1.AddressTypeIPv6, "dns", v1.ProtocolUDP, false),
			},
			want: []string{"ok b cluster selection: result 0 (b) skipped: no ready or serving endpoint; result 1 (a,c) skipped: no ready or serving endpoint; every source cluster serves"}},
		// A result that matched nothing is not one without endpoints: it
		// says so, with the selector's terms, which an importer's missing
		// property (or a typo) leaves unmatched.
		{name: "a result that matched no cluster", selection: &Selection{Generation: 1, ObservedGeneration: 1,
			Selectors: []csv1beta1.ClusterSelector{
				{PropertySelector: &csv1beta1.PropertySelector{MatchProperties: map[string]string{"region": "eu"},
					MatchExpressions: []csv1beta1.PropertySelectorRequirement{{Key: "zone", Operator: csv1beta1.PropertySelectorOpIn, Values: []string{"a", "b"}}}}},
				{}},
			Results: []csv1beta1.ClusterSelectorResult{{}, {Clusters: []string{"a"}}}},
			slices: []discoveryv1.EndpointSlice{portSlice("a", discoveryv1.AddressTypeIPv4, "http", v1.ProtocolTCP, true), portSlice("a", discoveryv1.AddressTypeIPv4, "dns", v1.ProtocolUDP, true)},
			want:   []string{"ok b cluster selection: result 0 (none) skipped: it matched no source cluster (region=eu, zone in (a,b)); using result 1 (a)"}},
		{name: "results of an older generation", selection: &Selection{Generation: 3, ObservedGeneration: 2, Selectors: selectors, Results: results},
			want: []string{"FAIL b cluster selection: 2 selectors, 2 results for generation 3 (observed 2): not resolved for this cluster yet"}},
		{name: "never resolved", selection: &Selection{Generation: 1, Selectors: selectors},
			want: []string{"FAIL b cluster selection: 2 selectors, 0 results for generation 1 (observed 0): not resolved for this cluster yet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := MemberState{Context: "b", ClusterID: "b", Import: twoPorts, Slices: tc.slices, Selection: tc.selection}
			var got []string
			for _, c := range selectionChecks(m) {
				got = append(got, line(c))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("checks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeCheckShowsTheLatestSelectionChange(t *testing.T) {
	s := healthy()
	s.Members[1].Nodes[0].Last = &NodeEvent{Type: v1.EventTypeNormal, Reason: ReasonClusterSelectionChanged,
		Note: "result 0 (b) has no ready or serving endpoint for IPv4; using result 1 (a)"}
	want := "ok b kube-proxy on b-node0: programmed; cluster selection changed: result 0 (b) has no ready or serving endpoint for IPv4; using result 1 (a)"
	for _, c := range Diagnose(s) {
		if c.Subject == "kube-proxy on b-node0" {
			if got := line(c); got != want {
				t.Errorf("node check = %q, want %q", got, want)
			}
			return
		}
	}
	t.Error("no check of b-node0")
}

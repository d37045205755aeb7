package mcs

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// mcsSlice is an MCS slice of cluster with the given ports and one
// endpoint whose state is ready, serving (terminating) or down.
func mcsSlice(cluster string, family discoveryv1.AddressType, state string, ports ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-" + cluster + "-" + strings.ToLower(string(family)), Labels: map[string]string{mcsv1beta1.LabelSourceCluster: cluster}},
		AddressType: family,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(state == "ready"), Serving: ptr.To(state != "down"), Terminating: ptr.To(state == "serving")}}},
	}
	for _, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(p), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)})
	}
	return s
}

// TestChooseForDerived: a derived member's slices hold, per port and
// family, only the clusters the consumer's rule of KEP-5939 chooses.
func TestChooseForDerived(t *testing.T) {
	results := func(groups ...[]string) []csv1beta1.ClusterSelectorResult {
		var out []csv1beta1.ClusterSelectorResult
		for _, g := range groups {
			out = append(out, csv1beta1.ClusterSelectorResult{Clusters: g})
		}
		return out
	}
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	http := []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}
	for _, tc := range []struct {
		name    string
		results []csv1beta1.ClusterSelectorResult
		ports   []mcsv1beta1.ServicePort
		in      []*discoveryv1.EndpointSlice
		// want are the slices kept, as cluster/family:ports.
		want []string
	}{{
		name:  "no results: every cluster",
		ports: http,
		in:    []*discoveryv1.EndpointSlice{mcsSlice("a", v4, "ready", "http"), mcsSlice("b", v4, "ready", "http")},
		want:  []string{"a/IPv4:http", "b/IPv4:http"},
	}, {
		name: "the first result with a ready endpoint: its clusters only", results: results([]string{"a"}, []string{"b", "c"}), ports: http,
		in:   []*discoveryv1.EndpointSlice{mcsSlice("a", v4, "ready", "http"), mcsSlice("b", v4, "ready", "http"), mcsSlice("c", v4, "ready", "http")},
		want: []string{"a/IPv4:http"},
	}, {
		name: "the first result's endpoints down: the next result (failover)", results: results([]string{"a"}, []string{"b", "c"}), ports: http,
		in:   []*discoveryv1.EndpointSlice{mcsSlice("a", v4, "down", "http"), mcsSlice("b", v4, "ready", "http"), mcsSlice("c", v4, "down", "http")},
		want: []string{"b/IPv4:http", "c/IPv4:http"},
	}, {
		name: "a terminating endpoint still serving keeps its result", results: results([]string{"a"}, []string{"b"}), ports: http,
		in:   []*discoveryv1.EndpointSlice{mcsSlice("a", v4, "serving", "http"), mcsSlice("b", v4, "ready", "http")},
		want: []string{"a/IPv4:http"},
	}, {
		name: "no result has an endpoint: every cluster", results: results([]string{"a"}), ports: http,
		in:   []*discoveryv1.EndpointSlice{mcsSlice("a", v4, "down", "http"), mcsSlice("b", v4, "ready", "http")},
		want: []string{"a/IPv4:http", "b/IPv4:http"},
	}, {
		name: "per port: a cluster chosen for one port only keeps that port", results: results([]string{"a"}, []string{"b"}),
		ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80}, {Name: "metrics", Port: 9090}},
		in:    []*discoveryv1.EndpointSlice{mcsSlice("a", v4, "ready", "http"), mcsSlice("b", v4, "ready", "http", "metrics")},
		want:  []string{"a/IPv4:http", "b/IPv4:metrics"},
	}, {
		name: "per family: a dual-stack import chooses for each", results: results([]string{"a"}, []string{"b"}), ports: http,
		in:   []*discoveryv1.EndpointSlice{mcsSlice("a", v4, "ready", "http"), mcsSlice("b", v4, "ready", "http"), mcsSlice("b", v6, "ready", "http")},
		want: []string{"a/IPv4:http", "b/IPv6:http"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, in := range [][]*discoveryv1.EndpointSlice{tc.in, reversedSlices(tc.in)} {
				before := fmt.Sprint(describeSlices(in))
				kept, _ := chooseForDerived(tc.results, tc.ports, in)
				got := describeSlices(kept)
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("kept %v, want %v", got, tc.want)
				}
				if after := fmt.Sprint(describeSlices(in)); after != before {
					t.Errorf("the input was changed: %s, was %s", after, before)
				}
			}
		})
	}
}

func reversedSlices(in []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}

func describeSlices(in []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range in {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, *p.Name)
		}
		out = append(out, fmt.Sprintf("%s/%s:%s", s.Labels[mcsv1beta1.LabelSourceCluster], s.AddressType, strings.Join(ports, ",")))
	}
	return out
}

// A derived member's import says when the result its slices hold
// changes, naming the change; the first choice, and a choice that stays,
// say nothing.
func TestReportDerivedChoice(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	rec.Verbose = true
	m := &member{id: "cluster-c", state: &memberState{}, recorder: rec}
	c := &Controller{}
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}
	var got []string
	for _, chosen := range []map[string]int{
		{"http/TCP/IPv4": 0},  // first: nothing
		{"http/TCP/IPv4": 0},  // the same: nothing
		{"http/TCP/IPv4": 1},  // failover
		{"http/TCP/IPv4": -1}, // no endpoint anywhere
		{"http/TCP/IPv4": 0},  // back
	} {
		derivedWriter{c.writesTo(m)}.reportDerivedChoice(si, "demo/web", chosen)
		for len(rec.Events) > 0 {
			got = append(got, strings.Fields(<-rec.Events)[2])
		}
	}
	if want := []string{"Result0ToResult1", "Result1ToAllClusters", "AllClustersToResult0"}; !slices.Equal(got, want) {
		t.Errorf("actions %v, want %v", got, want)
	}
}

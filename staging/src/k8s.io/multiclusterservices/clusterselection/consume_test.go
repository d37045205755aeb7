package clusterselection

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
)

type endpoint struct {
	ready, serving, terminating *bool
	node                        string
}

var (
	readyEP       = endpoint{ready: ptr.To(true)}
	notReadyEP    = endpoint{ready: ptr.To(false), serving: ptr.To(false)}
	servingTermEP = endpoint{ready: ptr.To(false), serving: ptr.To(true), terminating: ptr.To(true)}
	deadTermEP    = endpoint{ready: ptr.To(false), serving: ptr.To(false), terminating: ptr.To(true)}
)

func slice(cluster string, family discoveryv1.AddressType, port string, proto v1.Protocol, eps ...endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Labels: map[string]string{mcsv1beta1.LabelSourceCluster: cluster}},
		AddressType: family,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(port), Protocol: ptr.To(proto), Port: ptr.To[int32](8080)}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			ep.NodeName = ptr.To(e.node)
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// Story 1 as cluster-b (eu) sees it: itself, then eu, then anywhere.
var storyResults = []csv1beta1.ClusterSelectorResult{
	{Clusters: []string{"cluster-b"}},
	{Clusters: []string{"cluster-a", "cluster-b"}},
}

func TestChoose(t *testing.T) {
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	http := Traffic{PortName: "http", Protocol: tcp}
	for _, tc := range []struct {
		name    string
		results []csv1beta1.ClusterSelectorResult
		slices  []*discoveryv1.EndpointSlice
		traffic Traffic
		minimum Minimum
		index   int
		want    []string
	}{{
		name:    "own cluster ready: own cluster",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP), slice("cluster-a", v4, "http", tcp, readyEP), slice("cluster-c", v4, "http", tcp, readyEP)},
		traffic: http, index: 0, want: []string{"cluster-b"},
	}, {
		name:    "own cluster down: the region",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, notReadyEP), slice("cluster-a", v4, "http", tcp, readyEP), slice("cluster-c", v4, "http", tcp, readyEP)},
		traffic: http, index: 1, want: []string{"cluster-a", "cluster-b"},
	}, {
		name:    "region down: every cluster",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, notReadyEP), slice("cluster-c", v4, "http", tcp, readyEP)},
		traffic: http, index: AllClusters,
	}, {
		name:    "no endpoint anywhere: every cluster",
		results: storyResults,
		traffic: http, index: AllClusters,
	}, {
		name:    "no results: every cluster",
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP)},
		traffic: http, index: AllClusters,
	}, {
		name:    "an empty result is skipped",
		results: []csv1beta1.ClusterSelectorResult{{}, {Clusters: []string{"cluster-b"}}},
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP)},
		traffic: http, index: 1, want: []string{"cluster-b"},
	}, {
		name:    "a terminating endpoint still serving keeps its cluster",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, servingTermEP), slice("cluster-a", v4, "http", tcp, readyEP)},
		traffic: http, index: 0, want: []string{"cluster-b"},
	}, {
		name:    "a terminating endpoint no longer serving does not",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, deadTermEP), slice("cluster-a", v4, "http", tcp, readyEP)},
		traffic: http, index: 1, want: []string{"cluster-a", "cluster-b"},
	}, {
		name:    "conditions unset mean ready",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, endpoint{})},
		traffic: http, index: 0, want: []string{"cluster-b"},
	}, {
		name:    "per port: own cluster has only another port",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "metrics", tcp, readyEP), slice("cluster-a", v4, "http", tcp, readyEP)},
		traffic: http, index: 1, want: []string{"cluster-a", "cluster-b"},
	}, {
		name:    "per protocol: own cluster serves the port over TCP only",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "dns", tcp, readyEP), slice("cluster-a", v4, "dns", udp, readyEP)},
		traffic: Traffic{PortName: "dns", Protocol: udp}, index: 1, want: []string{"cluster-a", "cluster-b"},
	}, {
		name:    "internalTrafficPolicy Local: only this node's endpoints count",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, endpoint{ready: ptr.To(true), node: "other"}), slice("cluster-a", v4, "http", tcp, readyEP)},
		traffic: Traffic{PortName: "http", Protocol: tcp, LocalNode: "node-1"}, index: AllClusters,
	}, {
		name:    "internalTrafficPolicy Local with an endpoint here",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, endpoint{ready: ptr.To(true), node: "node-1"})},
		traffic: Traffic{PortName: "http", Protocol: tcp, LocalNode: "node-1"}, index: 0, want: []string{"cluster-b"},
	}, {
		name:    "dual stack: IPv6 chooses on its own endpoints",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP), slice("cluster-a", v6, "http", tcp, readyEP)},
		traffic: Traffic{PortName: "http", Protocol: tcp, AddressType: v6}, index: 1, want: []string{"cluster-a", "cluster-b"},
	}, {
		name:    "dual stack: IPv4 keeps its own cluster",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP), slice("cluster-a", v6, "http", tcp, readyEP)},
		traffic: Traffic{PortName: "http", Protocol: tcp, AddressType: v4}, index: 0, want: []string{"cluster-b"},
	}, {
		name:    "a slice without a source cluster counts for none",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("", v4, "http", tcp, readyEP)},
		traffic: http, index: AllClusters,
	}, {
		name:    "per port: each port of a two-port slice is eligible for its own traffic",
		results: storyResults,
		slices: []*discoveryv1.EndpointSlice{
			withPorts(slice("cluster-b", v4, "http", tcp, readyEP), "metrics"),
			slice("cluster-a", v4, "metrics", tcp, readyEP),
		},
		traffic: Traffic{PortName: "metrics", Protocol: tcp}, index: 0, want: []string{"cluster-b"},
	}, {
		name:    "a port the slice lists without a number is not eligible",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{withoutPortNumber(slice("cluster-b", v4, "http", tcp, readyEP)), slice("cluster-a", v4, "http", tcp, readyEP)},
		traffic: http, index: 1, want: []string{"cluster-a", "cluster-b"},
	}, {
		name:    "internalTrafficPolicy Local: a terminating endpoint still serving on this node counts",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, endpoint{ready: ptr.To(false), serving: ptr.To(true), terminating: ptr.To(true), node: "node-1"})},
		traffic: Traffic{PortName: "http", Protocol: tcp, LocalNode: "node-1"}, index: 0, want: []string{"cluster-b"},
	}, {
		name:    "dual stack: a family with no endpoint anywhere takes every cluster",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP)},
		traffic: Traffic{PortName: "http", Protocol: tcp, AddressType: v6}, index: AllClusters,
	}, {
		name:    "minimum 2: one ready endpoint is too few",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP, notReadyEP), slice("cluster-a", v4, "http", tcp, readyEP)},
		traffic: http, minimum: Minimum{Count: 2}, index: 1, want: []string{"cluster-a", "cluster-b"},
	}, {
		name:    "minimum 2: a result's clusters count together",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP), slice("cluster-a", v4, "http", tcp, readyEP)},
		traffic: http, minimum: Minimum{Count: 2}, index: 1, want: []string{"cluster-a", "cluster-b"},
	}, {
		name:    "a minimum counts ready endpoints only: serving and terminating ones do not",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, servingTermEP), slice("cluster-a", v4, "http", tcp, readyEP)},
		traffic: http, minimum: Minimum{Count: 1}, index: 1, want: []string{"cluster-a", "cluster-b"},
	}, {
		name:    "a minimum share: half of four listed needs two ready",
		results: storyResults[:1],
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP, readyEP, notReadyEP, deadTermEP)},
		traffic: http, minimum: Minimum{Percent: 50}, index: 0, want: []string{"cluster-b"},
	}, {
		name:    "a minimum share: a quarter of five listed rounds up to two",
		results: storyResults[:1],
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "http", tcp, readyEP, notReadyEP, notReadyEP, notReadyEP, notReadyEP)},
		traffic: http, minimum: Minimum{Percent: 25}, index: AllClusters,
	}, {
		name:    "a minimum share of nothing listed still needs one",
		results: storyResults[:1],
		traffic: http, minimum: Minimum{Percent: 50}, index: AllClusters,
	}, {
		name:    "any port: a slice of another port counts",
		results: storyResults,
		slices:  []*discoveryv1.EndpointSlice{slice("cluster-b", v4, "metrics", udp, readyEP)},
		traffic: Traffic{AnyPort: true, AddressType: v4}, index: 0, want: []string{"cluster-b"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var index int
			var clusters sets.Set[string]
			if tc.minimum == (Minimum{}) {
				index, clusters = Choose(tc.results, tc.slices, tc.traffic)
			} else {
				index, clusters = ChooseSources(tc.results, Sources(tc.slices), tc.traffic, tc.minimum)
			}
			if index != tc.index {
				t.Errorf("index %d, want %d", index, tc.index)
			}
			var want sets.Set[string]
			if tc.want != nil {
				want = sets.New(tc.want...)
			}
			if diff := cmp.Diff(want, clusters); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
		})
	}
}

func withPorts(s *discoveryv1.EndpointSlice, names ...string) *discoveryv1.EndpointSlice {
	for i, name := range names {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To(int32(9090 + i))})
	}
	return s
}

func withoutPortNumber(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	s.Ports[0].Port = nil
	return s
}

// Sources reads each slice's source cluster from its label.
func TestSources(t *testing.T) {
	a, none := slice("cluster-a", discoveryv1.AddressTypeIPv4, "http", v1.ProtocolTCP), slice("", discoveryv1.AddressTypeIPv4, "http", v1.ProtocolTCP)
	delete(none.Labels, mcsv1beta1.LabelSourceCluster)
	got := Sources([]*discoveryv1.EndpointSlice{a, none})
	if len(got) != 2 || got[0].Cluster != "cluster-a" || got[0].Slice != a || got[1].Cluster != "" || got[1].Slice != none {
		t.Errorf("Sources = %+v", got)
	}
}

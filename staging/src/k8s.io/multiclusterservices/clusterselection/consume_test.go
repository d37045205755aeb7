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
	}} {
		t.Run(tc.name, func(t *testing.T) {
			index, clusters := Choose(tc.results, tc.slices, tc.traffic)
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

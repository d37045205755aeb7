package clusterselection

import (
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
)

// AllClusters is the index Choose returns when no result has a usable
// endpoint and traffic goes to every source cluster.
const AllClusters = -1

// Traffic is the traffic a choice is made for: the KEP makes endpoint
// eligibility depend on the port, the protocol and internalTrafficPolicy,
// so different traffic to one import may choose different clusters.
type Traffic struct {
	// PortName and Protocol name the import's port (an EndpointSlice port
	// without a protocol is TCP).
	PortName string
	Protocol v1.Protocol
	// LocalNode, when set, is internalTrafficPolicy Local: only endpoints
	// on this node are eligible.
	LocalNode string
	// AddressType, when set, makes only endpoints of that family eligible
	// (the KEP leaves filtering by family to the implementation; a dual
	// stack import chooses per family).
	AddressType discoveryv1.AddressType
}

// Choose is the consumer's rule of KEP-5939: the first result whose
// clusters have an eligible endpoint that is ready or serving (a
// terminating endpoint still serving counts) gives the clusters to use;
// if none has, every source cluster is used (index AllClusters, clusters
// nil). slices are the import's MCS EndpointSlices, each labelled with its
// source cluster.
func Choose(results []csv1beta1.ClusterSelectorResult, slices []*discoveryv1.EndpointSlice, t Traffic) (int, sets.Set[string]) {
	usable := sets.New[string]()
	for _, s := range slices {
		cluster := s.Labels[mcsv1beta1.LabelSourceCluster]
		if cluster == "" || usable.Has(cluster) || !eligibleSlice(s, t) {
			continue
		}
		for _, ep := range s.Endpoints {
			if eligibleEndpoint(ep, t) {
				usable.Insert(cluster)
				break
			}
		}
	}
	for i, r := range results {
		for _, c := range r.Clusters {
			if usable.Has(c) {
				return i, sets.New(r.Clusters...)
			}
		}
	}
	return AllClusters, nil
}

func eligibleSlice(s *discoveryv1.EndpointSlice, t Traffic) bool {
	if t.AddressType != "" && s.AddressType != t.AddressType {
		return false
	}
	protocol := t.Protocol
	if protocol == "" {
		protocol = v1.ProtocolTCP
	}
	for _, p := range s.Ports {
		name, proto := "", v1.ProtocolTCP
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if name == t.PortName && proto == protocol && p.Port != nil {
			return true
		}
	}
	return false
}

func eligibleEndpoint(ep discoveryv1.Endpoint, t Traffic) bool {
	if t.LocalNode != "" && (ep.NodeName == nil || *ep.NodeName != t.LocalNode) {
		return false
	}
	ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
	serving := ready
	if ep.Conditions.Serving != nil {
		serving = *ep.Conditions.Serving
	}
	return ready || serving
}

package clusterselection

import (
	"math"

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
	// AnyPort makes a choice for every port at once (PortName and
	// Protocol are then not read): every endpoint is eligible whatever
	// ports its slice lists. LocalFirst chooses so, for a whole Service.
	AnyPort bool
	// LocalNode, when set, is internalTrafficPolicy Local: only endpoints
	// on this node are eligible.
	LocalNode string
	// AddressType, when set, makes only endpoints of that family eligible
	// (the KEP leaves filtering by family to the implementation; a dual
	// stack import chooses per family).
	AddressType discoveryv1.AddressType
}

// Minimum is how many endpoints a result needs to be used. The zero
// Minimum is the KEP's rule: one eligible endpoint that is ready or
// serving. The KEP lets a consumer move on from a result with too few
// endpoints when the user asks for it, as LocalFirst's minimum does: then
// a result needs Count eligible endpoints that are ready, or Percent of
// those listed (rounded up, at least one); endpoints that are only
// serving (terminating) do not count toward it.
type Minimum struct {
	Count   int
	Percent int
}

// met tells whether endpoints of which ready are ready, usable ready or
// serving, out of listed, are enough.
func (m Minimum) met(listed, ready, usable int) bool {
	switch {
	case m.Percent > 0:
		want := int(math.Ceil(float64(listed) * float64(m.Percent) / 100))
		return ready >= max(want, 1)
	case m.Count > 0:
		return ready >= m.Count
	default:
		return usable > 0
	}
}

// Source is an EndpointSlice of an import and the source cluster its
// endpoints are in.
type Source struct {
	Cluster string
	Slice   *discoveryv1.EndpointSlice
}

// Sources pairs each MCS EndpointSlice with the cluster its
// multicluster.kubernetes.io/source-cluster label names.
func Sources(slices []*discoveryv1.EndpointSlice) []Source {
	out := make([]Source, 0, len(slices))
	for _, s := range slices {
		out = append(out, Source{Cluster: s.Labels[mcsv1beta1.LabelSourceCluster], Slice: s})
	}
	return out
}

// Choose is the consumer's rule of KEP-5939: the first result whose
// clusters have an eligible endpoint that is ready or serving (a
// terminating endpoint still serving counts) gives the clusters to use; if
// none has, every source cluster is used (index AllClusters, clusters
// nil). slices are the import's MCS EndpointSlices, each labelled with its
// source cluster.
func Choose(results []csv1beta1.ClusterSelectorResult, slices []*discoveryv1.EndpointSlice, t Traffic) (int, sets.Set[string]) {
	return ChooseSources(results, Sources(slices), t, Minimum{})
}

// ChooseSources is Choose over slices paired with their source clusters
// (a local Service's own slices carry no source-cluster label), with a
// minimum: the first result whose clusters have enough eligible endpoints
// is used. sources without a cluster count for none.
func ChooseSources(results []csv1beta1.ClusterSelectorResult, sources []Source, t Traffic, m Minimum) (int, sets.Set[string]) {
	type count struct{ listed, ready, usable int }
	counts := map[string]count{}
	for _, s := range sources {
		if s.Cluster == "" || !eligibleSlice(s.Slice, t) {
			continue
		}
		c := counts[s.Cluster]
		for _, ep := range s.Slice.Endpoints {
			if t.LocalNode != "" && (ep.NodeName == nil || *ep.NodeName != t.LocalNode) {
				continue
			}
			ready, serving := conditions(ep)
			c.listed++
			if ready {
				c.ready++
			}
			if ready || serving {
				c.usable++
			}
		}
		counts[s.Cluster] = c
	}
	for i, r := range results {
		var sum count
		for _, cluster := range r.Clusters {
			c := counts[cluster]
			sum.listed, sum.ready, sum.usable = sum.listed+c.listed, sum.ready+c.ready, sum.usable+c.usable
		}
		if len(r.Clusters) > 0 && m.met(sum.listed, sum.ready, sum.usable) {
			return i, sets.New(r.Clusters...)
		}
	}
	return AllClusters, nil
}

func eligibleSlice(s *discoveryv1.EndpointSlice, t Traffic) bool {
	if t.AddressType != "" && s.AddressType != t.AddressType {
		return false
	}
	if t.AnyPort {
		return true
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

// conditions reads an endpoint's readiness as the EndpointSlice API says:
// ready unset is ready, serving unset is as ready.
func conditions(ep discoveryv1.Endpoint) (ready, serving bool) {
	ready = ep.Conditions.Ready == nil || *ep.Conditions.Ready
	serving = ready
	if ep.Conditions.Serving != nil {
		serving = *ep.Conditions.Serving
	}
	return ready, serving
}

package mcs

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/clusterselection"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Cluster selection (KEP-5939) in a derived member. The consumer's rule
// (the first result with a ready or serving endpoint gives the clusters
// to use; none has: every cluster) is our kube-proxy's to apply per node
// in a native member. A derived member's proxies program a Service's
// endpoints as they are and know nothing of results, so the controller
// applies the rule for them and writes only the chosen clusters'
// endpoints into the derived Service's slices. Every change of a source's
// endpoints plans the name again and rewrites the member, so the choice
// fails over and back as they come and go. What a Service cannot
// express is left out: internalTrafficPolicy Local (a per-node choice)
// and connections kept through a change (the slices change at once).

// chooseForDerived keeps, of in (the MCS slices a derived member gets for
// an import with ports ports), what the consumer's rule chooses with
// results: for each port and address family, the slices of the clusters
// chosen for it keep that port; a port a cluster is not chosen for is
// taken out of its slices, and a slice left with no port goes (a proxy
// matches endpoints to a Service's ports by name). It also returns the
// index of the result chosen (clusterselection.AllClusters: none) per
// port, protocol and family, as "port/protocol/family". With no results,
// in is returned as it is.
func chooseForDerived(results []csv1beta1.ClusterSelectorResult, ports []mcsv1beta1.ServicePort, in []*discoveryv1.EndpointSlice) ([]*discoveryv1.EndpointSlice, map[string]int) {
	if len(results) == 0 {
		return in, nil
	}
	type choiceKey struct {
		port     string
		protocol v1.Protocol
		family   discoveryv1.AddressType
	}
	chosen := map[choiceKey]func(cluster string) bool{}
	indexes := map[string]int{}
	choose := func(k choiceKey) func(string) bool {
		if f, ok := chosen[k]; ok {
			return f
		}
		i, clusters := clusterselection.Choose(results, in, clusterselection.Traffic{PortName: k.port, Protocol: k.protocol, AddressType: k.family})
		f := func(string) bool { return true }
		if i != clusterselection.AllClusters {
			f = clusters.Has
		}
		chosen[k] = f
		indexes[fmt.Sprintf("%s/%s/%s", k.port, k.protocol, k.family)] = i
		return f
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(in))
	for _, s := range in {
		cluster := s.Labels[mcsv1beta1.LabelSourceCluster]
		var keep []discoveryv1.EndpointPort
		for _, p := range s.Ports {
			k := choiceKey{protocol: v1.ProtocolTCP, family: s.AddressType}
			if p.Name != nil {
				k.port = *p.Name
			}
			if p.Protocol != nil {
				k.protocol = *p.Protocol
			}
			if !importHasPort(ports, k.port, k.protocol) || choose(k)(cluster) {
				keep = append(keep, p)
			}
		}
		switch {
		case len(keep) == len(s.Ports):
			out = append(out, s)
		case len(keep) > 0:
			s = s.DeepCopy()
			s.Ports = keep
			out = append(out, s)
		}
	}
	return out, indexes
}

// ReasonClusterSelectionChanged is the reason of the Normal event on a
// derived member's import when the result its slices hold changes, as
// kube-proxy says it per node in a native member.
const ReasonClusterSelectionChanged = "ClusterSelectionChanged"

// reportDerivedChoice says, on derived member m's import si, that the
// result chosen for one of its ports changed since the slices were last
// written; the first choice after the controller starts (or the member
// joins) is not a change. The action names the change
// ("Result0ToResult1", "Result1ToAllClusters"), so that a failover and
// its failback are two events, not one series.
func (w derivedWriter) reportDerivedChoice(si *mcsv1beta1.ServiceImport, key string, chosen map[string]int) {
	m := w.m
	var before map[string]int
	if v, ok := m.state.chosen.Load(key); ok {
		before = v.(map[string]int)
	}
	if len(chosen) == 0 {
		m.state.chosen.Delete(key)
	} else {
		m.state.chosen.Store(key, chosen)
	}
	if before == nil || chosen == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(chosen)) {
		from, had := before[k]
		to := chosen[k]
		if !had || from == to {
			continue
		}
		m.recorder.Eventf(si, nil, v1.EventTypeNormal, ReasonClusterSelectionChanged, resultName(from)+"To"+resultName(to),
			"cluster %s is served in derived mode: its derived Service's endpoints for %s now come from %s (were from %s)", m.id, k, resultText(to), resultText(from))
		return
	}
}

func resultName(i int) string {
	if i == clusterselection.AllClusters {
		return "AllClusters"
	}
	return fmt.Sprintf("Result%d", i)
}

func resultText(i int) string {
	if i == clusterselection.AllClusters {
		return "every source cluster (no result has a ready or serving endpoint)"
	}
	return fmt.Sprintf("the clusters of result %d", i)
}

// importHasPort tells whether ports hold a port of that name and
// protocol: the choice is the import's ports' (a slice's other ports
// serve no port of the derived Service, and are left as they are).
func importHasPort(ports []mcsv1beta1.ServicePort, name string, protocol v1.Protocol) bool {
	for _, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		if p.Name == name && proto == protocol {
			return true
		}
	}
	return false
}

// derivedSelectionResults are the results a derived member m chooses
// with for import si, planned as d: evaluated for m as the importer, as
// they are written into its import's status; when they cannot be
// evaluated now (a cluster's properties not known yet), those the import
// already has (KEP-5939: the previous results stay). None with the gate
// off or without selectors.
func (w derivedWriter) derivedSelectionResults(ctx context.Context, d *desiredState, si *mcsv1beta1.ServiceImport) []csv1beta1.ClusterSelectorResult {
	m := w.m
	if m.sel == nil || len(d.ClusterSelectors) == 0 || si.Spec.Type != mcsv1beta1.ClusterSetIP {
		return nil
	}
	results, err := d.selectorResultsFor(m.id)
	if err == nil {
		return results
	}
	klog.FromContext(ctx).V(2).Info("Choosing with the import's previous cluster selector results", "cluster", m.id, "import", klog.KObj(si), "err", err)
	if whole := wholeImport(m, si.Namespace+"/"+si.Name, si.UID); whole != nil {
		if have := importOverlay(whole); have != nil {
			return have.Status.ClusterSelectorResults
		}
	}
	return nil
}

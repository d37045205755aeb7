package kubectlmcs

// Cluster selection (KEP-5939) as diagnose reads it: which of the
// importing member's selector results its traffic goes to, and why each
// earlier result was skipped. kube-proxy decides the same per node with
// the same rule (clusterselection.Choose) and records each change as a
// ClusterSelectionChanged event, which the node's check shows.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/clusterselection"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ReasonClusterSelectionChanged is the reason of kube-proxy's Normal event
// on an import whose chosen cluster selector result changed on a node
// (pkg/proxy/multicluster.ReasonClusterSelectionChanged).
const ReasonClusterSelectionChanged = "ClusterSelectionChanged"

// Selection is what an importing member's ServiceImport says of cluster
// selection: the selectors copied from the exports and the results the
// mcs-controller resolved for this member. mcs-api's types do not have
// these fields; they are read beside them.
type Selection struct {
	Generation         int64
	ObservedGeneration int64
	Selectors          []csv1beta1.ClusterSelector
	Results            []csv1beta1.ClusterSelectorResult
}

// selectionChecks say, per port and address family of the import, which
// result is used and why the earlier ones are not; one check when every
// port and family comes to the same. Nothing when the import has no
// selectors.
func selectionChecks(m MemberState) []Check {
	sel := m.Selection
	if sel == nil || len(sel.Selectors) == 0 {
		return nil
	}
	c := Check{Cluster: m.Context, Subject: "cluster selection"}
	if len(sel.Results) != len(sel.Selectors) || sel.ObservedGeneration < sel.Generation {
		c.Detail = fmt.Sprintf("%d selectors, %d results for generation %d (observed %d): not resolved for this cluster yet",
			len(sel.Selectors), len(sel.Results), sel.Generation, sel.ObservedGeneration)
		c.Fix = "the mcs-controller resolves them with --feature-gates=MultiClusterServiceClusterSelection=true: check its log"
		return []Check{c}
	}
	slicesOf := make([]*discoveryv1.EndpointSlice, len(m.Slices))
	for i := range m.Slices {
		slicesOf[i] = &m.Slices[i]
	}
	// Distinct explanations in the order first met, each with the traffic
	// it holds for.
	var texts []string
	traffic := map[string][]string{}
	for _, family := range sliceFamilies(m.Slices) {
		for _, port := range m.Import.Spec.Ports {
			t := clusterselection.Traffic{PortName: port.Name, Protocol: protocol(port.Protocol), AddressType: family}
			index, _ := clusterselection.Choose(sel.Results, slicesOf, t)
			text := explainChoice(sel.Selectors, sel.Results, index)
			if _, ok := traffic[text]; !ok {
				texts = append(texts, text)
			}
			traffic[text] = append(traffic[text], fmt.Sprintf("%s %d/%s", familyName(family), port.Port, protocol(port.Protocol)))
		}
	}
	if len(texts) == 0 {
		c.Passed, c.Detail = true, "no EndpointSlice yet: every source cluster once endpoints arrive"
		return []Check{c}
	}
	var out []Check
	for _, text := range texts {
		c := c
		if len(texts) > 1 {
			c.Subject += " (" + strings.Join(traffic[text], ", ") + ")"
		}
		c.Passed, c.Detail = true, text
		out = append(out, c)
	}
	return out
}

// explainChoice says which result is used and why each earlier one was
// skipped: the consumer's rule takes the first result with a ready or
// serving endpoint. A result that matched no source cluster says so, with
// the selector's terms (most often a property the importer or the sources
// do not have), apart from one whose clusters have no endpoint ready.
func explainChoice(selectors []csv1beta1.ClusterSelector, results []csv1beta1.ClusterSelectorResult, index int) string {
	skipped := len(results)
	if index != clusterselection.AllClusters {
		skipped = index
	}
	var parts []string
	for i := 0; i < skipped; i++ {
		why := "no ready or serving endpoint"
		if len(results[i].Clusters) == 0 {
			why = "it matched no source cluster"
			if i < len(selectors) {
				why += " (" + describeSelector(selectors[i]) + ")"
			}
		}
		parts = append(parts, describeSelectorResult(i, results[i])+" skipped: "+why)
	}
	if index == clusterselection.AllClusters {
		parts = append(parts, "every source cluster serves")
	} else {
		parts = append(parts, "using "+describeSelectorResult(index, results[index]))
	}
	return strings.Join(parts, "; ")
}

// describeSelector renders a selector's property terms, as kubectl
// renders a label selector: "region=eu, zone in (a,b)".
func describeSelector(s csv1beta1.ClusterSelector) string {
	if s.PropertySelector == nil {
		return "no property terms"
	}
	var terms []string
	for _, k := range slices.Sorted(maps.Keys(s.PropertySelector.MatchProperties)) {
		terms = append(terms, k+"="+s.PropertySelector.MatchProperties[k])
	}
	for _, r := range s.PropertySelector.MatchExpressions {
		switch r.Operator {
		case csv1beta1.PropertySelectorOpExists:
			terms = append(terms, r.Key)
		case csv1beta1.PropertySelectorOpDoesNotExist:
			terms = append(terms, "!"+r.Key)
		default:
			terms = append(terms, fmt.Sprintf("%s %s (%s)", r.Key, strings.ToLower(string(r.Operator)), strings.Join(r.Values, ",")))
		}
	}
	return strings.Join(terms, ", ")
}

func describeSelectorResult(i int, r csv1beta1.ClusterSelectorResult) string {
	clusters := slices.Clone(r.Clusters)
	slices.Sort(clusters)
	return fmt.Sprintf("result %d (%s)", i, orNone(clusters))
}

// sliceFamilies are the address types the slices hold, IPv4 first.
func sliceFamilies(ss []discoveryv1.EndpointSlice) []discoveryv1.AddressType {
	var out []discoveryv1.AddressType
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		if slices.ContainsFunc(ss, func(s discoveryv1.EndpointSlice) bool { return s.AddressType == family }) {
			out = append(out, family)
		}
	}
	return out
}

func familyName(t discoveryv1.AddressType) string {
	if t == discoveryv1.AddressTypeIPv6 {
		return string(v1.IPv6Protocol)
	}
	return string(v1.IPv4Protocol)
}

// selectionOf reads the cluster selection fields of a ServiceImport
// object as served (JSON), which mcs-api's types drop.
func selectionOf(si *mcsv1beta1.ServiceImport, overlay *csv1beta1.ServiceImport) *Selection {
	if overlay == nil {
		return nil
	}
	return &Selection{Generation: si.Generation, ObservedGeneration: overlay.Status.ObservedGeneration,
		Selectors: overlay.Spec.ClusterSelectors, Results: overlay.Status.ClusterSelectorResults}
}

// Package clusterselection is cluster selection (KEP-5939) as pure
// functions: validating a ServiceExport's clusterSelectors, evaluating
// them for one importing cluster over the ClusterProperties of the source
// clusters (what the mcs-controller publishes in
// ServiceImport.status.clusterSelectorResults), and the consumer's rule
// that picks, from those results and the endpoints, the source clusters a
// client's traffic goes to (what kube-proxy programs).
package clusterselection

// Package multicluster makes kube-proxy program ServiceImports.
//
// Proxier wraps the proxier kube-proxy built (nftables, iptables, or the
// dual-stack meta-proxier over either) and feeds it, through the same
// OnService*/OnEndpointSlice* calls the core informers use, one synthetic
// Service per ClusterSetIP ServiceImport and one EndpointSlice per MCS
// EndpointSlice of that import. The proxier's own change trackers then do
// the rest: load-balancing, readiness, session affinity, traffic policy.
//
// The Proxier reads as upstream's proxier does, handlers that record and
// one place that decides. The Proxier itself is the handlers, its lock
// (one per event) and the gating of the first sync; what it holds of
// imports, their slices and the local Services that share their names,
// and every decision made from that, is its importer's, which alone hands
// the wrapped Provider imports and their slices:
//
//   - route.go: what kube-proxy's own informers deliver (local Services,
//     and EndpointSlices: a local Service's, an MCS slice, or one that
//     names an import's synthetic Service and is dropped);
//   - imports.go: ServiceImports (from Watcher) and MCS slices, the
//     cluster ID, resets;
//   - decide.go: what the wrapped Provider holds for each import and slice,
//     and a full re-decision every --config-sync-period (Redecide);
//   - claims.go: who owns a clusterset IP on this node (a local Service,
//     or the oldest import), so an import cannot take traffic that is not
//     its own;
//   - selection.go: cluster selection (KEP-5939), which source clusters
//     each port and family of an import's clusterset IPs takes;
//   - native.go: native names (an import's remote endpoints for the local
//     Service of its name), LocalFirst being a cluster selection decided
//     by the same functions;
//   - report.go, metrics.go: events and metrics of every refusal.
//
// Watcher runs the ServiceImport informer while the ServiceImport CRD is
// served; MCS slices come through kube-proxy's own EndpointSlice informer,
// which lists them anyway.
package multicluster

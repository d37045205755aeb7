// Package multicluster makes kube-proxy program ServiceImports.
//
// Proxier wraps the proxier kube-proxy built (nftables, iptables, or the
// dual-stack meta-proxier over either) and feeds it, through the same
// OnService*/OnEndpointSlice* calls the core informers use, one synthetic
// Service per ClusterSetIP ServiceImport and one EndpointSlice per MCS
// EndpointSlice of that import. The proxier's own change trackers then do
// the rest: load-balancing, readiness, session affinity, traffic policy.
//
// Proxier also decides what may be programmed: an import whose clusterset
// IP belongs to a local Service (or to an older import) is never programmed,
// so an import cannot take traffic that is not its own. Watcher drives
// Proxier from ServiceImport and EndpointSlice informers that run only
// while the ServiceImport CRD is served.
package multicluster

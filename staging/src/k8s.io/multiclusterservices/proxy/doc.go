// Package proxy translates Multi-Cluster Services objects into the objects a
// Kubernetes Service proxy already knows how to program.
//
// A ClusterSetIP ServiceImport "ns/web" becomes a synthetic Service
// "ns/web.clusterset" whose clusterIPs are the import's clusterset IPs, and
// every MCS EndpointSlice of that import (labelled
// multicluster.kubernetes.io/service-name=web) becomes an EndpointSlice of
// that synthetic Service. A dot can never appear in a real Service name, so
// the synthetic name cannot collide with a local Service. An MCS
// EndpointSlice that already names the synthetic Service in
// kubernetes.io/service-name (as the mcs-controller writes them) is that
// EndpointSlice as it is; any other slice naming a synthetic Service is
// rejected.
//
// The functions here are pure: they validate their input and either return
// the translated object or a *RejectionError naming what is wrong, so that a
// proxy never programs a rule for invalid input. Conflicts between objects
// (an import whose IP belongs to a local Service or to another import) depend
// on the whole state of a proxy and are resolved by the caller.
package proxy

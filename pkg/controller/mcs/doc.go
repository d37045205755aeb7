// Package mcs is the reference mcs-controller of KEP-1645: it watches the
// ServiceExports, Services and EndpointSlices of every member cluster and
// writes into every member one ServiceImport per exported name and the
// EndpointSlices of every source cluster.
//
// The work is split in two levels of rate-limited workqueues, both keyed by
// namespace/name:
//
//   - the clusterset queue merges the exports of a name across members
//     (package k8s.io/multiclusterservices/export does the merge, purely)
//     and records the desired import, slices and export conditions;
//   - one queue per member writes that desired state into the member,
//     comparing with its informer caches so that nothing is written when
//     nothing changed.
//
// A member that cannot be reached therefore only delays its own queue. Its
// caches keep the last state seen, so its exports keep counting until its
// endpoint lease expires (see ttl.go).
package mcs

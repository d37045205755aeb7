// Package mcs is the reference mcs-controller of KEP-1645: it watches the
// ServiceExports, Services and EndpointSlices of every member cluster and
// writes into every member one ServiceImport per exported name and the
// EndpointSlices of every source cluster.
//
// The work is split in two levels of rate-limited workqueues, both keyed by
// namespace/name:
//
//   - the clusterset queue reads what every member's caches hold of a
//     name (snapshot.go), plans from it, purely, the import, slices,
//     ingress objects and export conditions every member should hold
//     (plan.go, over package k8s.io/multiclusterservices/export), gives
//     the import its clusterset IP and records the plan;
//   - one queue per member writes that desired state into the member
//     through the writer of its mode, native or derived (member_sync.go),
//     comparing with its informer caches so that nothing is written when
//     nothing changed.
//
// A member that cannot be reached therefore only delays its own queue. Its
// caches keep the last state seen, so its exports keep counting until its
// endpoint lease expires (see source_leases.go).
package mcs

// Package export turns the ServiceExports of one name across a clusterset
// into what every member cluster imports, following KEP-1645 and the
// sigs.k8s.io/mcs-api v1beta1 types:
//
//   - Validate says whether one cluster's export is valid (its Service
//     exists and is not ExternalName), with the v1beta1 Valid reasons.
//   - Merge combines the valid exports of a name into the ServiceImport
//     spec, resolving every conflict by "Constraints and Conflict
//     Resolution": ports are unioned, and where values cannot be merged the
//     oldest export (by creationTimestamp) wins and every export of the name
//     gets a Conflict condition naming the field, with the v1beta1 reason.
//   - ImportedSlice mirrors one of a source cluster's EndpointSlices into the
//     EndpointSlice the members get, carrying only the ports that cluster
//     serves, so that on a port conflict traffic reaches only endpoints that
//     really serve the port, and the topology hints the import's
//     trafficDistribution asks for.
//
// Everything here is a pure function of its arguments, so that the
// controller around it only reads caches, calls it, and writes the result.
package export

// Package v1alpha1 holds the part of the Cluster Inventory API (KEP-4322,
// group multicluster.x-k8s.io, published by
// sigs.k8s.io/cluster-inventory-api) that the mcs-controller reads:
// ClusterProfile, one per member cluster in a namespace of the hub (an
// inventory), written by a cluster manager, with the access providers of
// KEP-5339 in its status.
//
// The published Go module is not served by the module proxy this project
// builds from, so the types are written here from the published API. They
// must read every object the published CRD admits and write it back
// unchanged (round_trip_test.go): the controller never writes a profile's
// spec, but it does write one condition of its own into the status, and a
// field unknown here would be dropped on that write.
//
// +kubebuilder:object:generate=true
// +groupName=multicluster.x-k8s.io
package v1alpha1

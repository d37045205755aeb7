// Package v1beta1 holds the fields that cluster selection (KEP-5939, alpha)
// adds to the MCS API's ServiceExport and ServiceImport (group
// multicluster.x-k8s.io): ServiceExport.spec.clusterSelectors,
// ServiceImport.spec.clusterSelectors, ServiceImport.status.observedGeneration
// and ServiceImport.status.clusterSelectorResults.
//
// sigs.k8s.io/mcs-api v0.5.2 does not have them yet. The kinds here are
// overlays: they carry only the KEP's fields, under the same JSON names, so
// that decoding a whole ServiceExport or ServiceImport into them reads just
// those fields, and a merge patch made from them writes just those. They
// are the one Go definition of the fields: controller-gen generates their
// schema into crds/clusterselection (hack/update-codegen.sh), and package
// crds adds that schema to mcs-api's own CRDs, for every served version.
// The day mcs-api ships the fields, its CRDs replace ours with no data
// change.
//
// +kubebuilder:object:generate=true
// +groupName=multicluster.x-k8s.io
package v1beta1

// Package multiclusterservices is the published, Kubernetes-free library for
// Multi-Cluster Services (KEP-1645). Its packages, each usable alone:
//
//   - proxy: ServiceImports and their EndpointSlices translated into the
//     Services and EndpointSlices a Service proxy already programs, the
//     claim rule for clusterset IPs and native names' choices.
//   - export: the ServiceExports of one name across a clusterset merged into
//     what every member imports (conflicts, the oldest export's wins), and
//     the slices and derived Services written into members.
//   - clusterselection: cluster selection (KEP-5939) as pure functions:
//     validating and merging selectors, resolving results per importer,
//     choosing a result with usable endpoints.
//   - catalog: the service catalog of a hub resolved into what each member
//     gets.
//   - crdgate: work run only while a CustomResourceDefinition is served.
//   - crds: the MCS API's CRDs as sigs.k8s.io/mcs-api publishes them, and
//     their installation.
//   - mcsapi: helpers over the sigs.k8s.io/mcs-api types.
//   - apis/about/v1alpha1 (ClusterProperty, KEP-2149),
//     apis/clusterselection/v1beta1 (the fields KEP-5939 adds to the MCS
//     API), apis/inventory/v1alpha1 (the part of ClusterProfile, KEP-4322,
//     the controller reads) and apis/catalog/v1alpha1 (the service catalog),
//     with the catalog's generated client under client/.
package multiclusterservices

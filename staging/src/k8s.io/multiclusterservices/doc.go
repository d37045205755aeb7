// Package multiclusterservices is the published, Kubernetes-free library for
// Multi-Cluster Services (KEP-1645): translation of ServiceImports and their
// EndpointSlices into the objects a Service proxy understands, CRD-gated
// informers, the ClusterProperty types, and cluster selection (KEP-5939:
// the fields in apis/clusterselection, the selection and the consumer's
// rule in clusterselection).
package multiclusterservices

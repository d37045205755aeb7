// Package multiclusterservices is the published, Kubernetes-free library for
// Multi-Cluster Services (KEP-1645): translation of ServiceImports and their
// EndpointSlices into the objects a Service proxy understands, CRD-gated
// informers, and the ClusterProperty types.
package multiclusterservices

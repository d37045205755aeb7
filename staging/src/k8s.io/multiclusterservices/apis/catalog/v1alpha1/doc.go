// Package v1alpha1 is the service catalog API (group
// catalog.multiclusterservices.k8s.io): a central catalog, kept in the
// hub cluster, for clustersets whose members belong to teams that do not
// share namespaces (a centralized service control plane).
//
// A GlobalService names a service of the clusterset independently of any
// cluster's namespaces; ServiceBindings say which clusters provide it,
// from which of their Services or from which addresses outside
// Kubernetes; GlobalServiceImports say which clusters consume it, under which
// local namespace and name. The mcs-controller resolves the catalog into
// the KEP-1645 objects (ServiceImports and EndpointSlices of
// multicluster.x-k8s.io) that kube-proxy, CoreDNS and derived mode serve:
// the data plane is the one of the MCS API.
//
// Each team has a namespace in the hub; its catalog objects live there,
// and the hub's administrator says, in the namespace's annotation
// AnnotationMemberNamespaces, which namespaces of the members the team
// owns: a team binds only Services of its own namespaces and imports only
// into them.
//
// +kubebuilder:object:generate=true
// +groupName=catalog.multiclusterservices.k8s.io
package v1alpha1

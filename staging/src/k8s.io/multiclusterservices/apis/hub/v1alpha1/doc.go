// Package v1alpha1 is the hub API of pull mode (group
// hub.multiclusterservices.k8s.io): what a member cluster's agent
// publishes of its own exports into its namespace of the hub, for the
// planner to read.
//
// Each member has a namespace in the hub named after its cluster ID; its
// agent alone writes there (RBAC confines it), one MemberExport per
// exported Service, named "<namespace>.<name>" (neither a namespace nor a
// Service name holds a dot, so names never collide), and the trusted
// endpoints of that Service as EndpointSlices owned by it. What a member
// publishes is its own word about itself, taken as push mode takes what
// the mcs-controller reads in the member: the planner checks it against
// what the operator states (cluster IDs, ranges, namespaces).
//
// These are not mcs-api objects on purpose: a hub that is also a member
// serves ServiceExports and ServiceImports of its own, which its
// admission policies keep to the controller, and its kube-proxy reads.
//
// +kubebuilder:object:generate=true
// +groupName=hub.multiclusterservices.k8s.io
package v1alpha1

package v1alpha1

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
)

const (
	// LabelServiceNamespace and LabelServiceName, on a MemberExport and
	// on the EndpointSlices published with it, name the exported Service
	// in the member (label values hold at most 63 characters, so one
	// label cannot hold both).
	LabelServiceNamespace = "hub.multiclusterservices.k8s.io/service-namespace"
	LabelServiceName      = "hub.multiclusterservices.k8s.io/service-name"
	// AnnotationSourceSlice, on a published EndpointSlice, names the
	// member's EndpointSlice it was published from.
	AnnotationSourceSlice = "hub.multiclusterservices.k8s.io/source-slice"
)

// MemberExport is what one member cluster exports of one Service: its
// ServiceExport's spec and creation time, and the Service's spec. Its
// agent publishes it in the member's hub namespace (the cluster ID),
// named "<namespace>.<name>"; the endpoints are EndpointSlices in the
// same namespace, owned by it and labelled LabelServiceNamespace and
// LabelServiceName.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental: pull mode of k8s.io/multiclusterservices"
// +kubebuilder:resource:shortName=mex,categories=multicluster
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.service.namespace`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service.name`
// +kubebuilder:printcolumn:name="Exported",type=date,JSONPath=`.spec.exportCreated`
type MemberExport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MemberExportSpec `json:"spec"`
}

// ServiceName is a Service's namespace and name in a member.
type ServiceName struct {
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// MemberExportSpec is what the planner reads of one member's export.
type MemberExportSpec struct {
	// Service is the exported Service's namespace and name in the member.
	Service ServiceName `json:"service"`
	// ExportCreated is the creation time of the member's ServiceExport:
	// the oldest export's fields win a conflict (KEP-1645).
	ExportCreated metav1.Time `json:"exportCreated"`
	// NamespaceCreated is the creation time of the Service's namespace in
	// the member: an export is never taken to be older than it.
	// +optional
	NamespaceCreated *metav1.Time `json:"namespaceCreated,omitempty"`
	// ExportedLabels and ExportedAnnotations are the ServiceExport's.
	// +optional
	ExportedLabels map[string]string `json:"exportedLabels,omitempty"`
	// +optional
	ExportedAnnotations map[string]string `json:"exportedAnnotations,omitempty"`
	// ClusterSelectors are the ServiceExport's (KEP-5939).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ClusterSelectors []csv1beta1.ClusterSelector `json:"clusterSelectors,omitempty"`
	// ServiceSpec is the exported Service's spec; none while the member
	// has no Service of the name (or it is being deleted): the export is
	// then invalid, as KEP-1645 says.
	// +optional
	ServiceSpec *v1.ServiceSpec `json:"serviceSpec,omitempty"`
}

// MemberExportList is a list of MemberExports.
//
// +kubebuilder:object:root=true
type MemberExportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberExport `json:"items"`
}

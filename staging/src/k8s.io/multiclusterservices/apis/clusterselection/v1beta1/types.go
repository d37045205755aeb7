package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// MaxClusterSelectors is the most entries clusterSelectors may have.
const MaxClusterSelectors = 16

// SameAsImporter, as a value in matchProperties or in the values of an In
// or NotIn requirement, stands for the importing cluster's own value of
// that property.
const SameAsImporter = "@SameAsImporter@"

// ServiceExport is an overlay of a ServiceExport carrying only the fields
// cluster selection adds, and status.clusters, proposed for KEP-1645
// (exporting to any set of clusters).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=svcex
type ServiceExport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ServiceExportSpec `json:"spec,omitempty"`
	// +optional
	Status ServiceExportStatus `json:"status,omitempty"`
}

// ServiceExportStatus is the part of a ServiceExport's status this
// overlay adds.
type ServiceExportStatus struct {
	// Clusters are the clusters the service is exported to: an entry
	// means the service is available for that cluster. Informational
	// only.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	Clusters []ClusterStatus `json:"clusters,omitempty"`
}

// ClusterStatus names one cluster, as mcs-api's ServiceImport
// status.clusters entries do.
type ClusterStatus struct {
	// Cluster is the name of the cluster.
	Cluster string `json:"cluster"`
}

// ServiceExportSpec is the part of a ServiceExport's spec that cluster
// selection adds.
type ServiceExportSpec struct {
	// ClusterSelectors is an ordered list of entries. Each entry selects a
	// set of preferred clusters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ClusterSelectors []ClusterSelector `json:"clusterSelectors,omitempty"`
}

// ServiceImport is an overlay of a ServiceImport carrying only the fields
// cluster selection adds.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=svcim
type ServiceImport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ServiceImportSpec `json:"spec,omitempty"`
	// +optional
	Status ServiceImportStatus `json:"status,omitempty"`
}

// ServiceImportSpec is the part of a ServiceImport's spec that cluster
// selection adds.
type ServiceImportSpec struct {
	// ClusterSelectors is the reconciled ordered list derived from the
	// constituent ServiceExports. Each entry selects a set of preferred
	// clusters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ClusterSelectors []ClusterSelector `json:"clusterSelectors,omitempty"`
}

// ServiceImportStatus is the part of a ServiceImport's status that
// cluster selection adds.
type ServiceImportStatus struct {
	// ObservedGeneration is the ServiceImport generation observed when this
	// status was last updated. It helps determine whether the status has
	// caught up with spec changes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ClusterSelectorResults is the ordered list of effective cluster
	// selector results for this Service. Consumers must use this field
	// directly. They must not correlate results with spec.clusterSelectors
	// entries because the two can be out of sync.
	// +optional
	// +listType=atomic
	ClusterSelectorResults []ClusterSelectorResult `json:"clusterSelectorResults,omitempty"`
}

// ClusterSelector selects a set of clusters.
type ClusterSelector struct {
	// PropertySelector selects clusters by matching ClusterProperty
	// key/value pairs. The special value "@SameAsImporter@" may appear in
	// matchProperties values or matchExpressions values when the operator
	// is In or NotIn. It means "use the same value as the importing cluster
	// for this key."
	// +required
	PropertySelector *PropertySelector `json:"propertySelector"`
}

// PropertySelector is a property query over a set of clusters. The results
// of matchProperties and matchExpressions are ANDed. An empty
// PropertySelector is invalid.
// +structType=atomic
type PropertySelector struct {
	// MatchProperties is a map of ClusterProperty key/value pairs. A single
	// key/value pair is equivalent to an element of matchExpressions whose
	// key field is the map key, operator is In, and values contains only
	// the map value. The requirements are ANDed.
	// +optional
	MatchProperties map[string]string `json:"matchProperties,omitempty"`

	// MatchExpressions is a list of ClusterProperty selector requirements.
	// The requirements are ANDed.
	// +optional
	// +listType=atomic
	MatchExpressions []PropertySelectorRequirement `json:"matchExpressions,omitempty"`
}

// PropertySelectorRequirement is a selector that contains values, a key,
// and an operator that relates the key and values; the fields and
// operators of metav1.LabelSelectorRequirement, over ClusterProperties.
type PropertySelectorRequirement struct {
	// Key is the name of the ClusterProperty that the selector applies to.
	Key string `json:"key"`
	// Operator represents a key's relationship to a set of values. Valid
	// operators are In, NotIn, Exists and DoesNotExist.
	Operator PropertySelectorOperator `json:"operator"`
	// Values is an array of string values. If the operator is In or NotIn,
	// the values array must be non-empty. If the operator is Exists or
	// DoesNotExist, the values array must be empty.
	// +optional
	// +listType=atomic
	Values []string `json:"values,omitempty"`
}

// PropertySelectorOperator is the set of operators of a
// PropertySelectorRequirement.
type PropertySelectorOperator string

// The operators of metav1.LabelSelectorOperator.
const (
	PropertySelectorOpIn           PropertySelectorOperator = "In"
	PropertySelectorOpNotIn        PropertySelectorOperator = "NotIn"
	PropertySelectorOpExists       PropertySelectorOperator = "Exists"
	PropertySelectorOpDoesNotExist PropertySelectorOperator = "DoesNotExist"
)

// ClusterSelectorResult is the outcome of one selector for one importing
// cluster.
type ClusterSelectorResult struct {
	// Clusters is the list of source clusters whose ClusterProperties
	// matched this selector. Each value is a cluster ID as exposed in
	// ServiceImport.status.clusters and in the
	// multicluster.kubernetes.io/source-cluster EndpointSlice label.
	// +optional
	// +listType=atomic
	Clusters []string `json:"clusters,omitempty"`
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Well-known names of KEP-4322.
const (
	// LabelClusterManager names, on a profile, the cluster manager that
	// wrote it; its value is spec.clusterManager.name. Consumers filter
	// an inventory by it.
	LabelClusterManager = "x-k8s.io/cluster-manager"
	// LabelClusterSet names, on an inventory's namespace, the clusterset
	// its profiles form.
	LabelClusterSet = "multicluster.x-k8s.io/clusterset"
	// LabelInventoryMemberID correlates the profiles that represent the
	// same member cluster (two cluster managers may each write one): the
	// same value on two profiles says they are one cluster (v1alpha2).
	LabelInventoryMemberID = "multicluster.x-k8s.io/inventory-member-id"

	// ConditionControlPlaneHealthy says whether the cluster's control
	// plane (apiserver, controller-manager, scheduler, etcd) is healthy.
	ConditionControlPlaneHealthy = "ControlPlaneHealthy"
	// ConditionJoined says whether the cluster is under management by
	// its cluster manager.
	ConditionJoined = "Joined"
)

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced

// ClusterProfile is one cluster of an inventory, as its cluster manager
// sees it.
type ClusterProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterProfileSpec `json:"spec"`
	// +optional
	Status ClusterProfileStatus `json:"status,omitempty"`
}

// ClusterProfileSpec is what the cluster manager set when it created the
// profile.
type ClusterProfileSpec struct {
	// DisplayName is a name for people.
	// +optional
	DisplayName string `json:"displayName,omitempty"`
	// ClusterManager is the cluster manager that owns the profile.
	// +required
	ClusterManager ClusterManager `json:"clusterManager"`
}

// ClusterManager names a cluster manager (Open Cluster Management,
// Karmada, Fleet...). It cannot change once set.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ClusterManager is immutable"
type ClusterManager struct {
	// Name of the cluster manager.
	// +required
	Name string `json:"name"`
}

// ClusterProfileStatus is what the cluster manager observes of the
// cluster.
type ClusterProfileStatus struct {
	// Conditions of the cluster: ControlPlaneHealthy, Joined, and any
	// other writer's own types.
	// +optional
	Conditions []metav1.Condition `json:"conditions"`
	// Version of the cluster.
	// +optional
	Version ClusterVersion `json:"version,omitempty"`
	// Properties of the cluster: ClusterProperty names of KEP-2149 or
	// the cluster manager's own.
	// +optional
	Properties []Property `json:"properties,omitempty"`
	// AccessProviders say how to reach the cluster, one entry per kind of
	// credentials the cluster accepts (KEP-5339); a consumer picks the
	// entry whose name it has a credential plugin for.
	// +optional
	AccessProviders []AccessProvider `json:"accessProviders,omitempty"`
	// CredentialProviders is the earlier name of AccessProviders, still
	// written by older cluster managers.
	//
	// Deprecated: use AccessProviders.
	// +optional
	CredentialProviders []AccessProvider `json:"credentialProviders,omitempty"`
}

// ClusterVersion is the version of a cluster.
type ClusterVersion struct {
	// Kubernetes is the cluster's Kubernetes version.
	// +optional
	Kubernetes string `json:"kubernetes,omitempty"`
}

// Property is a name/value pair of the cluster, with when it was last
// seen.
type Property struct {
	// Name of the property.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Value of the property.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Value string `json:"value"`
	// LastObservedTime is when the property was last seen on the cluster
	// (not when the profile was written).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +optional
	LastObservedTime metav1.Time `json:"lastObservedTime,omitzero"`
}

// AccessProvider is one way to reach the cluster: the name of a kind of
// credentials and where the cluster accepts them.
type AccessProvider struct {
	// Name matches the name of a credential plugin in the consumer's own
	// configuration.
	// +required
	Name string `json:"name"`
	// Cluster is where and how to reach the cluster's apiserver: the
	// fields of a kubeconfig's cluster entry.
	// +optional
	Cluster Cluster `json:"cluster,omitempty"`
}

// Cluster is a kubeconfig's cluster entry (client-go's clientcmd v1
// Cluster), with the kubeconfig's field names.
type Cluster struct {
	// Server is the apiserver's URL.
	// +required
	Server string `json:"server"`
	// TLSServerName is the name the server's certificate is checked for,
	// when not the host of Server.
	// +optional
	TLSServerName string `json:"tls-server-name,omitempty"`
	// InsecureSkipTLSVerify does not check the server's certificate.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecure-skip-tls-verify,omitempty"`
	// CertificateAuthority is a path to a file of CA certificates.
	// +optional
	CertificateAuthority string `json:"certificate-authority,omitempty"`
	// CertificateAuthorityData holds PEM CA certificates.
	// +optional
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	// ProxyURL is a proxy (http, https, socks5) for every request.
	// +optional
	ProxyURL string `json:"proxy-url,omitempty"`
	// DisableCompression asks the server not to compress responses.
	// +optional
	DisableCompression bool `json:"disable-compression,omitempty"`
	// Extensions hold further information, such as the configuration an
	// exec credential plugin is given ("client.authentication.k8s.io/exec").
	// +optional
	Extensions []NamedExtension `json:"extensions,omitempty"`
}

// NamedExtension is a named, free-form extension of a Cluster.
type NamedExtension struct {
	// Name of the extension.
	// +required
	Name string `json:"name"`
	// Extension holds its information.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +required
	Extension runtime.RawExtension `json:"extension"`
}

// +kubebuilder:object:root=true

// ClusterProfileList is a list of ClusterProfile.
type ClusterProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProfile `json:"items"`
}

// Package v1alpha1 holds the ClusterProperty API of KEP-2149 (group
// about.k8s.io), which names a cluster within its clusterset: the property
// "cluster.clusterset.k8s.io" is the cluster ID the MCS API uses in
// EndpointSlice labels and ServiceImport status.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of ClusterProperty.
const GroupName = "about.k8s.io"

// SchemeGroupVersion is the group and version of this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource is the resource of ClusterProperty objects.
var Resource = SchemeGroupVersion.WithResource("clusterproperties")

// Versions are the versions of ClusterProperty these types read, newest
// first: about-api's v1beta1 has v1alpha1's schema (spec.value), so an
// object of either decodes into these types. A reader uses the newest its
// server serves (crdgate.Discover), so that a cluster whose CRD serves
// v1beta1 only is read as well as one that serves v1alpha1 only.
var Versions = []string{"v1beta1", "v1alpha1"}

// ResourceOf is the ClusterProperty resource in version v (one of
// Versions).
func ResourceOf(v string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: GroupName, Version: v, Resource: Resource.Resource}
}

// Well-known property names from KEP-2149.
const (
	// ClusterIDProperty holds the cluster's ID, unique in its clusterset.
	ClusterIDProperty = "cluster.clusterset.k8s.io"
	// ClusterSetProperty holds the name of the clusterset the cluster is in.
	ClusterSetProperty = "clusterset.k8s.io"
)

// ClusterProperty is a name/value property of the cluster it is stored in.
type ClusterProperty struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterPropertySpec `json:"spec"`
}

// ClusterPropertySpec holds the property's value.
type ClusterPropertySpec struct {
	// Value is the property's value; at most 128k characters.
	Value string `json:"value"`
}

// ClusterPropertyList is a list of ClusterProperty.
type ClusterPropertyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProperty `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (in *ClusterProperty) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy returns a deep copy.
func (in *ClusterProperty) DeepCopy() *ClusterProperty {
	if in == nil {
		return nil
	}
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (in *ClusterPropertyList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]ClusterProperty, len(in.Items))
	for i := range in.Items {
		out.Items[i] = *in.Items[i].DeepCopy()
	}
	return &out
}

// AddToScheme registers the types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &ClusterProperty{}, &ClusterPropertyList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of ClusterProfile (shared with the MCS API).
const GroupName = "multicluster.x-k8s.io"

// SchemeGroupVersion is the group and version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource is the resource of ClusterProfile objects.
var Resource = SchemeGroupVersion.WithResource("clusterprofiles")

// Versions are the versions of ClusterProfile these types read, newest
// first. cluster-inventory-api's v1alpha2 is v1alpha1 without the
// deprecated credentialProviders (accessProviders stays) and without a
// certificate-authority file (the data stays), its lists keyed by name:
// an object of either decodes into these types, and a reader uses the
// newest its hub serves (crdgate.Discover).
var Versions = []string{"v1alpha2", "v1alpha1"}

// ResourceOf is the ClusterProfile resource in version v (one of
// Versions).
func ResourceOf(v string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: GroupName, Version: v, Resource: Resource.Resource}
}

var (
	// SchemeBuilder registers the types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &ClusterProfile{}, &ClusterProfileList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

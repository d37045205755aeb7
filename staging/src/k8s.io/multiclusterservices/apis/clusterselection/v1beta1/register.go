package v1beta1

import "k8s.io/apimachinery/pkg/runtime/schema"

// GroupName is the API group of the MCS API.
const GroupName = "multicluster.x-k8s.io"

// SchemeGroupVersion is the group and version whose objects these overlays
// read; mcs-api serves v1alpha1 with the same schema.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

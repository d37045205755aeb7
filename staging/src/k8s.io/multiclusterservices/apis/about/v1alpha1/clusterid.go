package v1alpha1

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalidClusterID is why a ClusterProperty cannot name its cluster.
var ErrInvalidClusterID = errors.New("invalid cluster ID")

// ClusterIDOf returns the cluster ID that a ClusterProperty object (as a
// dynamic client returns it) holds: its value without surrounding
// whitespace, which must be an RFC-1123 label, since it labels
// EndpointSlices (multicluster.kubernetes.io/source-cluster) and names
// ServiceImport status.clusters. Every reader of the ID goes through it, so
// that the controller and the proxies agree on what a cluster is called.
func ClusterIDOf(obj *unstructured.Unstructured) (string, error) {
	if obj == nil || obj.GetName() != ClusterIDProperty {
		return "", fmt.Errorf("%w: not the ClusterProperty %s", ErrInvalidClusterID, ClusterIDProperty)
	}
	value, _, err := unstructured.NestedString(obj.Object, "spec", "value")
	if err != nil {
		return "", fmt.Errorf("%w: spec.value of ClusterProperty %s: %v", ErrInvalidClusterID, ClusterIDProperty, err)
	}
	id := strings.TrimSpace(value)
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return "", fmt.Errorf("%w: %q in ClusterProperty %s is not a valid RFC-1123 label: %s", ErrInvalidClusterID, id, ClusterIDProperty, strings.Join(errs, "; "))
	}
	return id, nil
}

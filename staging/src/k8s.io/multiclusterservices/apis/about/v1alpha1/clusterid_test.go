package v1alpha1

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestClusterIDOf(t *testing.T) {
	prop := func(name string, value any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "about.k8s.io/v1alpha1", "kind": "ClusterProperty",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"value": value},
		}}
	}
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want string
	}{
		{name: "plain", obj: prop(ClusterIDProperty, "cluster-a"), want: "cluster-a"},
		// Written with a trailing newline (a heredoc, a ConfigMap-style
		// value): the same cluster for every reader.
		{name: "surrounding whitespace", obj: prop(ClusterIDProperty, " cluster-a\n"), want: "cluster-a"},
		{name: "not a label", obj: prop(ClusterIDProperty, "Cluster_A")},
		{name: "empty", obj: prop(ClusterIDProperty, "  ")},
		{name: "not a string", obj: prop(ClusterIDProperty, int64(7))},
		{name: "another property", obj: prop(ClusterSetProperty, "cluster-a")},
		{name: "nil", obj: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ClusterIDOf(tc.obj)
			if tc.want == "" {
				if !errors.Is(err, ErrInvalidClusterID) {
					t.Fatalf("got %q, %v; want ErrInvalidClusterID", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

package kubectlmcs

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"
)

// get -o yaml|json prints the exports and imports as their members serve
// them: fields mcs-api's typed API does not have (cluster selection's,
// status.clusters) are kept, while the table still reads the typed ones.
func TestGetPrintsObjectsAsServed(t *testing.T) {
	export := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
		"metadata": map[string]any{"name": "web", "namespace": "demo", "managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec": map[string]any{"clusterSelectors": []any{map[string]any{"propertySelector": map[string]any{
			"matchProperties": map[string]any{"region.topology.k8s.io": "@SameAsImporter@"}}}}},
		"status": map[string]any{
			"conditions": []any{map[string]any{"type": "Valid", "status": "True", "reason": "Valid", "message": "ok", "lastTransitionTime": "2026-11-28T00:00:00Z"}},
			"clusters":   []any{map[string]any{"cluster": "cluster-a"}},
		},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{serviceExports: "ServiceExportList", serviceImports: "ServiceImportList"}, export)
	list, errs := listExports(t.Context(), []*member{{Context: "cluster-a", Dynamic: dyn}}, "demo")
	if len(errs) != 0 || len(list) != 1 {
		t.Fatalf("listed %d exports, errors %v", len(list), errs)
	}
	if got := ExportStatus(list[0].Export.Status.Conditions); !strings.HasPrefix(got, "valid") {
		t.Errorf("the table's status %q, want it read from the typed conditions", got)
	}
	out, err := yaml.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"clusterSelectors:", "'@SameAsImporter@'", "clusters:\n      - cluster: cluster-a", "cluster: cluster-a\n  serviceExport:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("-o yaml lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "managedFields") {
		t.Errorf("-o yaml prints managedFields:\n%s", out)
	}
}

package kubectlmcs

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// get prints the exports and imports as their members serve them through
// kubectl's printers: fields mcs-api's typed API does not have (cluster
// selection's, status.clusters) are kept, managedFields only with
// --show-managed-fields, each object says its member; -o name, jsonpath
// and custom-columns (with --no-headers) read the same objects; the table
// still reads the typed fields; a label selector reaches every member's list.
func TestGetPrintsObjectsAsServed(t *testing.T) {
	export := func(name string, labels map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
			"metadata": map[string]any{"name": name, "namespace": "demo", "labels": labels, "managedFields": []any{map[string]any{"manager": "kubectl"}}},
			"spec": map[string]any{"clusterSelectors": []any{map[string]any{"propertySelector": map[string]any{
				"matchProperties": map[string]any{"region.topology.k8s.io": "@SameAsImporter@"}}}}},
			"status": map[string]any{
				"conditions": []any{map[string]any{"type": "Valid", "status": "True", "reason": "Valid", "message": "ok", "lastTransitionTime": "2026-11-28T00:00:00Z"}},
				"clusters":   []any{map[string]any{"cluster": "cluster-a"}},
			},
		}}
	}
	memberOf := func(context string, objs ...runtime.Object) *member {
		return &member{Context: context, Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{serviceExports: "ServiceExportList", serviceImports: "ServiceImportList"}, objs...)}
	}
	members := []*member{
		memberOf("cluster-a", export("web", map[string]any{"tier": "front"}), export("db", map[string]any{"tier": "back"})),
		memberOf("cluster-b", export("web", map[string]any{"tier": "front"})),
	}
	list, errs := listExports(t.Context(), members, query{namespace: "demo", selector: "tier=front"})
	if len(errs) != 0 || len(list) != 2 {
		t.Fatalf("listed %d exports with tier=front, want web of both members; errors %v", len(list), errs)
	}
	if got := ExportStatus(list[0].Export.Status.Conditions); !strings.HasPrefix(got, "valid") {
		t.Errorf("the table's status %q, want it read from the typed conditions", got)
	}
	print := func(format string, noHeaders bool, flags ...string) string {
		t.Helper()
		f := newPrintFlags()
		cmd := &cobra.Command{}
		f.addFlags(cmd)
		if err := cmd.Flags().Parse(flags); err != nil {
			t.Fatal(err)
		}
		p, err := f.printer(format, noHeaders)
		if err != nil {
			t.Fatal(err)
		}
		var contexts []string
		var objects []map[string]any
		for _, e := range list {
			contexts, objects = append(contexts, e.Cluster), append(objects, e.Served)
		}
		var out bytes.Buffer
		if err := printServed(&out, p, contexts, objects); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}

	yamlOut := print("yaml", false)
	for _, want := range []string{"kind: List", "clusterSelectors:", "'@SameAsImporter@'", "clusters:\n    - cluster: cluster-a",
		AnnotationContext + ": cluster-a", AnnotationContext + ": cluster-b"} {
		if !strings.Contains(yamlOut, want) {
			t.Errorf("-o yaml lacks %q:\n%s", want, yamlOut)
		}
	}
	if strings.Contains(yamlOut, "managedFields") {
		t.Errorf("-o yaml prints managedFields:\n%s", yamlOut)
	}
	if out := print("json", false, "--show-managed-fields"); !strings.Contains(out, `"managedFields"`) {
		t.Errorf("-o json --show-managed-fields drops managedFields:\n%s", out)
	}
	for _, tc := range []struct {
		format    string
		noHeaders bool
		want      string
	}{
		{format: "name", want: "serviceexport.multicluster.x-k8s.io/web\nserviceexport.multicluster.x-k8s.io/web\n"},
		{format: `jsonpath={range .items[*]}{.metadata.annotations.multiclusterservices\.k8s\.io/context} {.metadata.name}{"\n"}{end}`,
			want: "cluster-a web\ncluster-b web\n"},
		{format: `custom-columns=CONTEXT:.metadata.annotations.multiclusterservices\.k8s\.io/context,NAME:.metadata.name,CLUSTERS:.status.clusters[*].cluster`,
			want: "CONTEXT     NAME   CLUSTERS\ncluster-a   web    cluster-a\ncluster-b   web    cluster-a\n"},
		{format: `custom-columns=CONTEXT:.metadata.annotations.multiclusterservices\.k8s\.io/context`, noHeaders: true,
			want: "cluster-a\ncluster-b\n"},
	} {
		if got := print(tc.format, tc.noHeaders); got != tc.want {
			t.Errorf("-o %s (no headers: %v):\n%s\nwant:\n%s", tc.format, tc.noHeaders, got, tc.want)
		}
	}
	if _, err := newPrintFlags().printer("tree", false); err == nil || !strings.Contains(err.Error(), "custom-columns") {
		t.Errorf("-o tree: %v, want the formats listed", err)
	}
}

package mcs

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// With the MultiClusterServiceExportClusters gate on, every export's
// status.clusters names the members the Service is exported to: those
// that hold its import (desiredState.ImportedIn), as proposed for KEP-1645
// (exporting to any set of clusters). mcs-api's typed ServiceExport does
// not have the field: its caches cannot say what an export holds, and a
// typed status update would drop it. The field is read from the caches
// that keep the whole export (cluster selection's) or a mark of it
// (selection_ignored.go), and written with the conditions in one status
// update.

// statusClusters returns an unstructured export's status.clusters.
func statusClusters(u *unstructured.Unstructured) []string {
	entries, _, _ := unstructured.NestedSlice(u.Object, "status", "clusters")
	var out []string
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok {
			if c, ok := m["cluster"].(string); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

// exportedTo returns the status.clusters of m's export of key, as m's
// caches hold it.
func exportedTo(m *member, key string) []string {
	if m.sel != nil {
		obj, ok, _ := m.sel.exports.GetStore().GetByKey(key)
		if se, isExport := obj.(*csv1beta1.ServiceExport); ok && isExport {
			var out []string
			for _, c := range se.Status.Clusters {
				out = append(out, c.Cluster)
			}
			return out
		}
		return nil
	}
	if m.selectorMarks != nil {
		obj, ok, _ := m.selectorMarks.GetStore().GetByKey(key)
		if s := markedExportedTo(obj); ok && s != "" {
			return strings.Split(s, ",")
		}
	}
	return nil
}

// updateExportStatus writes conds and, as status.clusters, clusters into
// m's export se in one status update, conditional on the version read:
// the typed object with the field added, sent through the typed client's
// REST client (the controller may update an export's status, not patch
// it).
func updateExportStatus(ctx context.Context, m *member, se *mcsv1beta1.ServiceExport, conds []metav1.Condition, clusters []string) error {
	update := se.DeepCopy()
	update.Status.Conditions = conds
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(update)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(mcsv1beta1.GroupVersion.String())
	u.SetKind("ServiceExport")
	if len(clusters) > 0 {
		entries := make([]any, 0, len(clusters))
		for _, c := range clusters {
			entries = append(entries, map[string]any{"cluster": c})
		}
		if err := unstructured.SetNestedSlice(u.Object, entries, "status", "clusters"); err != nil {
			return err
		}
	}
	body, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	err = m.mcs.MulticlusterV1beta1().RESTClient().Put().Namespace(se.Namespace).Resource("serviceexports").Name(se.Name).SubResource("status").
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("updating status of ServiceExport %s/%s in %s: %w", se.Namespace, se.Name, m.id, err)
	}
	return nil
}

// exportedToNow is where an export whose conditions are conds is
// exported to: where the import is held (importedIn) when it is valid,
// nowhere when it takes no part.
func exportedToNow(conds []metav1.Condition, importedIn []string) []string {
	if !meta.IsStatusConditionTrue(conds, string(mcsv1beta1.ServiceExportConditionValid)) {
		return nil
	}
	return importedIn
}

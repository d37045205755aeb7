package mcs

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/multiclusterservices/export"
)

// With the cluster selection gate off the controller neither reads nor
// resolves an export's clusterSelectors, and the clusterset sends to
// every exporting cluster. An exporter who wrote selectors would not know
// that they do nothing: the controller keeps, per export, only how many
// selectors it has, and its Valid condition says they are ignored.

// The annotations of the marks cache's objects: how many clusterSelectors
// the export has, and its status.clusters (comma separated;
// export_clusters.go). Only in the cache, never written.
const (
	selectorCountKey = "clusterSelectors"
	exportedToKey    = "clusters"
)

// addIgnoredSelectorMarks builds m's cache of which exports have
// clusterSelectors (gate off), and of their status.clusters: a
// metadata-sized object per export.
func (c *Controller) addIgnoredSelectorMarks(m *member) error {
	dyn, err := dynamic.NewForConfig(m.Config)
	if err != nil {
		return err
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	marks := f.ForResource(serviceExportsResource).Informer()
	if err := marks.SetTransform(selectorMark); err != nil {
		return err
	}
	m.selectorMarks = marks
	m.factories = append(m.factories, f)
	m.synced = append(m.synced, marks.HasSynced)
	merge := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	_, _ = marks.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: merge, DeleteFunc: merge,
		UpdateFunc: func(old, cur any) {
			if selectorCount(old) != selectorCount(cur) || markedExportedTo(old) != markedExportedTo(cur) {
				merge(cur)
			}
		},
	})
	return nil
}

// selectorMark keeps of an export its name, how many clusterSelectors it
// has and its status.clusters.
func selectorMark(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), ResourceVersion: u.GetResourceVersion()}}
	mark := func(k, v string) {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	if sels, _, _ := unstructured.NestedSlice(u.Object, "spec", "clusterSelectors"); len(sels) > 0 {
		mark(selectorCountKey, strconv.Itoa(len(sels)))
	}
	if clusters := statusClusters(u); len(clusters) > 0 {
		mark(exportedToKey, strings.Join(clusters, ","))
	}
	return out, nil
}

// markedExportedTo is the status.clusters a mark holds, comma separated.
func markedExportedTo(obj any) string {
	if pm, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return pm.Annotations[exportedToKey]
	}
	return ""
}

func selectorCount(obj any) int {
	pm, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(pm.Annotations[selectorCountKey])
	return n
}

// ignoredSelectors returns how many clusterSelectors m's export of key
// has, read with the gate off (0 without the cache).
func ignoredSelectors(m *member, key string) int {
	if m.selectorMarks == nil {
		return 0
	}
	obj, ok, _ := m.selectorMarks.GetStore().GetByKey(key)
	if !ok {
		return 0
	}
	return selectorCount(obj)
}

// selectorsIgnored says, in a valid export's Valid condition, that its n
// clusterSelectors do nothing (gate off).
func selectorsIgnored(v export.Validity, n int) export.Validity {
	v.Message = fmt.Sprintf("%s; its %d clusterSelectors are ignored: cluster selection (the mcs-controller's MultiClusterServiceClusterSelection feature gate) is off, and every exporting cluster serves every importer", v.Message, n)
	return v
}

package mcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// Cluster selection (KEP-5939), with the MultiClusterServiceClusterSelection
// gate on. mcs-api's typed objects do not have the KEP's fields, so each
// member gets three more caches: its ServiceExports and ServiceImports
// decoded into the overlays of apis/clusterselection (only the KEP's
// fields; the imports whole), and its ClusterProperties. The merge
// resolves the exports' clusterSelectors (export.MergeClusterSelectors)
// and the planner their results for every member as the importer
// (planSelectorResults, clusterselection.Resolve); each member's writer
// copies the selectors into its import's spec and its results into the
// status.
// Every update of an import with the gate on starts from the whole cached
// object, so that no write of mcs-api's fields drops the KEP's. With the
// gate off none of this exists.

// selectionCaches are a member's caches for cluster selection.
type selectionCaches struct {
	dyn     dynamic.Interface
	exports cache.SharedIndexInformer // *csv1beta1.ServiceExport
	// imports holds whole objects: every write of an import with the gate
	// on starts from one, so that neither mcs-api's fields nor the KEP's
	// are dropped (the controller may update imports, not patch them).
	imports    cache.SharedIndexInformer // *unstructured.Unstructured
	properties cache.SharedIndexInformer // *aboutv1alpha1.ClusterProperty

	mu sync.Mutex
	// props are the member's merged cluster properties, refreshed when
	// its ClusterProperties change.
	props map[string]string
}

var (
	serviceExportsResource = csv1beta1.SchemeGroupVersion.WithResource("serviceexports")
	serviceImportsResource = csv1beta1.SchemeGroupVersion.WithResource("serviceimports")
)

// overlay returns a transform decoding unstructured objects into T.
func overlay[T any, PT interface {
	*T
	metav1.Object
}]() cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		out := PT(new(T))
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
			return nil, err
		}
		out.SetManagedFields(nil)
		return out, nil
	}
}

// addSelectionCaches builds m's cluster selection caches; they start and
// sync with its other caches.
func (c *Controller) addSelectionCaches(m *member) error {
	dyn, err := dynamic.NewForConfig(m.Config)
	if err != nil {
		return err
	}
	properties, err := topology.PropertiesResource(m.Config)
	if err != nil {
		return err
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	s := &selectionCaches{dyn: dyn}
	s.exports = f.ForResource(serviceExportsResource).Informer()
	s.imports = f.ForResource(serviceImportsResource).Informer()
	s.properties = f.ForResource(properties).Informer()
	for _, set := range []error{
		s.exports.SetTransform(overlay[csv1beta1.ServiceExport]()),
		s.imports.SetTransform(dropManagedFields),
		s.properties.SetTransform(overlay[aboutv1alpha1.ClusterProperty]()),
	} {
		if set != nil {
			return set
		}
	}
	m.sel = s
	m.factories = append(m.factories, f)
	m.synced = append(m.synced, s.exports.HasSynced, s.imports.HasSynced, s.properties.HasSynced)

	merge := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	_, _ = s.exports.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: merge, DeleteFunc: merge,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*csv1beta1.ServiceExport)
			n, ok2 := cur.(*csv1beta1.ServiceExport)
			if ok1 && ok2 && apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
				return
			}
			merge(cur)
		},
	})
	// Anyone's change of the KEP's fields of an import is undone.
	_, _ = s.imports.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, n := importOverlay(old), importOverlay(cur)
			if o != nil && n != nil && apiequality.Semantic.DeepEqual(o.Spec, n.Spec) && apiequality.Semantic.DeepEqual(o.Status, n.Status) {
				return
			}
			if key, err := cache.MetaNamespaceKeyFunc(cur); err == nil {
				m.queue.Add(key)
			}
		},
	})
	changed := func(any) { c.propertiesChanged(m) }
	_, _ = s.properties.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed, DeleteFunc: changed,
		UpdateFunc: func(_, cur any) { changed(cur) },
	})
	return nil
}

// propertiesChanged refreshes m's merged properties and, when they
// changed, plans again every import with cluster selectors: m is a source
// cluster of some and the importer of others.
func (c *Controller) propertiesChanged(m *member) {
	own := map[string]string{}
	for _, obj := range m.sel.properties.GetStore().List() {
		if p, ok := obj.(*aboutv1alpha1.ClusterProperty); ok {
			own[p.Name] = p.Spec.Value
		}
	}
	props := inventory.MergeProperties(nil, own)
	if c.cfg.ClusterProperties != nil {
		// The member's ClusterProfile may add properties (location, provider).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		merged, err := c.cfg.ClusterProperties(ctx, m.id)
		cancel()
		if err == nil {
			props = merged
		} else {
			c.logger.V(2).Info("Using the member's own ClusterProperties only", "cluster", m.id, "err", err)
		}
	}
	m.sel.mu.Lock()
	same := m.sel.props != nil && apiequality.Semantic.DeepEqual(m.sel.props, props)
	m.sel.props = props
	m.sel.mu.Unlock()
	if same {
		return
	}
	c.mu.RLock()
	var keys []string
	for key, d := range c.desired {
		if len(d.ClusterSelectors) > 0 {
			keys = append(keys, key)
		}
	}
	c.mu.RUnlock()
	for _, key := range keys {
		// The results are planned: plan again, which enqueues the members.
		c.queue.Add(key)
	}
}

// properties returns m's merged cluster properties; nil when its caches
// of them are not there.
func (m *member) properties() map[string]string {
	if m.sel == nil {
		return nil
	}
	m.sel.mu.Lock()
	defer m.sel.mu.Unlock()
	if m.sel.props == nil {
		return nil
	}
	return m.sel.props
}

// exportSelectors returns the clusterSelectors of m's export of key.
func exportSelectors(m *member, key string) []csv1beta1.ClusterSelector {
	if m.sel == nil {
		return nil
	}
	obj, ok, _ := m.sel.exports.GetStore().GetByKey(key)
	if !ok {
		return nil
	}
	if se, ok := obj.(*csv1beta1.ServiceExport); ok {
		return se.Spec.ClusterSelectors
	}
	return nil
}

// importOverlay reads the KEP's fields of a cached import.
func importOverlay(obj any) *csv1beta1.ServiceImport {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	out := &csv1beta1.ServiceImport{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out) != nil {
		return nil
	}
	return out
}

// wholeImport returns m's cached import of key with the given UID.
func wholeImport(m *member, key string, uid types.UID) *unstructured.Unstructured {
	obj, ok, _ := m.sel.imports.GetStore().GetByKey(key)
	if !ok {
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetUID() != uid {
		return nil
	}
	return u
}

// errCachesApart is returned when m's two caches of an import hold
// different versions of it: the write is retried once they agree.
var errCachesApart = errors.New("the typed and the whole cache of the import hold different versions; retrying")

// withKEPFields returns the typed import obj as an object for the dynamic
// client, carrying the KEP's fields of whole, the cached object of the
// same version.
func withKEPFields(obj *mcsv1beta1.ServiceImport, whole *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if whole == nil || whole.GetResourceVersion() != obj.ResourceVersion {
		return nil, errCachesApart
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(mcsv1beta1.SchemeGroupVersion.String())
	u.SetKind("ServiceImport")
	for _, path := range [][]string{{"spec", "clusterSelectors"}, {"status", "observedGeneration"}, {"status", "clusterSelectorResults"}} {
		if v, found, _ := unstructured.NestedFieldNoCopy(whole.Object, path...); found {
			if err := unstructured.SetNestedField(u.Object, runtime.DeepCopyJSONValue(v), path...); err != nil {
				return nil, err
			}
		}
	}
	return u, nil
}

// updateImport writes update, m's import as mcs-api's types see it,
// keeping the KEP's fields; status updates the status subresource. The
// KEP's fields come from the cached whole object of the same version, or
// from the apiserver when the cache is behind (after a write of this same
// sync).
func updateImport(ctx context.Context, m *member, update *mcsv1beta1.ServiceImport, status bool) (*mcsv1beta1.ServiceImport, error) {
	api := m.sel.dyn.Resource(serviceImportsResource).Namespace(update.Namespace)
	whole := wholeImport(m, update.Namespace+"/"+update.Name, update.UID)
	if whole == nil || whole.GetResourceVersion() != update.ResourceVersion {
		var err error
		if whole, err = api.Get(ctx, update.Name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
	u, err := withKEPFields(update, whole)
	if err != nil {
		return nil, err
	}
	if status {
		u, err = api.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	} else {
		u, err = api.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, err
	}
	out := &mcsv1beta1.ServiceImport{}
	return out, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

// writeClusterSelection writes into m's import si the resolved selectors
// (spec) and, with m as the importer, their results (status), each only
// when it differs. A failed evaluation keeps the previous results whole.
// The import may have been written earlier in this sync: on a conflict
// the write starts again from the apiserver's object.
func (w writes) writeClusterSelection(ctx context.Context, d *desiredState, si metav1.Object) error {
	m := w.m
	key := si.GetNamespace() + "/" + si.GetName()
	api := m.sel.dyn.Resource(serviceImportsResource).Namespace(si.GetNamespace())
	whole := wholeImport(m, key, si.GetUID())
	return clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		if whole == nil || whole.GetResourceVersion() != si.GetResourceVersion() {
			fresh, err := api.Get(ctx, si.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.GetUID() != si.GetUID() {
				return nil
			}
			whole = fresh
		}
		err := w.writeClusterSelectionOf(ctx, d, whole)
		whole = nil
		return err
	})
}

func (w writes) writeClusterSelectionOf(ctx context.Context, d *desiredState, whole *unstructured.Unstructured) error {
	m := w.m
	key := whole.GetNamespace() + "/" + whole.GetName()
	have := importOverlay(whole)
	if have == nil {
		return fmt.Errorf("ServiceImport %s in %s cannot be read as an overlay", key, m.id)
	}
	api := m.sel.dyn.Resource(serviceImportsResource).Namespace(whole.GetNamespace())
	if !(len(have.Spec.ClusterSelectors) == 0 && len(d.ClusterSelectors) == 0) && !apiequality.Semantic.DeepEqual(have.Spec.ClusterSelectors, d.ClusterSelectors) {
		update := whole.DeepCopy()
		if err := setOrRemove(update.Object, d.ClusterSelectors, len(d.ClusterSelectors) > 0, "spec", "clusterSelectors"); err != nil {
			return err
		}
		written, err := api.Update(ctx, update, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("writing clusterSelectors of ServiceImport %s in %s: %w", key, m.id, err)
		}
		// The results follow, for the new generation.
		whole = written
	}
	want := have.Status
	if len(d.ClusterSelectors) == 0 {
		want = csv1beta1.ServiceImportStatus{}
	} else {
		results, err := d.selectorResultsFor(m.id)
		if err != nil {
			// KEP-5939: the previous results stay whole.
			klog.FromContext(ctx).Info("Keeping the previous cluster selector results", "import", key, "cluster", m.id, "err", err)
		} else {
			want = csv1beta1.ServiceImportStatus{ObservedGeneration: whole.GetGeneration(), ClusterSelectorResults: results}
		}
	}
	if apiequality.Semantic.DeepEqual(want, have.Status) {
		return nil
	}
	update := whole.DeepCopy()
	if err := setOrRemove(update.Object, want.ObservedGeneration, want.ObservedGeneration != 0, "status", "observedGeneration"); err != nil {
		return err
	}
	if err := setOrRemove(update.Object, want.ClusterSelectorResults, want.ClusterSelectorResults != nil, "status", "clusterSelectorResults"); err != nil {
		return err
	}
	if _, err := api.UpdateStatus(ctx, update, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing clusterSelectorResults of ServiceImport %s in %s: %w", key, m.id, err)
	}
	return nil
}

// setOrRemove sets the field at path of obj to v (as JSON) when set, and
// removes it otherwise.
func setOrRemove(obj map[string]any, v any, set bool, path ...string) error {
	if !set {
		unstructured.RemoveNestedField(obj, path...)
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var value any
	if err := json.Unmarshal(data, &value); err != nil {
		return err
	}
	if n, ok := value.(float64); ok {
		value = int64(n)
	}
	return unstructured.SetNestedField(obj, value, path...)
}

// selectorResultsFor returns what d's selectors give member importer, as
// planned.
func (d *desiredState) selectorResultsFor(importer string) ([]csv1beta1.ClusterSelectorResult, error) {
	o, ok := d.SelectorResults[importer]
	if !ok {
		return nil, fmt.Errorf("cluster %s was not a member when the import was planned", importer)
	}
	if o.Failed != "" {
		return nil, errors.New(o.Failed)
	}
	return o.Results, nil
}

package kubectlmcs

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ClusterExport is an export and the member it was read from: Export
// for the table, Served the object as the member serves it (fields the
// typed API lacks, such as clusterSelectors, included) for kubectl's
// printers.
type ClusterExport struct {
	Cluster string                   `json:"cluster"`
	Export  mcsv1beta1.ServiceExport `json:"-"`
	Served  map[string]any           `json:"serviceExport"`
}

// ClusterImport is an import and the member it was read from, as
// ClusterExport.
type ClusterImport struct {
	Cluster string                   `json:"cluster"`
	Import  mcsv1beta1.ServiceImport `json:"-"`
	Served  map[string]any           `json:"serviceImport"`
}

var (
	serviceExports = schema.GroupVersionResource{Group: mcsv1beta1.GroupName, Version: mcsv1beta1.GroupVersion.Version, Resource: "serviceexports"}
	serviceImports = schema.GroupVersionResource{Group: mcsv1beta1.GroupName, Version: mcsv1beta1.GroupVersion.Version, Resource: "serviceimports"}
)

// query is what get lists: a namespace (empty: all) and a label
// selector; versions, when not nil, receives each member's list's
// resourceVersion, where --watch starts.
type query struct {
	namespace, selector string
	versions            map[string]string
}

// listServed lists resource r in m as served, each item also decoded
// into T.
func listServed[T any](ctx context.Context, m *member, r schema.GroupVersionResource, q query) ([]served[T], error) {
	list, err := m.Dynamic.Resource(r).Namespace(q.namespace).List(ctx, metav1.ListOptions{LabelSelector: q.selector})
	if err != nil {
		return nil, err
	}
	if q.versions != nil {
		q.versions[m.Context] = list.GetResourceVersion()
	}
	out := make([]served[T], 0, len(list.Items))
	for _, u := range list.Items {
		var typed T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &typed); err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", r.Resource, u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, served[T]{typed: typed, object: u.Object})
	}
	return out, nil
}

type served[T any] struct {
	typed  T
	object map[string]any
}

func listExports(ctx context.Context, members []*member, q query) ([]ClusterExport, []string) {
	return listAcross(members, func(m *member) ([]served[mcsv1beta1.ServiceExport], error) {
		return listServed[mcsv1beta1.ServiceExport](ctx, m, serviceExports, q)
	}, func(cluster string, e served[mcsv1beta1.ServiceExport]) ClusterExport {
		return ClusterExport{Cluster: cluster, Export: e.typed, Served: e.object}
	},
		func(e *ClusterExport) (metav1.Object, string) { return &e.Export, e.Cluster })
}

func listImports(ctx context.Context, members []*member, q query) ([]ClusterImport, []string) {
	return listAcross(members, func(m *member) ([]served[mcsv1beta1.ServiceImport], error) {
		return listServed[mcsv1beta1.ServiceImport](ctx, m, serviceImports, q)
	}, func(cluster string, i served[mcsv1beta1.ServiceImport]) ClusterImport {
		return ClusterImport{Cluster: cluster, Import: i.typed, Served: i.object}
	},
		func(i *ClusterImport) (metav1.Object, string) { return &i.Import, i.Cluster })
}

// listAcross lists one kind in every reachable member, each item with its
// member's context, sorted by namespace, name, then cluster; an
// unreachable member or a failed list is said in errs.
func listAcross[T, R any](members []*member, list func(*member) ([]T, error), wrap func(cluster string, item T) R, key func(*R) (metav1.Object, string)) ([]R, []string) {
	var out []R
	var errs []string
	for _, m := range members {
		if m.Err != nil {
			errs = append(errs, fmt.Sprintf("%s: unreachable: %v", m.Context, m.Err))
			continue
		}
		items, err := list(m)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", m.Context, err))
			continue
		}
		for _, item := range items {
			out = append(out, wrap(m.Context, item))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, ca := key(&out[i])
		b, cb := key(&out[j])
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		if a.GetName() != b.GetName() {
			return a.GetName() < b.GetName()
		}
		return ca < cb
	})
	return out, errs
}

// ExportStatus says an export's conditions in words: "valid, ready",
// "invalid: NoService", "conflict: PortConflict", "pending".
func ExportStatus(conds []metav1.Condition) string {
	valid := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionValid))
	if valid == nil {
		return "pending"
	}
	if valid.Status != metav1.ConditionTrue {
		return "invalid: " + valid.Reason
	}
	words := []string{"valid"}
	if c := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionReady)); c != nil {
		if c.Status == metav1.ConditionTrue {
			words = append(words, "ready")
		} else {
			words = append(words, "not ready: "+c.Reason)
		}
	}
	if c := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionConflict)); c != nil && c.Status == metav1.ConditionTrue {
		words = append(words, "conflict: "+c.Reason)
	}
	return strings.Join(words, ", ")
}

// exportMessage is the message of the condition that is not fine, if any.
func exportMessage(conds []metav1.Condition) string {
	for _, t := range []mcsv1beta1.ServiceExportConditionType{mcsv1beta1.ServiceExportConditionValid, mcsv1beta1.ServiceExportConditionConflict, mcsv1beta1.ServiceExportConditionReady} {
		c := meta.FindStatusCondition(conds, string(t))
		if c == nil {
			continue
		}
		bad := c.Status != metav1.ConditionTrue
		if t == mcsv1beta1.ServiceExportConditionConflict {
			bad = c.Status == metav1.ConditionTrue
		}
		if bad {
			return c.Message
		}
	}
	return ""
}

// ExportRows is the table of get exports; wide adds the message of the
// condition that is not fine.
func ExportRows(exports []ClusterExport, allNamespaces, wide bool, now time.Time) [][]string {
	head := []string{"CLUSTER", "NAME", "STATUS", "AGE"}
	if allNamespaces {
		head = append([]string{"NAMESPACE"}, head...)
	}
	if wide {
		head = append(head, "MESSAGE")
	}
	rows := [][]string{head}
	for _, e := range exports {
		r := []string{e.Cluster, e.Export.Name, ExportStatus(e.Export.Status.Conditions), age(e.Export.CreationTimestamp, now)}
		if allNamespaces {
			r = append([]string{e.Export.Namespace}, r...)
		}
		if wide {
			r = append(r, orDash(exportMessage(e.Export.Status.Conditions)))
		}
		rows = append(rows, r)
	}
	return rows
}

// ImportRows is the table of get imports; wide adds the session affinity
// and the IP families.
func ImportRows(imports []ClusterImport, allNamespaces, wide bool, now time.Time) [][]string {
	head := []string{"CLUSTER", "NAME", "TYPE", "IPS", "PORTS", "SOURCES", "AGE"}
	if allNamespaces {
		head = append([]string{"NAMESPACE"}, head...)
	}
	if wide {
		head = append(head, "AFFINITY", "FAMILIES")
	}
	rows := [][]string{head}
	for _, i := range imports {
		si := i.Import
		r := []string{i.Cluster, si.Name, string(si.Spec.Type), orDash(strings.Join(si.Spec.IPs, ",")),
			importPorts(si.Spec.Ports), orNone(importSources(&si)), age(si.CreationTimestamp, now)}
		if allNamespaces {
			r = append([]string{si.Namespace}, r...)
		}
		if wide {
			families := []string{}
			for _, f := range si.Spec.IPFamilies {
				families = append(families, string(f))
			}
			r = append(r, orDash(string(si.Spec.SessionAffinity)), orDash(strings.Join(families, ",")))
		}
		rows = append(rows, r)
	}
	return rows
}

func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return shortDuration(now.Sub(t.Time))
}

// typed decodes objects as served into T, each wrapped by wrap.
func typed[T, R any](objects []map[string]any, wrap func(T) R) ([]R, error) {
	out := make([]R, 0, len(objects))
	for _, o := range objects {
		var t T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o, &t); err != nil {
			return nil, err
		}
		out = append(out, wrap(t))
	}
	return out, nil
}

// watchServed watches resource r in every reachable member from the
// version its list had (q.versions) and hands each object that changes
// to print with its member, until ctx ends or every watch has ended (an
// apiserver ends a watch after a while, as kubectl get --watch ends). A
// member whose watch cannot start or fails is said in errOut; the others
// go on.
func watchServed(ctx context.Context, members []*member, r schema.GroupVersionResource, q query, errOut io.Writer, print func(cluster string, object map[string]any) error) error {
	type change struct {
		cluster string
		object  map[string]any
	}
	changes := make(chan change)
	var wg sync.WaitGroup
	for _, m := range members {
		if m.Err != nil {
			continue
		}
		w, err := m.Dynamic.Resource(r).Namespace(q.namespace).Watch(ctx, metav1.ListOptions{LabelSelector: q.selector, ResourceVersion: q.versions[m.Context]})
		if err != nil {
			fmt.Fprintf(errOut, "warning: %s: watching %s: %v\n", m.Context, r.Resource, err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if ev.Type == watch.Error || !ok {
					if ctx.Err() == nil {
						fmt.Fprintf(errOut, "warning: %s: watching %s: %v\n", m.Context, r.Resource, apierrors.FromObject(ev.Object))
					}
					return
				}
				select {
				case changes <- change{cluster: m.Context, object: u.Object}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(changes)
	}()
	for c := range changes {
		if err := print(c.cluster, c.object); err != nil {
			return err
		}
	}
	return nil
}

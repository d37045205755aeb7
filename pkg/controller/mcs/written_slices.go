package mcs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The EndpointSlices this controller writes into a member, of every kind
// (MCS slices, a derived Service's, a local Service's for native names),
// are made exactly what the plan says by one function, writeSlices.

// importedSlicesIn returns the slices this controller wrote into m for
// import ns/name: its MCS EndpointSlices; the EndpointSlices of its derived
// Service (derived mode); and those of other local Services (native names
// in derived mode).
func importedSlicesIn(m *member, ns, name string) (mcs, derived, local []*writtenSlice) {
	derivedName := export.DerivedName(ns, name)
	for _, s := range writtenIn(m, ns, name) {
		switch service, named := s.service(); {
		case !named || mcsproxy.IsServiceOfImport(service, name):
			// An MCS slice names the import's synthetic Service (one
			// written before it did names none).
			mcs = append(mcs, s)
		case service == derivedName:
			derived = append(derived, s)
		default:
			local = append(local, s)
		}
	}
	return mcs, derived, local
}

// mcsSlicesFor returns the MCS EndpointSlices member m gets for import si,
// by name.
func (w importWriter) mcsSlicesFor(d *desiredState, si *mcsv1beta1.ServiceImport) map[string]*discoveryv1.EndpointSlice {
	owner := []metav1.OwnerReference{{
		APIVersion: mcsv1beta1.GroupVersion.String(),
		Kind:       mcsv1beta1.ServiceImportKindName,
		Name:       si.Name,
		UID:        si.UID,
	}}
	out := make(map[string]*discoveryv1.EndpointSlice, len(d.Slices))
	for _, s := range w.memberView(d) {
		s.OwnerReferences = owner
		out[s.Name] = s
	}
	return out
}

// writeSlices makes the slices have (of one kind, in si's namespace of m)
// exactly want, leaving alone the slices of source clusters whose state is
// unknown. triggers are, by wanted slice name, when the change each
// carries happened (the propagation metric).
func (w writes) writeSlices(ctx context.Context, si *mcsv1beta1.ServiceImport, want map[string]*discoveryv1.EndpointSlice, have []*writtenSlice, triggers map[string]time.Time) error {
	m := w.m
	api := m.kube.DiscoveryV1().EndpointSlices(si.Namespace)
	existing := make(map[string]*writtenSlice, len(have))
	for _, s := range have {
		existing[s.name] = s
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(want)) {
		want := want[name]
		cur, ok := existing[name]
		delete(existing, name)
		if ok && sameSlice(cur, want) {
			continue
		}
		key := si.Namespace + "/" + name
		if behind, wait := m.state.cacheBehind(key, cur); behind {
			// The cache has not shown our last write of it yet: its
			// event brings the import back here (or the wait ends).
			m.queue.AddAfter(si.Namespace+"/"+si.Name, wait)
			continue
		}
		var written *discoveryv1.EndpointSlice
		var err error
		if !ok {
			written, err = api.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
			if apierrors.IsAlreadyExists(err) {
				// Our cache lags behind our own earlier create.
				var read *discoveryv1.EndpointSlice
				if read, err = api.Get(ctx, name, metav1.GetOptions{}); err == nil {
					cur, written = newWrittenSlice(read), read
					ok = !sameSlice(cur, want)
				}
			}
		}
		if ok {
			written, err = api.Update(ctx, cur.update(want), metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("writing EndpointSlice %s/%s in %s: %w", si.Namespace, name, m.id, err))
			continue
		}
		m.state.wroteSlice(key, written.Generation)
		// The write's event may have come before the record: then the
		// cache already shows it, and nothing is left to wait for.
		if obj, exists, _ := m.importedSlices.GetByKey(key); exists {
			m.state.cacheBehind(key, obj.(*writtenSlice))
		}
		if t, ok := triggers[name]; ok {
			w.metrics.observePropagation(m.id, time.Since(t))
		}
	}
	for _, s := range existing {
		if w.cs.retainedSource(s.sourceCluster()) {
			continue
		}
		errs = append(errs, w.deleteSlice(ctx, s, si))
	}
	return errors.Join(errs...)
}

// deleteSlice deletes one of m's slices that carry our managed-by label and
// are not desired. Most are ours and stale (a source slice went away). A
// slice someone else wrote with our label would otherwise be programmed by
// every proxy that trusts our label, so it is deleted all the same, and
// said loudly: a log line and a metric per slice, and an event on the
// import when there is one.
func (w writes) deleteSlice(ctx context.Context, s *writtenSlice, si *mcsv1beta1.ServiceImport) error {
	m := w.m
	ns := s.Namespace()
	err := m.kube.DiscoveryV1().EndpointSlices(ns).Delete(ctx, s.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To(s.resourceVersion)}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or changed since: the next sync sees it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting EndpointSlice %s/%s in %s: %w", ns, s.name, m.id, err)
	}
	// Only the controller's own writes use fieldManager; a writer can
	// claim that name too, and then its slice still goes, only without
	// the report.
	if len(s.writers) > 0 {
		klog.FromContext(ctx).Info("Deleted an EndpointSlice that carries this controller's managed-by label but was written by someone else",
			"cluster", m.id, "endpointSlice", klog.KRef(ns, s.name), "writers", s.writers, "serviceName", s.importName())
		w.metrics.countForeignSlice(m.id)
		if si != nil {
			deleted := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name}}
			m.recorder.Eventf(si, deleted, v1.EventTypeWarning, "ForeignEndpointSliceDeleted", "DeleteEndpointSlice",
				"deleted EndpointSlice %s, labelled as written by this controller but written by %s", s.name, strings.Join(s.writers, ", "))
		}
	}
	return nil
}

// holdsNothing tells whether m's caches show neither an import of ns/name
// written by this controller nor any of its slices.
func (w writes) holdsNothing(ns, name string) bool {
	m := w.m
	if si, err := m.imports.ServiceImports(ns).Get(name); err == nil && w.wrote(si) {
		return false
	}
	// A derived Service is held only while its import is (owner
	// reference): one someone labelled as ours is not.
	return len(writtenIn(m, ns, name)) == 0
}

// removeImport deletes m's import of ns/name and its slices, except the
// slices of source clusters whose state is unknown.
func (w writes) removeImport(ctx context.Context, ns, name string) error {
	m := w.m
	var errs []error
	retainedAny := false
	si, err := m.imports.ServiceImports(ns).Get(name)
	if err != nil {
		si = nil
	}
	for _, s := range writtenIn(m, ns, name) {
		if w.cs.retainedSource(s.sourceCluster()) {
			retainedAny = true
			continue
		}
		errs = append(errs, w.deleteSlice(ctx, s, si))
	}
	// The native and derived Services go with their import (their owner
	// reference says so too, for a member whose garbage collector is
	// slow); a Service someone else made, whatever its labels, stays.
	for _, svcName := range []string{name, export.DerivedName(ns, name)} {
		if svc, err := m.services.Services(ns).Get(svcName); err == nil && si != nil && w.wrote(svc) && export.OwnedByImport(svc, si) && !retainedAny {
			errs = append(errs, deleteOwnService(ctx, m, svc))
		}
	}
	if si != nil && w.wrote(si) && !retainedAny {
		err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(si.UID)}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

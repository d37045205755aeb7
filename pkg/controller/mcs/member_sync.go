package mcs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// syncMember writes the desired state of key into member m: the status of
// m's own export, the import, and every source cluster's slices. Every
// write is skipped when the cache already shows the desired object.
func (c *Controller) syncMember(ctx context.Context, m *member, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	c.reservations.reserveForeign(m, ns, name)
	top := c.getDesired(key)
	if top == nil {
		// Not merged yet (e.g. at start-up, when every existing import is
		// listed): merge first, which enqueues this member again.
		c.queue.Add(key)
		return nil
	}
	if top.Membership < m.joinedAt {
		// Planned before m joined: that the plan gives m nothing (no
		// import, no slices) means nothing, and acting on it would
		// remove what m holds until the next plan. Plan again, which
		// enqueues this member again.
		c.queue.Add(key)
		return nil
	}
	d := top.forMember(m.id)
	if !m.hasSynced() {
		return fmt.Errorf("caches of member %s are not synced", m.id)
	}
	w := c.writesTo(m)
	errs := []error{w.writeExportStatus(ctx, ns, name, d)}
	if d.Retain {
		return errors.Join(errs...)
	}
	errs = append(errs, w.writeIngressService(ctx, ns, name, d))
	n, err := m.namespaces.Get(ns)
	nsExists := err == nil && n.Status.Phase != v1.NamespaceTerminating
	// A service is imported where its namespace exists (KEP-1645), and
	// only into the consumer clusters its exporters name, if they do.
	if d.Import == nil || !nsExists || !export.Consumes(d.Import.Annotations, m.id) {
		errs = append(errs, w.removeImport(ctx, ns, name))
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if d.Import == nil && w.holdsNothing(ns, name) {
			c.removedFrom(key, top, m.id)
		}
		return nil
	}
	return errors.Join(append(errs, w.writer().write(ctx, key, d))...)
}

// memberWriter writes the import of one name, as planned, into a member
// the way that member serves imports. Which one a member gets is decided
// once, by writes.writer; the writers share the steps that do not depend on
// the mode (syncMember: export status, ingress Service, removal).
type memberWriter interface {
	write(ctx context.Context, key string, d *desiredState) error
	// servesNativeNames tells whether a member of this mode serves the
	// native names strategy (in a native member the proxies decide every
	// strategy; in a derived one the controller fills the local Service
	// for RemoteAndLocal only).
	servesNativeNames(strategy mcsproxy.NativeNames) bool
}

func (importWriter) servesNativeNames(mcsproxy.NativeNames) bool { return true }

func (derivedWriter) servesNativeNames(s mcsproxy.NativeNames) bool {
	return s == mcsproxy.RemoteAndLocal
}

// writer chooses the member's writer: derived for a member whose proxies
// do not program ServiceImports (Config.DerivedMembers), native otherwise.
func (w writes) writer() memberWriter {
	if w.cfg.derived(w.m) {
		return derivedWriter{w}
	}
	return importWriter{w}
}

// importWriter serves a member whose proxies program ServiceImports and
// MCS EndpointSlices: the import with its clusterset IPs, the slices of
// every source cluster, the import's status and its cluster selection
// results.
type importWriter struct{ writes }

func (w importWriter) write(ctx context.Context, key string, d *desiredState) error {
	m := w.m
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	var errs []error
	mcsSlices, derivedSlices, localSlices := importedSlicesIn(m, ns, name)
	if have, err := m.imports.ServiceImports(ns).Get(name); err == nil && w.wrote(have) && have.Annotations[export.AnnotationDerivedService] != "" {
		// Back from derived mode: the endpoints are written, and the
		// proxies given the clusterset IPs to program, before the import
		// names them, so that they serve as soon as DNS answers them.
		errs = append(errs, w.writeSlices(ctx, have, w.mcsSlicesFor(d, have), mcsSlices, d.Triggers))
		if wait, err := w.announceClusterSetIPs(ctx, key, have, d); wait || err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	m.state.switching.Delete(key)
	si, err := w.writeImport(ctx, d.Import)
	if err != nil || si == nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs,
		w.writeSlices(ctx, si, w.mcsSlicesFor(d, si), mcsSlices, d.Triggers),
		w.retireDerived(ctx, si, d, derivedSlices),
		// Native names are the proxies' business in a native member.
		w.writeSlices(ctx, si, nil, localSlices, nil),
		w.writeImportStatus(ctx, d, si), w.writeNativeService(ctx, si))
	if m.sel != nil {
		errs = append(errs, w.writeClusterSelection(ctx, d, si))
	}
	return errors.Join(errs...)
}

// writeNativeService gives member m a Service of the import's name where
// the exporter asks for native names (mcsproxy.AnnotationNativeNames) and
// m has none, so that clients there can call it by name; the proxies add
// the import's endpoints to it. A Service someone else created is never
// changed or deleted: its owner gets an event saying that it now also
// serves the clusterset's endpoints. The Service this controller created
// is deleted when native names are turned off (and collected with the
// import).
func (w writes) writeNativeService(ctx context.Context, si *mcsv1beta1.ServiceImport) error {
	m := w.m
	policy, err := mcsproxy.NativeNamesOf(si.Annotations)
	wanted := err == nil && policy.Strategy != mcsproxy.NativeNamesOff && si.Spec.Type == mcsv1beta1.ClusterSetIP &&
		w.writer().servesNativeNames(policy.Strategy)
	have, getErr := m.services.Services(si.Namespace).Get(si.Name)
	exists := getErr == nil
	// Ours by owner reference, not by label: a Service someone labelled
	// as the controller's is theirs.
	ours := exists && w.wrote(have) && export.OwnedByImport(have, si)
	api := m.kube.CoreV1().Services(si.Namespace)
	switch {
	case !wanted && ours:
		return deleteOwnService(ctx, m, have)
	case wanted && !exists:
		want := export.NativeService(si, w.cfg.ManagedBy)
		created, err := api.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Service %s/%s in %s: %w", si.Namespace, si.Name, m.id, err)
		}
		if err == nil {
			m.recorder.Eventf(si, created, v1.EventTypeNormal, "NativeServiceCreated", "CreateNativeService", "created Service %s so that %s reaches the clusterset by name (%s)", created.Name, si.Name, policy.Strategy)
		}
	case wanted && ours:
		// Whatever someone else changed in it is put back.
		update := export.ServiceUpdate(have, export.NativeService(si, w.cfg.ManagedBy))
		if update == nil {
			return nil
		}
		if _, err := api.Update(ctx, update, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("updating Service %s/%s in %s: %w", si.Namespace, si.Name, m.id, err)
		}
	case wanted && exists:
		// Someone else's Service: told once per change of policy and of
		// its owner's consent, which the proxies wait for.
		accepted := mcsproxy.AcceptsNativeNames(have, []string{w.cfg.ManagedBy})
		if !m.state.firstTime(fmt.Sprintf("%s/%s/%t", have.UID, policy.Strategy, accepted)) {
			break
		}
		if accepted {
			m.recorder.Eventf(have, si, v1.EventTypeNormal, "ServesClusterSetEndpoints", "ServeNativeNames",
				"the exporters of ServiceImport %s ask for native names (%s): this Service's ClusterIP also reaches the endpoints of other clusters", si.Name, policy.Strategy)
		} else {
			m.recorder.Eventf(have, si, v1.EventTypeNormal, string(mcsproxy.ReasonNativeNamesNotAccepted), "ServeNativeNames",
				"the exporters of ServiceImport %s ask for native names (%s): this Service keeps only its own endpoints unless its owner sets annotation %s=\"true\"", si.Name, policy.Strategy, mcsproxy.AnnotationAcceptNativeNames)
		}
	}
	return nil
}

// deleteOwnService deletes a Service this controller created in m (for
// native names, or a derived Service); one that was replaced in the
// meantime is left alone.
func deleteOwnService(ctx context.Context, m *member, svc *v1.Service) error {
	err := m.kube.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(svc.UID)}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting Service %s/%s in %s: %w", svc.Namespace, svc.Name, m.id, err)
	}
	return nil
}

// writeExportStatus sets the conditions of m's export of ns/name.
func (w writes) writeExportStatus(ctx context.Context, ns, name string, d *desiredState) error {
	m := w.m
	want, ok := d.ExportConditions[m.id]
	if !ok {
		return nil
	}
	se, err := m.exports.ServiceExports(ns).Get(name)
	if err != nil || se.DeletionTimestamp != nil {
		return nil
	}
	conds := slices.Clone(se.Status.Conditions)
	if !slices.ContainsFunc(want, func(c metav1.Condition) bool { return c.Type == ConditionIngressReady }) {
		// Other members reach this cluster's pods (again).
		meta.RemoveStatusCondition(&conds, ConditionIngressReady)
	}
	for _, cond := range want {
		cond.ObservedGeneration = se.Generation
		meta.SetStatusCondition(&conds, cond)
	}
	if w.cfg.ExportClusters {
		to := exportedToNow(want, d.ImportedIn)
		if apiequality.Semantic.DeepEqual(conds, se.Status.Conditions) && slices.Equal(exportedTo(m, ns+"/"+name), to) {
			return nil
		}
		if err := updateExportStatus(ctx, m, se, conds, to); err != nil {
			return err
		}
		exportEvents(m, se, se.Status.Conditions, conds)
		return nil
	}
	if apiequality.Semantic.DeepEqual(conds, se.Status.Conditions) {
		return nil
	}
	update := se.DeepCopy()
	update.Status.Conditions = conds
	if _, err := m.mcs.MulticlusterV1beta1().ServiceExports(ns).UpdateStatus(ctx, update, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of ServiceExport %s/%s in %s: %w", ns, name, m.id, err)
	}
	exportEvents(m, se, se.Status.Conditions, conds)
	return nil
}

// exportEvents records a warning for each condition that changed in a way
// a user should act on.
func exportEvents(m *member, se *mcsv1beta1.ServiceExport, before, after []metav1.Condition) {
	changed := func(t mcsv1beta1.ServiceExportConditionType) (*metav1.Condition, bool) {
		a := meta.FindStatusCondition(after, string(t))
		b := meta.FindStatusCondition(before, string(t))
		return a, a != nil && (b == nil || b.Status != a.Status || b.Reason != a.Reason)
	}
	if cond, ok := changed(mcsv1beta1.ServiceExportConditionValid); ok && cond.Status == metav1.ConditionFalse {
		m.recorder.Eventf(se, nil, v1.EventTypeWarning, cond.Reason, "MergeExports", "%s", cond.Message)
	}
	if cond, ok := changed(mcsv1beta1.ServiceExportConditionConflict); ok && cond.Status == metav1.ConditionTrue {
		m.recorder.Eventf(se, nil, v1.EventTypeWarning, cond.Reason, "MergeExports", "%s", cond.Message)
	}
	// An ingress that cannot serve, for a reason the user must act on
	// (not while node ports or an address are being allocated).
	if cond, ok := changed(mcsv1beta1.ServiceExportConditionType(ConditionIngressReady)); ok && cond.Status == metav1.ConditionFalse && cond.Reason != export.IngressReasonPending {
		m.recorder.Eventf(se, nil, v1.EventTypeWarning, cond.Reason, "MergeExports", "%s", cond.Message)
	}
	// An export becoming Ready is not an event: the condition says it.
}

// writeImport creates or updates m's import; it returns nil, nil when an
// import of that name exists that this controller does not manage.
func (w writes) writeImport(ctx context.Context, want *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
	m := w.m
	api := m.mcs.MulticlusterV1beta1().ServiceImports(want.Namespace)
	have, err := m.imports.ServiceImports(want.Namespace).Get(want.Name)
	if apierrors.IsNotFound(err) {
		// want is shared by every member's worker; the client's encoder
		// writes into what it sends.
		// No event: the import itself says it was created, and an event
		// per import per member would be one write in seven when a
		// clusterset converges.
		created, err := api.Create(ctx, want.DeepCopy(), metav1.CreateOptions{})
		if err == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating ServiceImport %s/%s in %s: %w", want.Namespace, want.Name, m.id, err)
		}
		// The cache lags behind our own create.
		if have, err = api.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	if !w.wrote(have) {
		// Someone else's import: never overwrite it.
		return nil, nil
	}
	if apiequality.Semantic.DeepEqual(have.Spec, want.Spec) && apiequality.Semantic.DeepEqual(have.Labels, want.Labels) && annotationsEqual(have.Annotations, want.Annotations) {
		return have, nil
	}
	update := have.DeepCopy()
	update.Spec = want.Spec
	update.Labels = want.Labels
	update.Annotations = want.Annotations
	var updated *mcsv1beta1.ServiceImport
	if m.sel != nil {
		// An update of mcs-api's typed object would drop the KEP's fields.
		updated, err = updateImport(ctx, m, update, false)
	} else {
		updated, err = api.Update(ctx, update, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("updating ServiceImport %s/%s in %s: %w", want.Namespace, want.Name, m.id, err)
	}
	return updated, nil
}

func annotationsEqual(a, b map[string]string) bool {
	return len(a) == 0 && len(b) == 0 || apiequality.Semantic.DeepEqual(a, b)
}

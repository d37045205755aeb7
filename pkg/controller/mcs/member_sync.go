package mcs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// syncMember writes the desired state of key into member m: the status of
// m's own export, the import, and every source cluster's slices. Every
// write is skipped when the cache already shows the desired object.
func (c *Controller) syncMember(ctx context.Context, m *member, key string) error {
	top := c.getDesired(key)
	if top == nil {
		// Not merged yet (e.g. at start-up, when every existing import is
		// listed): merge first, which enqueues this member again.
		c.queue.Add(key)
		return nil
	}
	d := top.forMember(m.id)
	if !m.hasSynced() {
		return fmt.Errorf("caches of member %s are not synced", m.id)
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	errs := []error{c.writeExportStatus(ctx, m, ns, name, d)}
	if d.Retain {
		return errors.Join(errs...)
	}
	errs = append(errs, c.writeIngressService(ctx, m, ns, name, d))
	n, err := m.namespaces.Get(ns)
	nsExists := err == nil && n.Status.Phase != v1.NamespaceTerminating
	// A service is imported where its namespace exists (KEP-1645), and
	// only into the consumer clusters its exporters name, if they do.
	if d.Import == nil || !nsExists || !export.Consumes(d.Import.Annotations, m.id) {
		errs = append(errs, c.removeImport(ctx, m, ns, name))
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if d.Import == nil && c.holdsNothing(m, ns, name) {
			c.removedFrom(key, top, m.id)
		}
		return nil
	}
	if c.derived(m) {
		return errors.Join(append(errs, c.syncDerived(ctx, m, key, d))...)
	}
	mcsSlices, derivedSlices, localSlices := importedSlicesIn(m, ns, name)
	if have, err := m.imports.ServiceImports(ns).Get(name); err == nil && c.wrote(have) && have.Annotations[export.AnnotationDerivedService] != "" {
		// Back from derived mode: the endpoints are written, and the
		// proxies given the clusterset IPs to program, before the import
		// names them, so that they serve as soon as DNS answers them.
		errs = append(errs, c.writeSlices(ctx, m, have, c.mcsSlicesFor(m, d, have), mcsSlices, d.Triggers))
		if wait, err := c.announceClusterSetIPs(ctx, m, key, have, d); wait || err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	c.switching.Delete(m.id + "/" + key)
	si, err := c.writeImport(ctx, m, d.Import)
	if err != nil || si == nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs,
		c.writeSlices(ctx, m, si, c.mcsSlicesFor(m, d, si), mcsSlices, d.Triggers),
		c.retireDerived(ctx, m, si, d, derivedSlices),
		// Native names are the proxies' business in a native member.
		c.writeSlices(ctx, m, si, nil, localSlices, nil),
		c.writeImportStatus(ctx, m, d, si), c.writeNativeService(ctx, m, si))
	if m.sel != nil {
		errs = append(errs, c.writeClusterSelection(ctx, m, d, si))
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
func (c *Controller) writeNativeService(ctx context.Context, m *member, si *mcsv1beta1.ServiceImport) error {
	policy, err := mcsproxy.NativeNamesOf(si.Annotations)
	wanted := err == nil && policy.Strategy != mcsproxy.NativeNamesOff && si.Spec.Type == mcsv1beta1.ClusterSetIP &&
		// A derived member's proxies do not decide LocalFirst; the
		// controller fills the Service only for RemoteAndLocal.
		(!c.derived(m) || policy.Strategy == mcsproxy.RemoteAndLocal)
	have, getErr := m.services.Services(si.Namespace).Get(si.Name)
	exists := getErr == nil
	// Ours by owner reference, not by label: a Service someone labelled
	// as the controller's is theirs.
	ours := exists && c.wrote(have) && export.OwnedByImport(have, si)
	api := m.kube.CoreV1().Services(si.Namespace)
	switch {
	case !wanted && ours:
		return deleteOwnService(ctx, m, have)
	case wanted && !exists:
		want := export.NativeService(si, c.cfg.ManagedBy)
		created, err := api.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Service %s/%s in %s: %w", si.Namespace, si.Name, m.id, err)
		}
		if err == nil {
			m.recorder.Eventf(si, v1.EventTypeNormal, "NativeServiceCreated", "created Service %s so that %s reaches the clusterset by name (%s)", created.Name, si.Name, policy.Strategy)
		}
	case wanted && ours:
		// Whatever someone else changed in it is put back.
		update := export.ServiceUpdate(have, export.NativeService(si, c.cfg.ManagedBy))
		if update == nil {
			return nil
		}
		if _, err := api.Update(ctx, update, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("updating Service %s/%s in %s: %w", si.Namespace, si.Name, m.id, err)
		}
	case wanted && exists:
		// Someone else's Service: told once per change of policy.
		id := m.id + "/" + string(have.UID) + "/" + string(policy.Strategy)
		if _, told := c.told.LoadOrStore(id, true); !told {
			m.recorder.Eventf(have, v1.EventTypeNormal, "ServesClusterSetEndpoints",
				"the exporters of ServiceImport %s ask for native names (%s): this Service's ClusterIP also reaches the endpoints of other clusters", si.Name, policy.Strategy)
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
func (c *Controller) writeExportStatus(ctx context.Context, m *member, ns, name string, d *desiredState) error {
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
		m.recorder.Event(se, v1.EventTypeWarning, cond.Reason, cond.Message)
	}
	if cond, ok := changed(mcsv1beta1.ServiceExportConditionConflict); ok && cond.Status == metav1.ConditionTrue {
		m.recorder.Event(se, v1.EventTypeWarning, cond.Reason, cond.Message)
	}
	// An ingress that cannot serve, for a reason the user must act on
	// (not while node ports or an address are being allocated).
	if cond, ok := changed(mcsv1beta1.ServiceExportConditionType(ConditionIngressReady)); ok && cond.Status == metav1.ConditionFalse && cond.Reason != export.IngressReasonPending {
		m.recorder.Event(se, v1.EventTypeWarning, cond.Reason, cond.Message)
	}
	// An export becoming Ready is not an event: the condition says it.
}

// writeImport creates or updates m's import; it returns nil, nil when an
// import of that name exists that this controller does not manage.
func (c *Controller) writeImport(ctx context.Context, m *member, want *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
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
	if !c.wrote(have) {
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

// writeImportStatus sets status.clusters and the Ready condition of m's
// import. Ready is false where the member cannot serve the import's IP
// families, so that nobody mistakes an import that answers nothing for a
// working one.
func (c *Controller) writeImportStatus(ctx context.Context, m *member, d *desiredState, si *mcsv1beta1.ServiceImport) error {
	status := *si.Status.DeepCopy()
	status.Clusters = nil
	for _, id := range d.Clusters {
		status.Clusters = append(status.Clusters, mcsv1beta1.ClusterStatus{Cluster: id})
	}
	status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsAbsent
	if len(d.Slices) > 0 {
		status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	}
	// Each condition is set; one in its bad state with a reason it did not
	// have before is also told as a warning event, once written.
	var warnings []metav1.Condition
	set := func(cond metav1.Condition, bad metav1.ConditionStatus) {
		cond.ObservedGeneration = si.Generation
		before := meta.FindStatusCondition(si.Status.Conditions, cond.Type)
		meta.SetStatusCondition(&status.Conditions, cond)
		if cond.Status == bad && (before == nil || before.Reason != cond.Reason) {
			warnings = append(warnings, cond)
		}
	}
	set(importReadyCondition(si.Spec.IPFamilies, memberFamilies(m), m.id, d.IPError), metav1.ConditionFalse)
	set(c.ipConflictCondition(m, si), metav1.ConditionTrue)
	set(staleCondition(d.Stale, c.cfg.EndpointTTL), metav1.ConditionTrue)
	if inRange, on := c.serviceRangeCondition(m, si); on {
		set(inRange, metav1.ConditionTrue)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, ConditionClusterSetIPInServiceRange)
	}
	if native, on := c.nativeNamesCondition(m, si); on {
		set(native, metav1.ConditionFalse)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, ConditionNativeNames)
	}
	if apiequality.Semantic.DeepEqual(status, si.Status) {
		return nil
	}
	update := si.DeepCopy()
	update.Status = status
	api := m.mcs.MulticlusterV1beta1().ServiceImports(si.Namespace)
	var err error
	if m.sel != nil {
		// An update of mcs-api's typed status would drop the KEP's results.
		_, err = updateImport(ctx, m, update, true)
	} else {
		_, err = api.UpdateStatus(ctx, update, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("updating status of ServiceImport %s/%s in %s: %w", si.Namespace, si.Name, m.id, err)
	}
	for _, w := range warnings {
		m.recorder.Event(si, v1.EventTypeWarning, w.Reason, w.Message)
	}
	return nil
}

// ConditionNativeNames is a ServiceImport condition of this controller's,
// present while the exporters ask for native names: whether the local
// Service of the import's name in this member serves the import's
// endpoints (the proxies add them), and why not.
const ConditionNativeNames = "NativeNames"

// nativeNamesCondition is the NativeNames condition of si in m, and
// whether it applies at all.
func (c *Controller) nativeNamesCondition(m *member, si *mcsv1beta1.ServiceImport) (metav1.Condition, bool) {
	cond := metav1.Condition{Type: ConditionNativeNames}
	policy, err := mcsproxy.NativeNamesOf(si.Annotations)
	switch {
	case err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "InvalidNativeNames", err.Error()
		return cond, true
	case policy.Strategy == mcsproxy.NativeNamesOff:
		return cond, false
	case si.Spec.Type != mcsv1beta1.ClusterSetIP:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "HeadlessImport", "a headless import has no endpoints a local Service could add; native names apply to ClusterSetIP imports"
		return cond, true
	case c.derived(m) && policy.Strategy != mcsproxy.RemoteAndLocal:
		cond.Status, cond.Reason = metav1.ConditionFalse, "DerivedMember"
		cond.Message = fmt.Sprintf("cluster %s is served in derived mode (its proxies do not program ServiceImports): the local Service %s gets no endpoints of other clusters; %s is decided by the multi-cluster kube-proxy and needs native mode (RemoteAndLocal works in derived mode). The clusterset name and IP work.", m.id, si.Name, policy.Strategy)
		return cond, true
	}
	svc, err := m.services.Services(si.Namespace).Get(si.Name)
	switch {
	case err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "ServiceCreated", fmt.Sprintf("Service %s is created for the import (%s)", si.Name, policy.Strategy)
	case c.wrote(svc):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "ServiceCreated", fmt.Sprintf("Service %s was created for the import (%s)", si.Name, policy.Strategy)
	case svc.Spec.Type == v1.ServiceTypeExternalName || svc.Spec.ClusterIP == v1.ClusterIPNone:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "ServiceTypeConflict", fmt.Sprintf("the local Service %s is %s and has no ClusterIP for the import's endpoints", si.Name, map[bool]string{true: "an ExternalName Service", false: "headless"}[svc.Spec.Type == v1.ServiceTypeExternalName])
	default:
		var missing []string
		for _, p := range si.Spec.Ports {
			if !slices.ContainsFunc(svc.Spec.Ports, func(sp v1.ServicePort) bool { return sp.Name == p.Name }) {
				missing = append(missing, fmt.Sprintf("%q", p.Name))
			}
		}
		if len(missing) > 0 {
			cond.Status, cond.Reason = metav1.ConditionFalse, "PortConflict"
			cond.Message = fmt.Sprintf("the local Service %s has no port named %s: the import's endpoints for it are not added (endpoints are matched to ports by name)", si.Name, strings.Join(missing, ", "))
		} else {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "ServiceMerged", fmt.Sprintf("the import's endpoints join the local Service %s (%s)", si.Name, policy.Strategy)
		}
	}
	return cond, true
}

// ConditionEndpointsStale is a ServiceImport condition of this
// controller's: True while every source cluster of the import has been
// unreachable for longer than the endpoint TTL, and their last known
// endpoints are kept (fail static) rather than withdrawn.
const ConditionEndpointsStale = "EndpointsStale"

func staleCondition(stale []string, ttl time.Duration) metav1.Condition {
	if len(stale) == 0 {
		return metav1.Condition{Type: ConditionEndpointsStale, Status: metav1.ConditionFalse, Reason: "SourcesReachable", Message: "the endpoints come from reachable source clusters"}
	}
	return metav1.Condition{
		Type: ConditionEndpointsStale, Status: metav1.ConditionTrue, Reason: "SourcesUnreachable",
		Message: fmt.Sprintf("every source cluster (%s) has been unreachable for longer than the endpoint TTL (%s); their last known endpoints are kept until one answers", strings.Join(stale, ", "), ttl),
	}
}

// ConditionClusterSetIPConflict is a ServiceImport condition of this
// controller's: True while an import it did not write, in the same member,
// carries one of the import's clusterset IPs. Proxies that trust only this
// controller's imports still program the right one; a proxy or DNS server
// that trusts any import might not, so the owner of the import hears of it.
const ConditionClusterSetIPConflict = "ClusterSetIPConflict"

// ipConflictCondition is the ClusterSetIPConflict condition of si in m.
func (c *Controller) ipConflictCondition(m *member, si *mcsv1beta1.ServiceImport) metav1.Condition {
	key := si.Namespace + "/" + si.Name
	var claims []string
	for _, ip := range si.Spec.IPs {
		for _, other := range m.foreignImports(ip, key, c.cfg.ManagedBy) {
			claims = append(claims, fmt.Sprintf("%s (%s)", other, ip))
		}
	}
	if len(claims) == 0 {
		return noIPConflictCondition
	}
	return metav1.Condition{
		Type: ConditionClusterSetIPConflict, Status: metav1.ConditionTrue, Reason: "ForeignServiceImport",
		Message: fmt.Sprintf("ServiceImports not written by %s carry this import's clusterset IPs: %s; proxies that trust only %s keep this import", c.cfg.ManagedBy, strings.Join(claims, ", "), c.cfg.ManagedBy),
	}
}

var noIPConflictCondition = metav1.Condition{Type: ConditionClusterSetIPConflict, Status: metav1.ConditionFalse, Reason: "NoConflict", Message: "no other ServiceImport carries this import's clusterset IPs"}

// HealthyImportConditions are the conditions this controller writes on
// almost every import: ready, no foreign import on its clusterset IPs, its
// sources reachable. (The controller benchmark's limit phase writes the
// same, so that it measures the same writes.)
func HealthyImportConditions() []metav1.Condition {
	return []metav1.Condition{importReadyCondition(nil, nil, "", ""), noIPConflictCondition, staleCondition(nil, 0)}
}

// importReadyCondition is the Ready condition of an import with IP
// families families in a member serving the families served (empty:
// unknown, assumed to serve all). ipError says why clusterset IPs are
// missing, if they are.
func importReadyCondition(families []v1.IPFamily, served map[v1.IPFamily]bool, member, ipError string) metav1.Condition {
	ready := metav1.Condition{Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue, Reason: string(mcsv1beta1.ServiceImportReasonReady), Message: "the import is ready"}
	if len(served) > 0 && !slices.ContainsFunc(families, func(f v1.IPFamily) bool { return served[f] }) {
		ready.Status, ready.Reason = metav1.ConditionFalse, string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported)
		ready.Message = fmt.Sprintf("the import's IP families %v are not served by cluster %s, whose Service CIDRs are %s only", families, member, familyList(served))
	} else if ipError != "" {
		ready.Status, ready.Reason = metav1.ConditionFalse, string(mcsv1beta1.ServiceImportReasonPending)
		ready.Message = "no clusterset IP: " + ipError
	}
	return ready
}

// memberFamilies returns the IP families of m's Service CIDRs; empty when
// unknown (then every family is assumed to be served).
func memberFamilies(m *member) map[v1.IPFamily]bool {
	cidrs, _ := m.serviceCIDRs.List(labels.Everything())
	out := map[v1.IPFamily]bool{}
	for _, sc := range cidrs {
		for _, s := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				if p.Addr().Is4() {
					out[v1.IPv4Protocol] = true
				} else {
					out[v1.IPv6Protocol] = true
				}
			}
		}
	}
	return out
}

func familyList(f map[v1.IPFamily]bool) string {
	var out []string
	for _, x := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		if f[x] {
			out = append(out, string(x))
		}
	}
	return fmt.Sprint(out)
}

// importedSlicesIn returns the slices this controller wrote into m for
// import ns/name: its MCS EndpointSlices; the EndpointSlices of its derived
// Service (derived mode); and those of other local Services (native names
// in derived mode).
func importedSlicesIn(m *member, ns, name string) (mcs, derived, local []*writtenSlice) {
	derivedName := export.DerivedName(ns, name)
	for _, s := range writtenIn(m, ns, name) {
		switch service, isLocal := s.service(); {
		case !isLocal:
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
func (c *Controller) mcsSlicesFor(m *member, d *desiredState, si *mcsv1beta1.ServiceImport) map[string]*discoveryv1.EndpointSlice {
	owner := []metav1.OwnerReference{{
		APIVersion: mcsv1beta1.GroupVersion.String(),
		Kind:       mcsv1beta1.ServiceImportKindName,
		Name:       si.Name,
		UID:        si.UID,
	}}
	out := make(map[string]*discoveryv1.EndpointSlice, len(d.Slices))
	for _, s := range c.memberView(m, d) {
		s.OwnerReferences = owner
		out[s.Name] = s
	}
	return out
}

// writeSlices makes the slices have (of one kind, in si's namespace of m)
// exactly want, leaving alone the slices of source clusters whose state is
// unknown. triggers are, by wanted slice name, when the change each
// carries happened (the propagation metric).
func (c *Controller) writeSlices(ctx context.Context, m *member, si *mcsv1beta1.ServiceImport, want map[string]*discoveryv1.EndpointSlice, have []*writtenSlice, triggers map[string]time.Time) error {
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
		var err error
		if !ok {
			_, err = api.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
			if apierrors.IsAlreadyExists(err) {
				// Our cache lags behind our own earlier create.
				var read *discoveryv1.EndpointSlice
				if read, err = api.Get(ctx, name, metav1.GetOptions{}); err == nil {
					cur = newWrittenSlice(read)
					ok = !sameSlice(cur, want)
				}
			}
		}
		if ok {
			_, err = api.Update(ctx, cur.update(want), metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("writing EndpointSlice %s/%s in %s: %w", si.Namespace, name, m.id, err))
		} else if t, ok := triggers[name]; ok {
			c.metrics.observePropagation(m.id, time.Since(t))
		}
	}
	for _, s := range existing {
		if c.retainedSource(s.sourceCluster()) {
			continue
		}
		errs = append(errs, c.deleteSlice(ctx, m, s, si))
	}
	return errors.Join(errs...)
}

// deleteSlice deletes one of m's slices that carry our managed-by label and
// are not desired. Most are ours and stale (a source slice went away). A
// slice someone else wrote with our label would otherwise be programmed by
// every proxy that trusts our label, so it is deleted all the same, and
// said loudly: a log line and a metric per slice, and an event on the
// import when there is one.
func (c *Controller) deleteSlice(ctx context.Context, m *member, s *writtenSlice, si *mcsv1beta1.ServiceImport) error {
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
		c.metrics.countForeignSlice(m.id)
		if si != nil {
			m.recorder.Eventf(si, v1.EventTypeWarning, "ForeignEndpointSliceDeleted",
				"deleted EndpointSlice %s, labelled as written by this controller but written by %s", s.name, strings.Join(s.writers, ", "))
		}
	}
	return nil
}

// holdsNothing tells whether m's caches show neither an import of ns/name
// written by this controller nor any of its slices.
func (c *Controller) holdsNothing(m *member, ns, name string) bool {
	if si, err := m.imports.ServiceImports(ns).Get(name); err == nil && c.wrote(si) {
		return false
	}
	// A derived Service is held only while its import is (owner
	// reference): one someone labelled as ours is not.
	return len(writtenIn(m, ns, name)) == 0
}

// removeImport deletes m's import of ns/name and its slices, except the
// slices of source clusters whose state is unknown.
func (c *Controller) removeImport(ctx context.Context, m *member, ns, name string) error {
	var errs []error
	retainedAny := false
	si, err := m.imports.ServiceImports(ns).Get(name)
	if err != nil {
		si = nil
	}
	for _, s := range writtenIn(m, ns, name) {
		if c.retainedSource(s.sourceCluster()) {
			retainedAny = true
			continue
		}
		errs = append(errs, c.deleteSlice(ctx, m, s, si))
	}
	// The native and derived Services go with their import (their owner
	// reference says so too, for a member whose garbage collector is
	// slow); a Service someone else made, whatever its labels, stays.
	for _, svcName := range []string{name, export.DerivedName(ns, name)} {
		if svc, err := m.services.Services(ns).Get(svcName); err == nil && si != nil && c.wrote(svc) && export.OwnedByImport(svc, si) && !retainedAny {
			errs = append(errs, deleteOwnService(ctx, m, svc))
		}
	}
	if si != nil && c.wrote(si) && !retainedAny {
		err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(si.UID)}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

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
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Derived mode serves a member whose proxies do not program ServiceImports
// (upstream kube-proxy, a kube-proxy-free network plugin): each import is
// represented there by its derived Service, an ordinary selector-less
// Service with EndpointSlices per source cluster, which any Service proxy
// programs and cluster DNS answers for; the import's ips are that
// Service's cluster IPs, so that clusterset.local answers with addresses
// the member's proxies serve. A member with our kube-proxy may be served
// either way; our kube-proxy leaves a derived import to the Service path.

// derivedSettle is how long, on a switch from native mode, a new derived
// Service exists before the import names its IPs: longer than a proxy
// takes to program a Service (kube-proxy syncs at most once a second by
// default).
const derivedSettle = 3 * time.Second

// derived tells whether member m is served in derived mode.
func (cfg *Config) derived(m *member) bool { return cfg.DerivedMembers[m.id] }

// derivedWriter serves a member whose proxies do not program
// ServiceImports (see above).
type derivedWriter struct{ writes }

// write writes import d into derived member m: the import (named
// after its derived Service by the annotation), the derived Service, its
// slices, and the import's status. The order keeps the clusterset name
// answering on a switch from native mode: the derived Service and its
// endpoints exist before the import names their IPs, and the MCS slices go
// only after it does.
func (w derivedWriter) write(ctx context.Context, key string, d *desiredState) error {
	m := w.m
	m.state.retiring.Delete(key)
	m.state.switching.Delete(key)
	want := d.Import.DeepCopy()
	want.Annotations = maps.Clone(want.Annotations)
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Annotations[export.AnnotationDerivedService] = export.DerivedName(want.Namespace, want.Name)
	// The derived Service is owned by the import, so the import comes
	// first; a new one names no IP until the Service has them.
	si, err := m.imports.ServiceImports(want.Namespace).Get(want.Name)
	if err != nil || !w.wrote(si) {
		first := want.DeepCopy()
		first.Spec.IPs = nil
		if si, err = w.writeImport(ctx, first); err != nil || si == nil {
			return err
		}
	}
	svc, blocked, err := w.writeDerivedService(ctx, si)
	if err != nil {
		return err
	}
	mcsSlices, derivedSlices, localSlices := importedSlicesIn(m, want.Namespace, want.Name)
	var errs []error
	dd := *d
	dd.IPError = blocked
	if blocked != "" {
		// Looked at again now and then: the Service may go.
		m.queue.AddAfter(key, 30*time.Second)
	}
	if svc != nil {
		wantSlices, triggers, chosen := w.derivedSlicesFor(d, svc, w.derivedSelectionResults(ctx, d, si))
		if err := w.writeSlices(ctx, si, wantSlices, derivedSlices, triggers); err != nil {
			errs = append(errs, err)
		} else {
			w.reportDerivedChoice(si, key, chosen)
		}
		if left := derivedSettle - time.Since(svc.CreationTimestamp.Time); si.Annotations[export.AnnotationDerivedService] == "" && len(si.Spec.IPs) > 0 && left > 0 {
			// Switching from native mode: DNS answers the import's IPs
			// as soon as it names them, so the proxies get a sync to
			// program the new Service first.
			m.queue.AddAfter(key, left)
			return errors.Join(errs...)
		}
		want.Spec.IPs = nil
		if want.Spec.Type == mcsv1beta1.ClusterSetIP {
			want.Spec.IPs = slices.Clone(svc.Spec.ClusterIPs)
		}
	} else {
		// No derived Service can be made here (no family of the
		// import is served, or its name is taken; the Ready condition
		// says so): the import names no IP rather than addresses
		// nobody serves.
		want.Spec.IPs = nil
		errs = append(errs, w.writeSlices(ctx, si, nil, derivedSlices, nil))
	}
	updated, err := w.writeImport(ctx, want)
	if err != nil || updated == nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, w.writeSlices(ctx, updated, nil, mcsSlices, nil),
		w.writeNativeService(ctx, updated), w.writeLocalServiceSlices(ctx, updated, d, localSlices))
	errs = append(errs, w.writeImportStatus(ctx, &dd, updated))
	if m.sel != nil {
		// The results say, as in a native member, which clusters the
		// member's slices hold.
		errs = append(errs, w.writeClusterSelection(ctx, d, updated))
	}
	return errors.Join(errs...)
}

// derivedSlicesFor returns the EndpointSlices of derived Service svc in m,
// by name, and the propagation triggers by those names: of the clusters
// chosen with results (cluster selection), of every cluster without.
func (w derivedWriter) derivedSlicesFor(d *desiredState, svc *v1.Service, results []csv1beta1.ClusterSelectorResult) (map[string]*discoveryv1.EndpointSlice, map[string]time.Time, map[string]int) {
	out := map[string]*discoveryv1.EndpointSlice{}
	triggers := map[string]time.Time{}
	imported := w.memberView(d)
	var chosen map[string]int
	if d.Import != nil {
		imported, chosen = chooseForDerived(results, d.Import.Spec.Ports, imported)
	}
	for imported, s := range export.DerivedSlices(imported, svc, w.cfg.ManagedBy) {
		out[s.Name] = s
		if t, ok := d.Triggers[imported]; ok {
			triggers[s.Name] = t
		}
	}
	return out, triggers, chosen
}

// writeDerivedService makes m's derived Service of import si what it
// should be and returns it. It returns no Service when the member serves
// none of the import's IP families, or, with why, when a Service of that
// name exists that this controller did not write: that one is never
// touched, and the import cannot be served in m.
func (w derivedWriter) writeDerivedService(ctx context.Context, si *mcsv1beta1.ServiceImport) (*v1.Service, string, error) {
	m := w.m
	want := export.DerivedService(si, w.cfg.ManagedBy)
	if !fitFamilies(want, memberFamilies(m)) {
		return nil, "", nil
	}
	api := m.kube.CoreV1().Services(si.Namespace)
	taken := func(have *v1.Service) string {
		why := fmt.Sprintf("its derived Service name %s is taken by a Service %s did not create", want.Name, w.cfg.ManagedBy)
		if m.state.firstTime(string(have.UID) + "/derived") {
			klog.FromContext(ctx).Info("A Service not written by the controller has the name of an import's derived Service; the import is not served in this member", "cluster", m.id, "service", klog.KObj(have), "import", klog.KObj(si))
			m.recorder.Eventf(si, have, v1.EventTypeWarning, "DerivedServiceConflict", "WriteDerivedService", "the import cannot be served in cluster %s: %s", m.id, why)
		}
		return why
	}
	have, err := m.services.Services(si.Namespace).Get(want.Name)
	if err == nil && !w.ownsDerived(have, si) {
		return nil, taken(have), nil
	}
	if err == nil && needsRecreate(have, want) {
		// Headless-ness and the IP families cannot change in place.
		if err := deleteOwnService(ctx, m, have); err != nil {
			return nil, "", err
		}
		err = apierrors.NewNotFound(v1.Resource("services"), want.Name)
	}
	if apierrors.IsNotFound(err) {
		created, err := api.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		if err == nil {
			m.recorder.Eventf(si, created, v1.EventTypeNormal, "DerivedServiceCreated", "CreateDerivedService", "created derived Service %s (cluster IPs %v)", created.Name, created.Spec.ClusterIPs)
			return created, "", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, "", fmt.Errorf("creating derived Service %s/%s in %s: %w", si.Namespace, want.Name, m.id, err)
		}
		// The cache lags behind our own create, or someone was faster.
		if have, err = api.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
			return nil, "", err
		}
		if !w.ownsDerived(have, si) {
			return nil, taken(have), nil
		}
	} else if err != nil {
		return nil, "", err
	}
	// Whatever someone else changed in it (a selector, a type that
	// exposes it outside the cluster, external IPs) is put back.
	update := export.ServiceUpdate(have, want)
	if update == nil {
		return have, "", nil
	}
	if update.Spec.Type != have.Spec.Type || len(have.Spec.Selector) > 0 || len(have.Spec.ExternalIPs) > 0 {
		m.recorder.Eventf(si, have, v1.EventTypeWarning, "DerivedServiceRestored", "RestoreDerivedService", "derived Service %s in cluster %s was changed by someone else; the controller put it back", have.Name, m.id)
	}
	updated, err := api.Update(ctx, update, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, "", fmt.Errorf("updating derived Service %s/%s in %s: %w", si.Namespace, want.Name, m.id, err)
	}
	return updated, "", nil
}

// ownsDerived tells whether svc, of import si's derived name, is the
// controller's own derived Service of si: labelled as its own and owned
// by si by owner reference. A Service of that name someone else created,
// whatever its labels, is never adopted.
func (w writes) ownsDerived(svc *v1.Service, si *mcsv1beta1.ServiceImport) bool {
	return w.wrote(svc) && export.OwnedByImport(svc, si)
}

// fitFamilies keeps, in svc (a derived Service), only the IP families the
// member serves (served empty: unknown, all kept), so that a dual-stack
// import gets a single-stack derived Service in a single-stack member
// instead of being refused. It returns false when none is left.
func fitFamilies(svc *v1.Service, served map[v1.IPFamily]bool) bool {
	if len(served) == 0 || len(svc.Spec.IPFamilies) == 0 {
		return true
	}
	svc.Spec.IPFamilies = slices.DeleteFunc(svc.Spec.IPFamilies, func(f v1.IPFamily) bool { return !served[f] })
	switch len(svc.Spec.IPFamilies) {
	case 0:
		return false
	case 1:
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicySingleStack)
	}
	return true
}

// needsRecreate tells whether derived Service have must be replaced to
// become want: a change between headless and not, or of IP families.
func needsRecreate(have, want *v1.Service) bool {
	if (have.Spec.ClusterIP == v1.ClusterIPNone) != (want.Spec.ClusterIP == v1.ClusterIPNone) {
		return true
	}
	return len(want.Spec.IPFamilies) > 0 && !slices.Equal(have.Spec.IPFamilies, want.Spec.IPFamilies)
}

// retireDerived removes, from native member m, the derived Service of
// import si and its slices, left from when m was served in derived mode.
// Clients may still hold its IPs from DNS answers given before the switch,
// so it keeps serving the import's endpoints for DerivedGrace first.
func (w writes) retireDerived(ctx context.Context, si *mcsv1beta1.ServiceImport, d *desiredState, have []*writtenSlice) error {
	m := w.m
	key := si.Namespace + "/" + si.Name
	svc, err := m.services.Services(si.Namespace).Get(export.DerivedName(si.Namespace, si.Name))
	if err != nil || !w.ownsDerived(svc, si) {
		m.state.retiring.Delete(key)
		// Slices left without their Service (its deletion was seen
		// first) are deleted, not left to the garbage collector alone.
		return w.writeSlices(ctx, si, nil, have, nil)
	}
	if left := w.cfg.DerivedGrace - time.Since(since(&m.state.retiring, key)); left > 0 {
		// A native member's proxies choose among the clusters themselves.
		want, triggers, _ := derivedWriter{w}.derivedSlicesFor(d, svc, nil)
		m.queue.AddAfter(key, left)
		return w.writeSlices(ctx, si, want, have, triggers)
	}
	klog.FromContext(ctx).V(2).Info("Removing the derived Service of a member now served natively", "cluster", m.id, "service", klog.KObj(svc))
	if err := w.writeSlices(ctx, si, nil, have, nil); err != nil {
		return err
	}
	if err := deleteOwnService(ctx, m, svc); err != nil {
		return err
	}
	m.state.retiring.Delete(key)
	return nil
}

// ownServiceKey returns namespace/<value of label> of obj if it is a
// Service that manager (this controller's ManagedBy) wrote and that
// carries label: with mcsv1beta1.LabelServiceName, the import key a
// derived or native-names Service stands for; with
// export.LabelIngressFor, the export key of an ingress Service.
func ownServiceKey(manager string, obj any, label string) (string, bool) {
	svc := eventObject[*v1.Service](obj)
	if svc == nil || !wroteBy(manager, svc) || svc.Labels[label] == "" {
		return "", false
	}
	return svc.Namespace + "/" + svc.Labels[label], true
}

// writeLocalServiceSlices makes the local Service of import si's name in
// derived member m serve the other source clusters' endpoints where the
// exporters ask for RemoteAndLocal: written as EndpointSlices of that
// Service, which any Service proxy adds to the Service's own endpoints
// (in a native member our kube-proxy does this itself, per node). have
// are such slices already written.
func (w derivedWriter) writeLocalServiceSlices(ctx context.Context, si *mcsv1beta1.ServiceImport, d *desiredState, have []*writtenSlice) error {
	m := w.m
	var want map[string]*discoveryv1.EndpointSlice
	policy, err := mcsproxy.NativeNamesOf(si.Annotations)
	if err == nil && policy.Strategy == mcsproxy.RemoteAndLocal && si.Spec.Type == mcsv1beta1.ClusterSetIP {
		svc, err := m.services.Services(si.Namespace).Get(si.Name)
		// Only a Service whose owner accepts native names (or the one
		// this controller created) is joined by other clusters'
		// endpoints, as our kube-proxy decides it in a native member.
		if err == nil && svc.Spec.Type != v1.ServiceTypeExternalName && svc.Spec.ClusterIP != v1.ClusterIPNone &&
			mcsproxy.AcceptsNativeNames(svc, []string{w.cfg.ManagedBy}) {
			var remote []*discoveryv1.EndpointSlice
			for _, s := range w.memberView(d) {
				if s.Labels[mcsv1beta1.LabelSourceCluster] != m.id {
					remote = append(remote, s)
				}
			}
			want = map[string]*discoveryv1.EndpointSlice{}
			for _, s := range export.LocalServiceSlices(remote, svc, si.Name, w.cfg.ManagedBy) {
				want[s.Name] = s
			}
		}
		// A Service just created is not in the cache yet: its event
		// brings the import back here.
	}
	return w.writeSlices(ctx, si, want, have, nil)
}

// announceClusterSetIPs is the first step of switching import have, still
// derived, to native mode in m: the import keeps naming its derived
// Service, and gets its clusterset IPs in mcsproxy.AnnotationClusterSetIPs,
// which our kube-proxy programs (with the MCS slices already written) in
// the meantime. It tells to wait until the proxies have had derivedSettle
// to do so; only then does the import name the clusterset IPs, which DNS
// answers at once.
func (w importWriter) announceClusterSetIPs(ctx context.Context, key string, have *mcsv1beta1.ServiceImport, d *desiredState) (bool, error) {
	m := w.m
	if d.Import.Spec.Type != mcsv1beta1.ClusterSetIP || len(d.Import.Spec.IPs) == 0 {
		return false, nil
	}
	ips := strings.Join(d.Import.Spec.IPs, ",")
	if have.Annotations[mcsproxy.AnnotationClusterSetIPs] != ips {
		update := have.DeepCopy()
		update.Annotations = maps.Clone(update.Annotations)
		update.Annotations[mcsproxy.AnnotationClusterSetIPs] = ips
		if _, err := m.mcs.MulticlusterV1beta1().ServiceImports(have.Namespace).Update(ctx, update, metav1.UpdateOptions{}); err != nil {
			return true, fmt.Errorf("updating ServiceImport %s in %s: %w", key, m.id, err)
		}
		m.state.switching.Store(key, time.Now())
		m.queue.AddAfter(key, derivedSettle)
		return true, nil
	}
	if left := derivedSettle - time.Since(since(&m.state.switching, key)); left > 0 {
		m.queue.AddAfter(key, left)
		return true, nil
	}
	return false, nil
}

package catalogmodel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	catalogclientset "k8s.io/multiclusterservices/client/catalog/clientset/versioned"
	cataloglisters "k8s.io/multiclusterservices/client/catalog/listers/catalog/v1alpha1"
)

// Status is the status every catalog object should have after one
// resolution; Write writes what changed.
type Status struct {
	res catalog.Result
	// ready are Ready conditions by catalog.ObjectKey.
	ready map[string]metav1.Condition
	// ips by catalog.ObjectKey (global services and imports).
	ips      map[string][]string
	clusters map[string][]catalogv1alpha1.BackendCluster
	health   map[string][]catalogv1alpha1.EndpointHealth
	// probed are the HealthChecked conditions of bindings with a health
	// check, by catalog.ObjectKey.
	probed map[string]metav1.Condition
}

func newStatus(res catalog.Result) *Status {
	return &Status{
		res: res, ready: map[string]metav1.Condition{}, ips: map[string][]string{},
		clusters: map[string][]catalogv1alpha1.BackendCluster{}, health: map[string][]catalogv1alpha1.EndpointHealth{},
		probed: map[string]metav1.Condition{},
	}
}

func readyCondition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: catalog.ConditionReady, Status: status, Reason: reason, Message: message}
}

// binding records the Ready condition of binding namespace/name.
func (st *Status) binding(namespace, name string, status metav1.ConditionStatus, reason, message string) {
	st.ready["ServiceBinding/"+namespace+"/"+name] = readyCondition(status, reason, message)
}

// bindingReady records whether binding b serves a ready endpoint, from
// the slices it contributes, and its addresses' health (probes, of the
// targets probed; unprobed, why the others are not, by Target.ID).
func (st *Status) bindingReady(b *catalogv1alpha1.ServiceBinding, slices []*discoveryv1.EndpointSlice, probes map[string]Probe, unprobed map[string]string) {
	key := catalog.ObjectKey("ServiceBinding", b)
	if b.Spec.HealthCheck != nil {
		eps, over, why := endpointHealth(b, probes, unprobed)
		st.health[key] = eps
		st.probed[key] = metav1.Condition{Type: catalog.ConditionHealthChecked, Status: metav1.ConditionTrue, Reason: catalog.ReasonProbed, Message: "every address is probed"}
		if over > 0 {
			st.probed[key] = metav1.Condition{Type: catalog.ConditionHealthChecked, Status: metav1.ConditionFalse, Reason: catalog.ReasonProbeLimitReached,
				Message: fmt.Sprintf("%d of %d addresses are not probed, and not ready: %s", over, len(eps), why)}
		}
	}
	ready := export.ReadyEndpoints(slices)
	if ready == 0 {
		st.ready[key] = readyCondition(metav1.ConditionFalse, "NoReadyEndpoints", fmt.Sprintf("no ready endpoint in cluster %s", b.Spec.Cluster))
		return
	}
	st.ready[key] = readyCondition(metav1.ConditionTrue, "EndpointsReady", fmt.Sprintf("%d ready endpoint(s) in cluster %s", ready, b.Spec.Cluster))
}

// placement records the Ready condition of the catalog import that asked
// for placement p (none for an ImportAll placement).
func (st *Status) placement(p catalog.Placement, status metav1.ConditionStatus, reason, message string, ips []string) {
	if p.Import == "" {
		return
	}
	key := "GlobalServiceImport/" + p.Import
	st.ready[key] = readyCondition(status, reason, message)
	st.ips[key] = ips
}

// global records the status of a global service.
func (st *Status) global(svc *catalog.Service, clusters, ips []string, ipError string, bindings []*catalogv1alpha1.ServiceBinding) {
	key := catalog.ObjectKey("GlobalService", svc.Global)
	st.ips[key] = ips
	for _, cl := range clusters {
		bc := catalogv1alpha1.BackendCluster{Cluster: cl}
		for _, b := range bindings {
			if b.Spec.Cluster == cl {
				bc.Bindings = append(bc.Bindings, b.Name)
			}
		}
		st.clusters[key] = append(st.clusters[key], bc)
	}
	switch {
	case len(bindings) == 0:
		st.ready[key] = readyCondition(metav1.ConditionFalse, "NoBackends", "no valid ServiceBinding provides the service")
	case ipError != "":
		st.ready[key] = readyCondition(metav1.ConditionFalse, "NoClusterSetIP", "no clusterset IP: "+ipError)
	default:
		st.ready[key] = readyCondition(metav1.ConditionTrue, "Ready", fmt.Sprintf("provided by %s, imported in %d place(s)", strings.Join(clusters, ", "), len(svc.Placements)))
	}
}

// StatusWriter is where Write reads the catalog objects and writes
// their status.
type StatusWriter struct {
	Hub      catalogclientset.Interface
	Globals  cataloglisters.GlobalServiceLister
	Bindings cataloglisters.ServiceBindingLister
	Imports  cataloglisters.GlobalServiceImportLister
	Recorder events.EventRecorder
}

// Write updates the status of every catalog object whose status changed,
// and tells each object that became invalid, or whose addresses went
// over the probe limits, in an event.
func (st *Status) Write(ctx context.Context, s StatusWriter) error {
	client := s.Hub.CatalogV1alpha1()
	opts := metav1.UpdateOptions{}
	globals, _ := s.Globals.List(labels.Everything())
	errs := writeStatus(ctx, st, s, "GlobalService", globals,
		func(o *catalogv1alpha1.GlobalService) *catalogv1alpha1.GlobalServiceStatus { return &o.Status },
		func(key string, next nextStatus) catalogv1alpha1.GlobalServiceStatus {
			return catalogv1alpha1.GlobalServiceStatus{Conditions: next.conds, Clusters: st.clusters[key], IPs: next.ips(st, key)}
		},
		func(ctx context.Context, o *catalogv1alpha1.GlobalService) error {
			_, err := client.GlobalServices(o.Namespace).UpdateStatus(ctx, o, opts)
			return err
		})
	bindings, _ := s.Bindings.List(labels.Everything())
	errs = append(errs, writeStatus(ctx, st, s, "ServiceBinding", bindings,
		func(o *catalogv1alpha1.ServiceBinding) *catalogv1alpha1.ServiceBindingStatus { return &o.Status },
		func(key string, next nextStatus) catalogv1alpha1.ServiceBindingStatus {
			return catalogv1alpha1.ServiceBindingStatus{Conditions: next.conds, Endpoints: st.health[key]}
		},
		func(ctx context.Context, o *catalogv1alpha1.ServiceBinding) error {
			_, err := client.ServiceBindings(o.Namespace).UpdateStatus(ctx, o, opts)
			return err
		})...)
	imports, _ := s.Imports.List(labels.Everything())
	errs = append(errs, writeStatus(ctx, st, s, "GlobalServiceImport", imports,
		func(o *catalogv1alpha1.GlobalServiceImport) *catalogv1alpha1.GlobalServiceImportStatus {
			return &o.Status
		},
		func(key string, next nextStatus) catalogv1alpha1.GlobalServiceImportStatus {
			return catalogv1alpha1.GlobalServiceImportStatus{Conditions: next.conds, IPs: next.ips(st, key)}
		},
		func(ctx context.Context, o *catalogv1alpha1.GlobalServiceImport) error {
			_, err := client.GlobalServiceImports(o.Namespace).UpdateStatus(ctx, o, opts)
			return err
		})...)
	return errors.Join(errs...)
}

// statusConditions are the status types of the catalog's kinds, each with
// its Conditions (conditionsOf).
type statusConditions interface {
	catalogv1alpha1.GlobalServiceStatus | catalogv1alpha1.ServiceBindingStatus | catalogv1alpha1.GlobalServiceImportStatus
}

// writeStatus writes, for the objects of one catalog kind (objs, from the
// hub's cache, never changed), the status want makes of the resolution
// where it differs from the status they have (status returns it).
func writeStatus[T interface {
	metav1.Object
	runtime.Object
}, S statusConditions](ctx context.Context, st *Status, s StatusWriter, kind string, objs []T,
	status func(T) *S, want func(key string, next nextStatus) S, update func(context.Context, T) error) []error {
	var errs []error
	for _, o := range objs {
		key := catalog.ObjectKey(kind, o)
		before := conditionsOf(*status(o))
		next, ok := st.next(key, o, before)
		if !ok {
			continue
		}
		w := want(key, next)
		if apiequality.Semantic.DeepEqual(*status(o), w) {
			continue
		}
		u := o.DeepCopyObject().(T)
		*status(u) = w
		if err := next.written(s, key, u, before, update(ctx, u)); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func conditionsOf[S statusConditions](status S) []metav1.Condition {
	switch st := any(status).(type) {
	case catalogv1alpha1.GlobalServiceStatus:
		return st.Conditions
	case catalogv1alpha1.ServiceBindingStatus:
		return st.Conditions
	case catalogv1alpha1.GlobalServiceImportStatus:
		return st.Conditions
	}
	return nil
}

// nextStatus is what one resolution makes of a catalog object's
// conditions.
type nextStatus struct {
	conds         []metav1.Condition
	valid, probed metav1.Condition
	// checked: the object has a health check (and probed is its
	// HealthChecked condition).
	checked bool
	// showIPs: the object is valid and ready, and its status shows its
	// clusterset IPs.
	showIPs bool
}

// ips are the clusterset IPs the status of object key shows.
func (n nextStatus) ips(st *Status, key string) []string {
	if !n.showIPs {
		return nil
	}
	return st.ips[key]
}

// next computes the conditions of the catalog object key (kind/namespace/name)
// from those it has; false when the resolution did not see it.
func (st *Status) next(key string, o metav1.Object, have []metav1.Condition) (nextStatus, bool) {
	valid, known := st.res.Valid[key]
	if !known {
		return nextStatus{}, false
	}
	conds := slices.Clone(have)
	valid.ObservedGeneration = o.GetGeneration()
	meta.SetStatusCondition(&conds, valid)
	ready, hasReady := st.ready[key]
	if !hasReady && valid.Status == metav1.ConditionTrue {
		ready = readyCondition(metav1.ConditionFalse, "NotPlaced", "not imported anywhere")
		if strings.HasPrefix(key, "ServiceBinding/") {
			ready = readyCondition(metav1.ConditionFalse, "NoReadyEndpoints", "no endpoints")
		}
	} else if !hasReady {
		ready = readyCondition(metav1.ConditionFalse, valid.Reason, valid.Message)
	}
	ready.ObservedGeneration = o.GetGeneration()
	meta.SetStatusCondition(&conds, ready)
	probed, checked := st.probed[key]
	if checked {
		probed.ObservedGeneration = o.GetGeneration()
		meta.SetStatusCondition(&conds, probed)
	} else {
		meta.RemoveStatusCondition(&conds, catalog.ConditionHealthChecked)
	}
	return nextStatus{conds: conds, valid: valid, probed: probed, checked: checked,
		showIPs: valid.Status == metav1.ConditionTrue && ready.Status == metav1.ConditionTrue}, true
}

// written reports the status update of catalog object key (err is the
// update's): an object gone is no error; one that became invalid, or
// whose addresses went over the probe limits, gets an event.
func (n nextStatus) written(s StatusWriter, key string, update runtime.Object, before []metav1.Condition, err error) error {
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("updating the status of %s: %w", key, err)
	}
	if b := meta.FindStatusCondition(before, catalog.ConditionValid); (b == nil || b.Reason != n.valid.Reason) && n.valid.Status == metav1.ConditionFalse {
		s.Recorder.Eventf(update, nil, v1.EventTypeWarning, n.valid.Reason, "Validate", "%s", n.valid.Message)
	}
	if b := meta.FindStatusCondition(before, catalog.ConditionHealthChecked); n.checked && (b == nil || b.Reason != n.probed.Reason) && n.probed.Status == metav1.ConditionFalse {
		s.Recorder.Eventf(update, nil, v1.EventTypeWarning, n.probed.Reason, "HealthCheck", "%s", n.probed.Message)
	}
	return nil
}

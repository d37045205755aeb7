package mcs

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
)

// catalogStatus collects, during one resolution, the status every
// catalog object should have, and writes what changed.
type catalogStatus struct {
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

func newCatalogStatus(res catalog.Result) *catalogStatus {
	return &catalogStatus{
		res: res, ready: map[string]metav1.Condition{}, ips: map[string][]string{},
		clusters: map[string][]catalogv1alpha1.BackendCluster{}, health: map[string][]catalogv1alpha1.EndpointHealth{},
		probed: map[string]metav1.Condition{},
	}
}

func readyCondition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: catalog.ConditionReady, Status: status, Reason: reason, Message: message}
}

// binding records the Ready condition of binding namespace/name.
func (st *catalogStatus) binding(namespace, name string, status metav1.ConditionStatus, reason, message string) {
	st.ready["ServiceBinding/"+namespace+"/"+name] = readyCondition(status, reason, message)
}

// bindingReady records whether binding b serves a ready endpoint, from
// the slices it contributes, and its addresses' health.
func (st *catalogStatus) bindingReady(b *catalogv1alpha1.ServiceBinding, slices []*discoveryv1.EndpointSlice, health *healthChecker) {
	key := catalog.ObjectKey("ServiceBinding", b)
	if b.Spec.HealthCheck != nil {
		eps, unprobed, why := health.status(b.Namespace+"/"+b.Name, b)
		st.health[key] = eps
		st.probed[key] = metav1.Condition{Type: catalog.ConditionHealthChecked, Status: metav1.ConditionTrue, Reason: catalog.ReasonProbed, Message: "every address is probed"}
		if unprobed > 0 {
			st.probed[key] = metav1.Condition{Type: catalog.ConditionHealthChecked, Status: metav1.ConditionFalse, Reason: catalog.ReasonProbeLimitReached,
				Message: fmt.Sprintf("%d of %d addresses are not probed, and not ready: %s", unprobed, len(eps), why)}
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
func (st *catalogStatus) placement(p catalog.Placement, status metav1.ConditionStatus, reason, message string, ips []string) {
	if p.Import == "" {
		return
	}
	key := "ServiceImport/" + p.Import
	st.ready[key] = readyCondition(status, reason, message)
	st.ips[key] = ips
}

// global records the status of a global service.
func (st *catalogStatus) global(svc *catalog.Service, clusters, ips []string, ipError string, bindings []*catalogv1alpha1.ServiceBinding) {
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

// write updates the status of every catalog object whose status changed,
// and tells each object that became invalid, or valid again, in an event.
func (st *catalogStatus) write(ctx context.Context, c *Controller) error {
	s := c.catalog
	var errs []error
	for _, r := range []schema.GroupVersionResource{globalServicesResource, bindingsResource, catalogImportsResource} {
		kind := map[schema.GroupVersionResource]string{globalServicesResource: "GlobalService", bindingsResource: "ServiceBinding", catalogImportsResource: "ServiceImport"}[r]
		for _, o := range s.informer[r].GetStore().List() {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			key := kind + "/" + u.GetNamespace() + "/" + u.GetName()
			valid, known := st.res.Valid[key]
			if !known {
				continue
			}
			status, _, _ := unstructured.NestedMap(u.Object, "status")
			var have statusFields
			if status != nil {
				_ = runtime.DefaultUnstructuredConverter.FromUnstructured(status, &have)
			}
			conds := slices.Clone(have.Conditions)
			before := have.Conditions
			valid.ObservedGeneration = u.GetGeneration()
			meta.SetStatusCondition(&conds, valid)
			ready, hasReady := st.ready[key]
			if !hasReady && valid.Status == metav1.ConditionTrue {
				ready = readyCondition(metav1.ConditionFalse, "NotPlaced", "not imported anywhere")
				if kind == "ServiceBinding" {
					ready = readyCondition(metav1.ConditionFalse, "NoReadyEndpoints", "no endpoints")
				}
			} else if !hasReady {
				ready = readyCondition(metav1.ConditionFalse, valid.Reason, valid.Message)
			}
			ready.ObservedGeneration = u.GetGeneration()
			meta.SetStatusCondition(&conds, ready)
			probed, checked := st.probed[key]
			if checked {
				probed.ObservedGeneration = u.GetGeneration()
				meta.SetStatusCondition(&conds, probed)
			} else {
				meta.RemoveStatusCondition(&conds, catalog.ConditionHealthChecked)
			}

			fields := statusFields{Conditions: conds, Clusters: st.clusters[key], Endpoints: st.health[key]}
			if valid.Status == metav1.ConditionTrue && ready.Status == metav1.ConditionTrue {
				fields.IPs = st.ips[key]
			}
			want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&fields)
			if err != nil {
				return err
			}
			if apiequality.Semantic.DeepEqual(normalize(status), normalize(want)) {
				continue
			}
			update := u.DeepCopy()
			if err := unstructured.SetNestedField(update.Object, want, "status"); err != nil {
				return err
			}
			if _, err := s.cfg.Hub.Resource(r).Namespace(u.GetNamespace()).UpdateStatus(ctx, update, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("updating the status of %s: %w", key, err))
				continue
			}
			if b := meta.FindStatusCondition(before, catalog.ConditionValid); (b == nil || b.Reason != valid.Reason) && valid.Status == metav1.ConditionFalse {
				s.recorder.Event(update, v1.EventTypeWarning, valid.Reason, valid.Message)
			}
			if b := meta.FindStatusCondition(before, catalog.ConditionHealthChecked); checked && (b == nil || b.Reason != probed.Reason) && probed.Status == metav1.ConditionFalse {
				s.recorder.Event(update, v1.EventTypeWarning, probed.Reason, probed.Message)
			}
		}
	}
	return errors.Join(errs...)
}

// statusFields are the fields of the three kinds' status this controller
// writes (each kind has the ones it has); empty ones are left out.
type statusFields struct {
	Conditions []metav1.Condition               `json:"conditions,omitempty"`
	IPs        []string                         `json:"ips,omitempty"`
	Clusters   []catalogv1alpha1.BackendCluster `json:"clusters,omitempty"`
	Endpoints  []catalogv1alpha1.EndpointHealth `json:"endpoints,omitempty"`
}

// normalize makes a status map comparable with one built here: JSON
// numbers and empty fields as the apiserver returns them.
func normalize(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	out := map[string]any{}
	for k, v := range m {
		if l, ok := v.([]any); ok && len(l) == 0 {
			continue
		}
		out[k] = runtime.DeepCopyJSONValue(v)
	}
	return out
}

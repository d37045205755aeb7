package mcs

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// An import's status in one member: status.clusters, and the conditions
// that tell its users whether it serves there and why not.

// writeImportStatus sets status.clusters and the Ready condition of m's
// import. Ready is false where the member cannot serve the import's IP
// families, so that nobody mistakes an import that answers nothing for a
// working one.
func (w writes) writeImportStatus(ctx context.Context, d *desiredState, si *mcsv1beta1.ServiceImport) error {
	m := w.m
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
	set(w.ipConflictCondition(si), metav1.ConditionTrue)
	set(staleCondition(d.Stale, w.cfg.EndpointTTL), metav1.ConditionTrue)
	if inRange, on := w.serviceRangeCondition(si); on {
		set(inRange, metav1.ConditionTrue)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, ConditionClusterSetIPInServiceRange)
	}
	if native, on := w.nativeNamesCondition(si); on {
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
		m.recorder.Eventf(si, nil, v1.EventTypeWarning, w.Reason, "WriteImportStatus", "%s", w.Message)
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
func (w writes) nativeNamesCondition(si *mcsv1beta1.ServiceImport) (metav1.Condition, bool) {
	m := w.m
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
	case !w.writer().servesNativeNames(policy.Strategy):
		cond.Status, cond.Reason = metav1.ConditionFalse, "DerivedMember"
		cond.Message = fmt.Sprintf("cluster %s is served in derived mode (its proxies do not program ServiceImports): the local Service %s gets no endpoints of other clusters; %s is decided by the multi-cluster kube-proxy and needs native mode (RemoteAndLocal works in derived mode). The clusterset name and IP work.", m.id, si.Name, policy.Strategy)
		return cond, true
	}
	svc, err := m.services.Services(si.Namespace).Get(si.Name)
	switch {
	case err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "ServiceCreated", fmt.Sprintf("Service %s is created for the import (%s)", si.Name, policy.Strategy)
	case w.wrote(svc):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "ServiceCreated", fmt.Sprintf("Service %s was created for the import (%s)", si.Name, policy.Strategy)
	case !mcsproxy.AcceptsNativeNames(svc, []string{w.cfg.ManagedBy}):
		cond.Status, cond.Reason = metav1.ConditionFalse, string(mcsproxy.ReasonNativeNamesNotAccepted)
		cond.Message = fmt.Sprintf("the local Service %s keeps only its own endpoints: its owner has not accepted native names (annotation %s=\"true\" on the Service)", si.Name, mcsproxy.AnnotationAcceptNativeNames)
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
func (w writes) ipConflictCondition(si *mcsv1beta1.ServiceImport) metav1.Condition {
	m := w.m
	key := si.Namespace + "/" + si.Name
	var claims []string
	for _, ip := range si.Spec.IPs {
		for _, other := range m.foreignImports(ip, key, w.cfg.ManagedBy) {
			claims = append(claims, fmt.Sprintf("%s (%s)", other, ip))
		}
	}
	if len(claims) == 0 {
		return noIPConflictCondition
	}
	return metav1.Condition{
		Type: ConditionClusterSetIPConflict, Status: metav1.ConditionTrue, Reason: "ForeignServiceImport",
		Message: fmt.Sprintf("ServiceImports not written by %s carry this import's clusterset IPs: %s; proxies that trust only %s keep this import", w.cfg.ManagedBy, strings.Join(claims, ", "), w.cfg.ManagedBy),
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

package mcs

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/export"
)

// reportSource says once, for the planner, what of a source cluster's
// slice is not mirrored and why: a log line, a metric and a warning
// event on m's export.
func (w writes) reportSource(r sourceReport) {
	switch r.Reason {
	case ReasonEndpointSliceNotMirrored:
		w.reportUnmirrored(r.Slice)
	case ReasonEndpointsOutsidePodRanges:
		w.reportOutsidePodRanges(r.Slice, r.Dropped)
	case ReasonEndpointRangesUnknown:
		w.reportRangesUnknown(r.Slice, r.Service, r.Dropped)
	default:
		w.reportRefusedSource(r.Slice, export.SourceRefusal(r.Reason), r.Why)
	}
}

// reportOutsidePodRanges says, once per slice, that addresses of a slice
// of an exported Service are not mirrored because they lie outside the
// source cluster's pod ranges.
func (w writes) reportOutsidePodRanges(s *discoveryv1.EndpointSlice, dropped []string) {
	m := w.m
	cluster := m.id
	if !m.state.firstTime(string(s.UID) + "/outside") {
		return
	}
	w.logger.Info("Not mirroring endpoint addresses outside the source cluster's pod ranges", "cluster", cluster, "endpointSlice", klog.KObj(s), "addresses", dropped)
	w.metrics.countOutsidePodRanges(cluster, len(dropped))
	if se, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil {
		m.recorder.Eventf(se, s, v1.EventTypeWarning, ReasonEndpointsOutsidePodRanges, "MirrorEndpointSlice",
			"EndpointSlice %s: addresses %s are outside cluster %s's endpoint ranges (from %s); they are not exported", s.Name, addressList(dropped), cluster, m.endpointRanges(w.cfg.MemberPodCIDRs).Source)
	}
}

// reportUnmirrored says, once per slice, that a slice of an exported
// Service is not mirrored because no trusted source manager wrote it: an
// event on the export, a log line and a metric.
func (w writes) reportUnmirrored(s *discoveryv1.EndpointSlice) {
	m := w.m
	cluster := m.id
	if !m.state.firstTime(string(s.UID)) {
		return
	}
	manager := s.Labels[discoveryv1.LabelManagedBy]
	w.logger.Info("Not mirroring an EndpointSlice of an exported Service: its manager is not trusted", "cluster", cluster, "endpointSlice", klog.KObj(s), "managedBy", manager, "trusted", w.cfg.SourceManagers)
	w.metrics.countUnmirrored(cluster)
	if se, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil {
		m.recorder.Eventf(se, s, v1.EventTypeWarning, ReasonEndpointSliceNotMirrored, "MirrorEndpointSlice",
			"EndpointSlice %s is not exported: its endpointslice.kubernetes.io/managed-by %q is not one of %v", s.Name, manager, w.cfg.SourceManagers)
	}
}

// reportRefusedSource says, once per slice and refusal, that a slice of
// an exported Service is not mirrored because Kubernetes did not write it
// for that Service: a log line, the unmirrored-slices metric and a
// warning event on the export, whose reason is the refusal.
func (w writes) reportRefusedSource(s *discoveryv1.EndpointSlice, refusal export.SourceRefusal, why string) {
	m := w.m
	if !m.state.firstTime(string(s.UID) + "/" + string(refusal)) {
		return
	}
	w.logger.Info("Not mirroring an EndpointSlice of an exported Service: Kubernetes did not write it for that Service", "cluster", m.id, "endpointSlice", klog.KObj(s), "reason", refusal, "why", why)
	w.metrics.countUnmirrored(m.id)
	if se, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil {
		m.recorder.Eventf(se, s, v1.EventTypeWarning, string(refusal), "MirrorEndpointSlice", "EndpointSlice %s is not exported: %s", s.Name, why)
	}
}

// ReasonEndpointRangesUnknown is the reason of the event on an export
// whose endpoints are not mirrored because nothing says where its
// cluster's endpoints may be.
const ReasonEndpointRangesUnknown = "EndpointRangesUnknown"

// reportRangesUnknown says, once per slice, that addresses of a slice of
// an exported Service are not mirrored because m's endpoint ranges are
// unknown and their writer does not vouch for them: a log line, a metric
// and a warning event on the export, so that the operator learns what to
// configure rather than finding the endpoints missing.
func (w writes) reportRangesUnknown(s *discoveryv1.EndpointSlice, svc *v1.Service, dropped []string) {
	m := w.m
	if !m.state.firstTime(string(s.UID) + "/" + ReasonEndpointRangesUnknown) {
		return
	}
	why := "their endpoints name no Pod of the namespace"
	if svc.Spec.Selector == nil {
		why = "Service " + svc.Name + " has no selector, so they come from Endpoints someone wrote, which may hold any address"
	}
	w.logger.Info("Not mirroring endpoint addresses: the source cluster's endpoint ranges are unknown", "cluster", m.id, "endpointSlice", klog.KObj(s), "addresses", dropped, "why", why)
	w.metrics.countRangesUnknown(m.id, len(dropped))
	if se, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil {
		m.recorder.Eventf(se, s, v1.EventTypeWarning, ReasonEndpointRangesUnknown, "MirrorEndpointSlice",
			"EndpointSlice %s: addresses %s are not exported: %s, and cluster %s's endpoint ranges are unknown (%s)",
			s.Name, addressList(dropped), why, m.id, m.endpointRanges(w.cfg.MemberPodCIDRs).Source)
	}
}

// addressList names at most ten addresses, for an event.
func addressList(addrs []string) string {
	const most = 10
	if len(addrs) <= most {
		return strings.Join(addrs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(addrs[:most], ", "), len(addrs)-most)
}

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
func (c *Controller) reportSource(m *member, r sourceReport) {
	switch r.Reason {
	case ReasonEndpointSliceNotMirrored:
		c.reportUnmirrored(m, r.Slice)
	case ReasonEndpointsOutsidePodRanges:
		c.reportOutsidePodRanges(m, r.Slice, r.Dropped)
	case ReasonEndpointRangesUnknown:
		c.reportRangesUnknown(m, r.Slice, r.Service, r.Dropped)
	default:
		c.reportRefusedSource(m, r.Slice, export.SourceRefusal(r.Reason), r.Why)
	}
}

// reportOutsidePodRanges says, once per slice, that addresses of a slice
// of an exported Service are not mirrored because they lie outside the
// source cluster's pod ranges.
func (c *Controller) reportOutsidePodRanges(m *member, s *discoveryv1.EndpointSlice, dropped []string) {
	cluster := m.id
	if !m.state.firstTime(string(s.UID) + "/outside") {
		return
	}
	c.logger.Info("Not mirroring endpoint addresses outside the source cluster's pod ranges", "cluster", cluster, "endpointSlice", klog.KObj(s), "addresses", dropped)
	c.metrics.countOutsidePodRanges(cluster, len(dropped))
	if se, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil {
		m.recorder.Eventf(se, s, v1.EventTypeWarning, ReasonEndpointsOutsidePodRanges, "MirrorEndpointSlice",
			"EndpointSlice %s: addresses %s are outside cluster %s's endpoint ranges (from %s); they are not exported", s.Name, addressList(dropped), cluster, m.endpointRanges(c.cfg.MemberPodCIDRs).Source)
	}
}

// reportUnmirrored says, once per slice, that a slice of an exported
// Service is not mirrored because no trusted source manager wrote it: an
// event on the export, a log line and a metric.
func (c *Controller) reportUnmirrored(m *member, s *discoveryv1.EndpointSlice) {
	cluster := m.id
	if !m.state.firstTime(string(s.UID)) {
		return
	}
	manager := s.Labels[discoveryv1.LabelManagedBy]
	c.logger.Info("Not mirroring an EndpointSlice of an exported Service: its manager is not trusted", "cluster", cluster, "endpointSlice", klog.KObj(s), "managedBy", manager, "trusted", c.cfg.SourceManagers)
	c.metrics.countUnmirrored(cluster)
	if se, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil {
		m.recorder.Eventf(se, s, v1.EventTypeWarning, ReasonEndpointSliceNotMirrored, "MirrorEndpointSlice",
			"EndpointSlice %s is not exported: its endpointslice.kubernetes.io/managed-by %q is not one of %v", s.Name, manager, c.cfg.SourceManagers)
	}
}

// reportRefusedSource says, once per slice and refusal, that a slice of
// an exported Service is not mirrored because Kubernetes did not write it
// for that Service: a log line, the unmirrored-slices metric and a
// warning event on the export, whose reason is the refusal.
func (c *Controller) reportRefusedSource(m *member, s *discoveryv1.EndpointSlice, refusal export.SourceRefusal, why string) {
	if !m.state.firstTime(string(s.UID) + "/" + string(refusal)) {
		return
	}
	c.logger.Info("Not mirroring an EndpointSlice of an exported Service: Kubernetes did not write it for that Service", "cluster", m.id, "endpointSlice", klog.KObj(s), "reason", refusal, "why", why)
	c.metrics.countUnmirrored(m.id)
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
func (c *Controller) reportRangesUnknown(m *member, s *discoveryv1.EndpointSlice, svc *v1.Service, dropped []string) {
	if !m.state.firstTime(string(s.UID) + "/" + ReasonEndpointRangesUnknown) {
		return
	}
	why := "their endpoints name no Pod of the namespace"
	if svc.Spec.Selector == nil {
		why = "Service " + svc.Name + " has no selector, so they come from Endpoints someone wrote, which may hold any address"
	}
	c.logger.Info("Not mirroring endpoint addresses: the source cluster's endpoint ranges are unknown", "cluster", m.id, "endpointSlice", klog.KObj(s), "addresses", dropped, "why", why)
	c.metrics.countRangesUnknown(m.id, len(dropped))
	if se, err := m.exports.ServiceExports(s.Namespace).Get(s.Labels[discoveryv1.LabelServiceName]); err == nil {
		m.recorder.Eventf(se, s, v1.EventTypeWarning, ReasonEndpointRangesUnknown, "MirrorEndpointSlice",
			"EndpointSlice %s: addresses %s are not exported: %s, and cluster %s's endpoint ranges are unknown (%s)",
			s.Name, addressList(dropped), why, m.id, m.endpointRanges(c.cfg.MemberPodCIDRs).Source)
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

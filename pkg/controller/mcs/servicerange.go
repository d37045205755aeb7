package mcs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	mcsproxy "k8s.io/multiclusterservices/proxy"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// A member's Service ranges (its ServiceCIDRs) against the clusterset's:
// a clusterset IP inside one could be given to a Service there, which
// would then take the import's traffic in that member.

// checkServiceCIDRs refuses clusterset ranges that overlap member m's
// Service ranges (its ServiceCIDR objects): a clusterset IP there would be
// some member's Service IP, and every import given one would lose it to
// that Service, or take it. A member joining is refused; at start-up and
// at run time an overlap is reported instead (serviceCIDRChanged).
func (r *reservations) checkServiceCIDRs(m *member) error {
	if !m.hasSynced() {
		return nil
	}
	for _, o := range r.serviceRangeOverlaps(m) {
		if err := mcsproxy.CheckDisjoint(r.ranges, fmt.Sprintf("ServiceCIDR %s of cluster %s", o.ServiceCIDR, m.id), o.Prefixes); err != nil {
			return err
		}
	}
	return nil
}

// serviceRangeOverlap is a member's ServiceCIDR whose ranges overlap the
// clusterset's: a Service there may be given a clusterset IP.
type serviceRangeOverlap struct {
	// ServiceCIDR is the object's name, Prefixes its ranges that overlap.
	ServiceCIDR string
	Prefixes    []netip.Prefix
}

// overlapsOf returns, by name, the ServiceCIDRs of cidrs whose ranges
// overlap the clusterset ranges. One being deleted still counts: its
// finalizer keeps it until no Service holds an IP of it.
func overlapsOf(clusterset []netip.Prefix, cidrs []*networkingv1.ServiceCIDR) []serviceRangeOverlap {
	var out []serviceRangeOverlap
	for _, sc := range cidrs {
		var overlapping []netip.Prefix
		for _, s := range sc.Spec.CIDRs {
			p, err := netip.ParsePrefix(s)
			if err == nil && slices.ContainsFunc(clusterset, p.Masked().Overlaps) {
				overlapping = append(overlapping, p.Masked())
			}
		}
		if len(overlapping) > 0 {
			out = append(out, serviceRangeOverlap{ServiceCIDR: sc.Name, Prefixes: overlapping})
		}
	}
	slices.SortFunc(out, func(a, b serviceRangeOverlap) int { return strings.Compare(a.ServiceCIDR, b.ServiceCIDR) })
	return out
}

// serviceRangeOverlaps returns member m's ServiceCIDRs that overlap the
// clusterset ranges, as far as its cache knows them.
func (r *reservations) serviceRangeOverlaps(m *member) []serviceRangeOverlap {
	cidrs, _ := m.serviceCIDRs.List(labels.Everything())
	return overlapsOf(r.ranges, cidrs)
}

// reserveServiceRanges tells the allocator the members' Service ranges
// that overlap the clusterset's: no clusterset IP is handed out there
// while another is free.
func (r *reservations) reserveServiceRanges() {
	var reserved []netip.Prefix
	for _, m := range r.members.all() {
		for _, o := range r.serviceRangeOverlaps(m) {
			reserved = append(reserved, o.Prefixes...)
		}
	}
	r.ips.SetReserved(reserved)
}

// ReasonServiceCIDROverlap is the reason of the warning event on a
// member's ServiceCIDR that overlaps the clusterset IP ranges, and of the
// ClusterSetIPInServiceRange condition of the imports whose IPs lie there.
const ReasonServiceCIDROverlap = "ServiceCIDROverlapsClusterSet"

// serviceCIDRChanged checks member m's Service ranges against the
// clusterset's on every change of its ServiceCIDRs (sc, nil when deleted),
// not only at start and join: a ServiceCIDR added later would let a user
// ask for a ClusterIP equal to an import's clusterset IP and take its
// traffic in m. The allocator keeps new clusterset IPs out of the overlap,
// the ServiceCIDR gets a warning event (once), the imports whose IPs lie
// there say so (serviceRangeCondition) and mcs_controller_service_cidrs_overlapping_clusterset
// counts it.
//
// The member stays: the danger is to the imports whose IPs the range
// holds, in that member only, and leaving would withdraw every one of its
// exports from the clusterset and every import from its clients, for a
// change its administrator can undo; nothing would bring it back either,
// since its inventory entry still counts it as joined. IPs already
// allocated there are not moved: whoever may add a ServiceCIDR in one
// member could otherwise move clusterset IPs that every member's clients
// hold. (A cluster joining with an overlap is refused, since nothing of it
// is served yet.)
func (r *reservations) serviceCIDRChanged(m *member, sc *networkingv1.ServiceCIDR) {
	r.reserveServiceRanges()
	if sc == nil || sc.DeletionTimestamp != nil || r.members.get(m.id) != m {
		// Gone or going; or m is not served (a join being checked,
		// which refuses it): nothing is written into it.
		return
	}
	overlaps := overlapsOf(r.ranges, []*networkingv1.ServiceCIDR{sc})
	if len(overlaps) == 0 {
		return
	}
	if !m.state.firstTime(string(sc.UID) + "/" + ReasonServiceCIDROverlap + fmt.Sprint(overlaps[0].Prefixes)) {
		return
	}
	r.logger.Error(nil, "A member's ServiceCIDR overlaps the clusterset IP ranges: a Service there may take an import's clusterset IP", "cluster", m.id, "serviceCIDR", sc.Name, "ranges", overlaps[0].Prefixes, "clusterSetRanges", r.ranges)
	m.recorder.Eventf(sc, nil, v1.EventTypeWarning, ReasonServiceCIDROverlap, "CheckServiceCIDR",
		"ranges %v overlap the clusterset IP ranges %v: a Service of cluster %s may be given an import's clusterset IP and take its traffic in this cluster. The mcs-controller hands out no new clusterset IP here while another is free, and the imports whose IPs lie here say so (condition %s); delete this ServiceCIDR, or use ranges outside the clusterset's",
		overlaps[0].Prefixes, r.ranges, m.id, ConditionClusterSetIPInServiceRange)
}

// ConditionClusterSetIPInServiceRange is a ServiceImport condition of
// this controller's, present while one of the import's clusterset IPs
// lies in one of its member's Service ranges (a ServiceCIDR added after
// the member joined): a Service there may be given that IP, and the
// proxies of that member would send the import's traffic to it.
const ConditionClusterSetIPInServiceRange = "ClusterSetIPInServiceRange"

// serviceRangeCondition is the ClusterSetIPInServiceRange condition of
// si in m, and whether it applies. A derived import is never at risk: its
// IPs are its derived Service's, which m gave it.
func (w writes) serviceRangeCondition(si *mcsv1beta1.ServiceImport) (metav1.Condition, bool) {
	m := w.m
	if si.Annotations[export.AnnotationDerivedService] != "" {
		return metav1.Condition{}, false
	}
	var in []string
	for _, o := range w.cs.serviceRangeOverlaps(m) {
		for _, s := range si.Spec.IPs {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			for _, p := range o.Prefixes {
				if p.Contains(ip.Unmap()) {
					in = append(in, fmt.Sprintf("%s (ServiceCIDR %s, %s)", s, o.ServiceCIDR, p))
				}
			}
		}
	}
	if len(in) == 0 {
		return metav1.Condition{}, false
	}
	return metav1.Condition{
		Type: ConditionClusterSetIPInServiceRange, Status: metav1.ConditionTrue, Reason: ReasonServiceCIDROverlap,
		Message: fmt.Sprintf("clusterset IPs of this import lie in cluster %s's Service ranges: %s; a Service there may be given one and take this import's traffic in %s. The IPs are not moved (every member's clients hold them): remove the ServiceCIDR", m.id, strings.Join(in, ", "), m.id),
	}, true
}

package mcs

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
)

func TestOverlapsOf(t *testing.T) {
	clusterset := []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16"), netip.MustParsePrefix("fd00:10:250::/108")}
	cidr := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	for _, tc := range []struct {
		name  string
		cidrs []*networkingv1.ServiceCIDR
		want  string
	}{
		{"disjoint", []*networkingv1.ServiceCIDR{cidr("kubernetes", "10.96.0.0/16", "fd00:10:96::/112")}, "[]"},
		{"inside the clusterset range", []*networkingv1.ServiceCIDR{cidr("extra", "10.250.7.0/24")}, "[{extra [10.250.7.0/24]}]"},
		{"holding the clusterset range", []*networkingv1.ServiceCIDR{cidr("wide", "10.0.0.0/8")}, "[{wide [10.0.0.0/8]}]"},
		{"one family of a dual-stack ServiceCIDR", []*networkingv1.ServiceCIDR{cidr("dual", "10.97.0.0/16", "fd00:10:250::/112")}, "[{dual [fd00:10:250::/112]}]"},
		{"host bits and an unparsable range", []*networkingv1.ServiceCIDR{cidr("odd", "10.250.0.1/24", "nonsense")}, "[{odd [10.250.0.0/24]}]"},
		{"sorted by name", []*networkingv1.ServiceCIDR{cidr("z", "10.250.1.0/24"), cidr("kubernetes", "10.96.0.0/16"), cidr("a", "10.250.2.0/24")}, "[{a [10.250.2.0/24]} {z [10.250.1.0/24]}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(overlapsOf(clusterset, tc.cidrs)); got != tc.want {
				t.Errorf("overlapsOf = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestCoreServiceCIDRAddedLater: a member whose Service ranges were
// disjoint from the clusterset's when it joined gets a ServiceCIDR that
// overlaps them. A user there could then ask for a ClusterIP equal to an
// import's clusterset IP and take its traffic in that member. The
// controller sees it on the ServiceCIDR's own event, not at the next
// start: a warning event on the ServiceCIDR, a gauge, the import in that
// member marked (ClusterSetIPInServiceRange), no new clusterset IP handed
// out there. The member stays, its import keeps its IP (every member's
// clients hold it) and its endpoints, and the other member is untouched.
// Deleting the ServiceCIDR clears it all.
func TestCoreServiceCIDRAddedLater(t *testing.T) {
	clusterset := netip.MustParsePrefix("10.250.0.0/24")
	c, ms := newFakeClusterset(t, Config{ClusterSetIPRanges: []netip.Prefix{clusterset}}, []string{"cluster-a", "cluster-b"}, nil, nil)
	reg := metrics.NewKubeRegistry()
	c.metrics = NewMetrics(reg)
	c.metrics.register(c)
	a, b := ms["cluster-a"], ms["cluster-b"]
	// The event handlers of a running controller.
	for _, m := range []*fakeMember{a, b} {
		c.addHandlers(m.member)
	}
	exportWeb(t, a, "10.1.0.1")
	syncAll(t, c, "demo/web")
	vip := netip.MustParseAddr(importIn(t, b).Spec.IPs[0])

	// The half of the clusterset range that holds the import's IP.
	overlap := netip.PrefixFrom(vip, 25).Masked()
	if _, err := b.kube.NetworkingV1().ServiceCIDRs().Create(context.Background(), &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "extra", UID: "uid-extra"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{overlap.String()}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var evs []string
	waitCache(t, "a warning event on b's ServiceCIDR", func() bool {
		evs = append(evs, recordedEvents(b)...)
		return slices.ContainsFunc(evs, func(e string) bool {
			return strings.HasPrefix(e, "Warning "+ReasonServiceCIDROverlap+" ") && strings.Contains(e, overlap.String())
		})
	})
	if got := metricValue(t, reg, "mcs_controller_service_cidrs_overlapping_clusterset", "cluster-b"); got != 1 {
		t.Errorf("mcs_controller_service_cidrs_overlapping_clusterset{cluster=cluster-b} = %v, want 1", got)
	}
	if got := metricValue(t, reg, "mcs_controller_service_cidrs_overlapping_clusterset", "cluster-a"); got != 0 {
		t.Errorf("mcs_controller_service_cidrs_overlapping_clusterset{cluster=cluster-a} = %v, want 0", got)
	}

	syncAll(t, c, "demo/web")
	if c.members.get("cluster-b") == nil {
		t.Fatal("cluster-b left the clusterset")
	}
	si := importIn(t, b)
	cond := meta.FindStatusCondition(si.Status.Conditions, ConditionClusterSetIPInServiceRange)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonServiceCIDROverlap || !strings.Contains(cond.Message, "extra") {
		t.Errorf("b's import conditions %v, want %s=True naming ServiceCIDR extra", si.Status.Conditions, ConditionClusterSetIPInServiceRange)
	}
	if si.Spec.IPs[0] != vip.String() || len(importedAddrs(t, b)) != 1 {
		t.Errorf("b's import has IPs %v and endpoints %v: want %s and cluster-a's endpoint kept", si.Spec.IPs, importedAddrs(t, b), vip)
	}
	if cond := meta.FindStatusCondition(importIn(t, a).Status.Conditions, ConditionClusterSetIPInServiceRange); cond != nil {
		t.Errorf("a's import, whose member's ranges are disjoint, says %v", cond)
	}
	// New names get IPs outside b's Service range while others are free.
	for i := range 20 {
		ips, err := c.clustersetIPs.Allocate(fmt.Sprintf("demo/new-%d", i), []v1.IPFamily{v1.IPv4Protocol})
		if err != nil {
			t.Fatal(err)
		}
		if overlap.Contains(netip.MustParseAddr(ips[0])) {
			t.Errorf("demo/new-%d was given %s, inside cluster-b's ServiceCIDR %s", i, ips[0], overlap)
		}
	}

	// The ServiceCIDR deleted: nothing is reserved or marked any more.
	if err := b.kube.NetworkingV1().ServiceCIDRs().Delete(context.Background(), "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "the ServiceCIDR gone from b's cache", func() bool { return len(c.reservations.serviceRangeOverlaps(b.member)) == 0 })
	syncAll(t, c, "demo/web")
	if cond := meta.FindStatusCondition(importIn(t, b).Status.Conditions, ConditionClusterSetIPInServiceRange); cond != nil {
		t.Errorf("b's import still says %v after the ServiceCIDR was deleted", cond)
	}
	if got := metricValue(t, reg, "mcs_controller_service_cidrs_overlapping_clusterset", "cluster-b"); got != 0 {
		t.Errorf("mcs_controller_service_cidrs_overlapping_clusterset{cluster=cluster-b} = %v after the delete, want 0", got)
	}
}

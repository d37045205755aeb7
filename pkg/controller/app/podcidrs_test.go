package app

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMemberPodCIDRs: --member-pod-cidrs says where a member's pods are
// when its nodes do not; a range that would admit everything, or another
// network's special addresses, or the clusterset IPs, is refused at start
// with an error naming the value.
func TestMemberPodCIDRs(t *testing.T) {
	o := NewOptions()
	o.MemberPodCIDRs = []string{"cluster-a=10.1.0.0/16, fd00:1::/48", "cluster-b=10.2.0.0/16;cluster-c=10.3.0.0/16,10.4.0.0/16"}
	got, err := o.memberPodCIDRs()
	if err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix
	want := map[string][]netip.Prefix{
		"cluster-a": {p("10.1.0.0/16"), p("fd00:1::/48")},
		"cluster-b": {p("10.2.0.0/16")},
		"cluster-c": {p("10.3.0.0/16"), p("10.4.0.0/16")},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		value []string
		err   string
	}{
		{[]string{"10.1.0.0/16"}, "want CLUSTER=CIDR"},
		{[]string{"=10.1.0.0/16"}, "want CLUSTER=CIDR"},
		{[]string{"Cluster_A=10.1.0.0/16"}, "not a cluster ID"},
		{[]string{"cluster-a="}, "no range"},
		{[]string{"cluster-a=10.1.0.0"}, "not a CIDR"},
		{[]string{"cluster-a=10.1.0.1/16"}, "did you mean 10.1.0.0/16"},
		{[]string{"cluster-a=0.0.0.0/0"}, "too broad"},
		{[]string{"cluster-a=::/0"}, "too broad"},
		{[]string{"cluster-a=169.254.0.0/16"}, "link-local"},
		{[]string{"cluster-a=127.0.0.0/8"}, "loopback"},
		{[]string{"cluster-a=10.250.0.0/20"}, "overlaps the pod range of cluster cluster-a"},
		{[]string{"cluster-a=10.1.0.0/16", "cluster-a=10.2.0.0/16"}, "given twice"},
		{[]string{"cluster-a=10.1.0.0/16;cluster-a=10.2.0.0/16"}, "given twice"},
	} {
		o.MemberPodCIDRs = tc.value
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--member-pod-cidrs") {
			t.Errorf("--member-pod-cidrs %q: %v, want an error about %q", tc.value, err, tc.err)
		}
	}
}

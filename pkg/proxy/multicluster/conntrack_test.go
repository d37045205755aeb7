package multicluster

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// TestLeftoverSYN: only what a connection attempt left before the rules
// held the clusterset IP is deleted; every connection the rules made,
// every other protocol and every other address is kept.
func TestLeftoverSYN(t *testing.T) {
	vip := netip.MustParseAddr("10.250.0.7")
	flow := func(proto uint8, dst, replySrc string, replyPort uint16, state uint8) *netlink.ConntrackFlow {
		f := &netlink.ConntrackFlow{
			FamilyType: unix.AF_INET,
			Forward:    netlink.IPTuple{Protocol: proto, SrcIP: net.ParseIP("10.104.0.6"), SrcPort: 40123, DstIP: net.ParseIP(dst), DstPort: 80},
			Reverse:    netlink.IPTuple{Protocol: proto, SrcIP: net.ParseIP(replySrc), SrcPort: replyPort, DstIP: net.ParseIP("10.104.0.6"), DstPort: 40123},
		}
		if proto == unix.IPPROTO_TCP {
			f.ProtoInfo = &netlink.ProtoInfoTCP{State: state}
		}
		return f
	}
	const synSent, established = 1, 3
	cases := []struct {
		name string
		flow *netlink.ConntrackFlow
		want bool
	}{
		{"an unanswered SYN to the clusterset IP, not DNATed", flow(unix.IPPROTO_TCP, "10.250.0.7", "10.250.0.7", 80, synSent), true},
		{"an unanswered SYN the rules DNATed (an endpoint that has not answered yet)", flow(unix.IPPROTO_TCP, "10.250.0.7", "10.1.0.1", 8080, synSent), false},
		{"a connection the rules made", flow(unix.IPPROTO_TCP, "10.250.0.7", "10.1.0.1", 8080, established), false},
		{"a connection to the IP before it was ours, answered there", flow(unix.IPPROTO_TCP, "10.250.0.7", "10.250.0.7", 80, established), false},
		{"a DNAT to the same address, another port", flow(unix.IPPROTO_TCP, "10.250.0.7", "10.250.0.7", 8080, synSent), false},
		{"an unanswered SYN to another address", flow(unix.IPPROTO_TCP, "10.250.0.8", "10.250.0.8", 80, synSent), false},
		{"UDP (upstream reconciles it at every sync)", flow(unix.IPPROTO_UDP, "10.250.0.7", "10.250.0.7", 80, 0), false},
		{"SCTP", flow(unix.IPPROTO_SCTP, "10.250.0.7", "10.250.0.7", 80, 0), false},
	}
	filter := leftoverSYN{vip: true}
	for _, tc := range cases {
		if got := filter.MatchConntrackFlow(tc.flow); got != tc.want {
			t.Errorf("%s: deleted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestConntrackSweeperWindow: the IPs handed over are swept, one
// dump per family, until their window has passed.
func TestConntrackSweeperWindow(t *testing.T) {
	s := newConntrackSweeper(klog.Background())
	var swept map[netlink.InetFamily][]netip.Addr
	s.deleteFlows = func(family netlink.InetFamily, filter netlink.CustomConntrackFilter) (uint, error) {
		for ip := range filter.(leftoverSYN) {
			swept[family] = append(swept[family], ip)
		}
		return 0, nil
	}
	v4, v6 := netip.MustParseAddr("10.250.0.7"), netip.MustParseAddr("fd00:10:250::7")
	s.handedOver([]netip.Addr{v4, v6})
	swept = map[netlink.InetFamily][]netip.Addr{}
	now := s.until[v4].Add(-sweepWindow)
	if !s.sweep(now.Add(time.Second)) {
		t.Fatal("the IPs just handed over are not to be swept again")
	}
	if len(swept[netlink.FAMILY_V4]) != 1 || len(swept[netlink.FAMILY_V6]) != 1 {
		t.Errorf("swept %v, want each IP in its own family", swept)
	}
	swept = map[netlink.InetFamily][]netip.Addr{}
	if s.sweep(now.Add(sweepWindow + time.Second)) {
		t.Error("IPs handed over longer than the window ago are still swept")
	}
	if len(swept) != 0 {
		t.Errorf("swept %v after the window", swept)
	}
}

package clustersetip

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestReservedRangesAreHandedOutLast: a member's ServiceCIDR that overlaps
// the clusterset range (added after it joined) is where a Service may be
// given an import's clusterset IP. No IP is handed out there while
// another is free; when none is, one is rather than none, so that one
// member's Service range does not leave every member's new imports
// without an IP. IPs already allocated there stay where they are.
func TestReservedRangesAreHandedOutLast(t *testing.T) {
	a := newAllocator(t, "10.250.0.0/24")
	a.Restore([]Claim{{Key: "ns/old", IPs: []string{"10.250.0.9"}, Created: time.Now()}})
	reserved := netip.MustParsePrefix("10.250.0.0/25")
	a.SetReserved([]netip.Prefix{reserved})

	// 10.250.0.128/25 holds 127 unicast addresses (.255 is broadcast).
	for i := range 127 {
		ips, err := a.Allocate(fmt.Sprintf("ns/svc-%d", i), v4)
		if err != nil {
			t.Fatal(err)
		}
		if reserved.Contains(netip.MustParseAddr(ips[0])) {
			t.Fatalf("ns/svc-%d got %s, in the reserved %s, while other IPs are free", i, ips[0], reserved)
		}
	}
	ips, err := a.Allocate("ns/one-more", v4)
	if err != nil || !reserved.Contains(netip.MustParseAddr(ips[0])) {
		t.Errorf("with the rest full: %v, %v; want an IP of the reserved range rather than none", ips, err)
	}
	if owner, _ := a.Owner("10.250.0.9"); owner != "ns/old" {
		t.Errorf("10.250.0.9 is now %q's: an IP allocated before its range was reserved must not move", owner)
	}

	// The reservation lifted (the ServiceCIDR deleted), IPs are handed
	// out as if it had never been.
	want, _ := newAllocator(t, "10.250.0.0/24").Allocate("ns/after", v4)
	b := newAllocator(t, "10.250.0.0/24")
	b.SetReserved([]netip.Prefix{reserved})
	b.SetReserved(nil)
	if got, _ := b.Allocate("ns/after", v4); got[0] != want[0] {
		t.Errorf("after the reservation is lifted: %v, want %v", got, want)
	}
}

// A reserved range as large as the clusterset range (an IPv6 /108 here)
// is skipped in one step, not address by address.
func TestReservedRangeCoveringEverythingIsCheap(t *testing.T) {
	a := newAllocator(t, "10.250.0.0/12", "fd00:10:250::/96")
	a.SetReserved([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")})
	start := time.Now()
	for i := range 10 {
		if _, err := a.Allocate(fmt.Sprintf("ns/svc-%d", i), []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("10 allocations in a fully reserved range took %s", d)
	}
}

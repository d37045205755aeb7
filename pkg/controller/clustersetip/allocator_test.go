package clustersetip

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

var (
	v4   = []v1.IPFamily{v1.IPv4Protocol}
	dual = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
)

func newAllocator(t *testing.T, cidrs ...string) *Allocator {
	t.Helper()
	var ranges []netip.Prefix
	for _, c := range cidrs {
		ranges = append(ranges, netip.MustParsePrefix(c))
	}
	return New(ranges)
}

func TestAllocateIsStableAndUnique(t *testing.T) {
	a := newAllocator(t, "10.250.0.0/16", "fd00:10:250::/108")
	first, err := a.Allocate("ns/web", dual)
	if err != nil || len(first) != 2 {
		t.Fatalf("Allocate = %v, %v", first, err)
	}
	if !netip.MustParseAddr(first[0]).Is6() || !netip.MustParseAddr(first[1]).Is4() {
		t.Errorf("IPs %v are not in the order of the families", first)
	}
	again, _ := a.Allocate("ns/web", dual)
	if !slices.Equal(first, again) {
		t.Errorf("second Allocate = %v, want %v", again, first)
	}
	// A fresh allocator (a controller that lost its imports) tends to
	// pick the same IPs.
	if fresh, _ := newAllocator(t, "10.250.0.0/16", "fd00:10:250::/108").Allocate("ns/web", dual); !slices.Equal(fresh, first) {
		t.Errorf("fresh allocator gave %v, want %v", fresh, first)
	}
	// Dropping a family frees its IP.
	only4, _ := a.Allocate("ns/web", v4)
	if !slices.Equal(only4, first[1:]) || a.Allocated() != 1 {
		t.Errorf("IPv4 only: %v (%d allocated)", only4, a.Allocated())
	}
	a.Release("ns/web")
	if a.Allocated() != 0 {
		t.Errorf("%d IPs still allocated after Release", a.Allocated())
	}
}

func TestAllocateExhaustsAndSkipsSpecialAddresses(t *testing.T) {
	a := newAllocator(t, "10.250.0.0/30")
	seen := map[string]bool{}
	for _, key := range []string{"a/a", "b/b"} {
		ips, err := a.Allocate(key, v4)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if ips[0] == "10.250.0.0" || ips[0] == "10.250.0.3" || seen[ips[0]] {
			t.Errorf("%s got %s", key, ips[0])
		}
		seen[ips[0]] = true
	}
	if _, err := a.Allocate("c/c", v4); err == nil {
		t.Errorf("a full range allocated a third address")
	}
	if ips, err := a.Allocate("d/d", dual); err == nil || len(ips) != 0 {
		t.Errorf("no IPv6 range and a full IPv4 range: %v, %v", ips, err)
	}
}

func TestRestore(t *testing.T) {
	old, young := time.Unix(100, 0), time.Unix(200, 0)
	a := newAllocator(t, "10.250.0.0/16")
	a.Restore([]Claim{
		// Two members agree on web; a third (stale) disagrees.
		{Key: "ns/web", IPs: []string{"10.250.0.10"}, Created: young},
		{Key: "ns/web", IPs: []string{"10.250.0.10"}, Created: young},
		{Key: "ns/web", IPs: []string{"10.250.0.99"}, Created: old},
		// api claims web's IP too but its import is younger: it loses.
		{Key: "ns/api", IPs: []string{"10.250.0.10"}, Created: time.Unix(300, 0)},
		// An IP outside the range is not adopted.
		{Key: "ns/db", IPs: []string{"192.168.0.1"}, Created: old},
	})
	if ips, _ := a.Allocate("ns/web", v4); !slices.Equal(ips, []string{"10.250.0.10"}) {
		t.Errorf("web = %v, want the IP most members carry", ips)
	}
	if ips, _ := a.Allocate("ns/api", v4); ips[0] == "10.250.0.10" {
		t.Errorf("api was given web's IP")
	}
	if ips, _ := a.Allocate("ns/db", v4); ips[0] == "192.168.0.1" {
		t.Errorf("db kept an IP outside the range")
	}
}

// The attack: the allocator probes from a hash of the name, so a user can
// predict the IP a name will get and create an import of their own with
// it first. The allocator never hands out an IP a foreign import carries,
// and never takes an allocated IP away because of one.
func TestForeignImportsReserveNothingTheyDoNotAlreadyBlock(t *testing.T) {
	predicted, _ := newAllocator(t, "10.250.0.0/16").Allocate("prod/db", v4)

	a := newAllocator(t, "10.250.0.0/16")
	a.SetForeign("cluster-b/attacker/evil", predicted)
	got, err := a.Allocate("prod/db", v4)
	if err != nil || slices.Equal(got, predicted) {
		t.Fatalf("Allocate = %v, %v; want an IP other than the foreign import's %v", got, err, predicted)
	}
	// The foreign import goes: its IP is free for anyone again, and
	// prod/db keeps what it has.
	a.SetForeign("cluster-b/attacker/evil", nil)
	if again, _ := a.Allocate("prod/db", v4); !slices.Equal(again, got) {
		t.Errorf("prod/db moved to %v after the foreign import left, want %v", again, got)
	}
	// A foreign import that copies an allocated IP does not move it.
	a.SetForeign("cluster-c/attacker/copy", got)
	if again, _ := a.Allocate("prod/db", v4); !slices.Equal(again, got) {
		t.Errorf("prod/db moved to %v when a foreign import copied its IP, want %v", again, got)
	}
	if owner, ok := a.Owner(got[0]); !ok || owner != "prod/db" {
		t.Errorf("Owner(%s) = %q, %v", got[0], owner, ok)
	}
	// Two foreign imports on one IP: it stays reserved until both go.
	a.SetForeign("x", []string{"10.250.0.7"})
	a.SetForeign("y", []string{"10.250.0.7"})
	a.SetForeign("x", nil)
	if a.foreign[netip.MustParseAddr("10.250.0.7")] != 1 {
		t.Errorf("foreign count of 10.250.0.7 = %d, want 1", a.foreign[netip.MustParseAddr("10.250.0.7")])
	}
}

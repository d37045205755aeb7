package clustersetip

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
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

// The attack: a member's administrator edits the member's own copies of
// the imports (or writes some) so that, at the controller's next start,
// the victim's name moves off its IP and another name (the attacker's)
// takes it, receiving the victim's clients that still hold it. One vote
// per member and key, and no IP moves on a minority's word.
func TestRestoreMovesNothingOnAMinoritysWord(t *testing.T) {
	const victimIP, attackerIP, otherIP = "10.250.0.10", "10.250.0.20", "10.250.0.30"
	at := time.Unix(100, 0)
	for _, tc := range []struct {
		name   string
		claims []Claim
		// want: the victim's and the attacker's IP after Restore and
		// Allocate; "" when it must be neither victimIP nor the other's.
		victim, attacker string
		disputed         []string
	}{{
		name: "three members, one edits its copies",
		claims: []Claim{
			{Key: "ns/victim", IPs: []string{victimIP}, Created: at, Member: "a"},
			{Key: "ns/victim", IPs: []string{victimIP}, Created: at, Member: "b"},
			{Key: "ns/victim", IPs: []string{otherIP}, Created: at, Member: "evil"},
			{Key: "ns/attacker", IPs: []string{attackerIP}, Created: at, Member: "a"},
			{Key: "ns/attacker", IPs: []string{attackerIP}, Created: at, Member: "b"},
			{Key: "ns/attacker", IPs: []string{victimIP}, Created: at, Member: "evil"},
		},
		victim: victimIP, attacker: attackerIP,
	}, {
		name: "two members, one edits its copies: the victim's IP goes to nobody",
		claims: []Claim{
			{Key: "ns/victim", IPs: []string{victimIP}, Created: at, Member: "a"},
			{Key: "ns/victim", IPs: []string{otherIP}, Created: at, Member: "evil"},
			{Key: "ns/attacker", IPs: []string{attackerIP}, Created: at, Member: "a"},
			{Key: "ns/attacker", IPs: []string{victimIP}, Created: at, Member: "evil"},
		},
		disputed: []string{victimIP},
	}, {
		name: "one member votes once per key, however many claims it shows",
		claims: []Claim{
			{Key: "ns/victim", IPs: []string{victimIP}, Created: at, Member: "a"},
			{Key: "ns/victim", IPs: []string{victimIP}, Created: at, Member: "b"},
			{Key: "ns/attacker", IPs: []string{victimIP}, Created: at, Member: "evil"},
			{Key: "ns/attacker", IPs: []string{victimIP}, Created: at, Member: "evil"},
			{Key: "ns/attacker", IPs: []string{victimIP}, Created: at, Member: "evil"},
		},
		victim: victimIP,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// Small enough that the loop below fills it.
			a := newAllocator(t, "10.250.0.0/27")
			if got := a.Restore(tc.claims); !slices.Equal(got, tc.disputed) {
				t.Errorf("disputed %v, want %v", got, tc.disputed)
			}
			victim, _ := a.Allocate("ns/victim", v4)
			attacker, _ := a.Allocate("ns/attacker", v4)
			if attacker[0] == victimIP {
				t.Fatalf("the attacker's name was given the victim's IP %s", victimIP)
			}
			if tc.victim != "" && victim[0] != tc.victim {
				t.Errorf("victim = %v, want %s", victim, tc.victim)
			}
			if tc.attacker != "" && attacker[0] != tc.attacker {
				t.Errorf("attacker = %v, want %s", attacker, tc.attacker)
			}
			// A disputed IP is handed to no new name either, until the
			// range is full.
			for i := range 40 {
				ips, err := a.Allocate(fmt.Sprintf("ns/new-%d", i), v4)
				if err != nil {
					break
				}
				if slices.Contains(tc.disputed, ips[0]) {
					t.Fatalf("disputed IP %s handed to ns/new-%d", ips[0], i)
				}
			}
		})
	}
}

// The attacks on the shared pool: one namespace (or team) with enough
// exports, and one member holding many imports someone else wrote, would
// otherwise starve every other name of a clusterset IP.
func TestSharedPoolIsBoundedPerParty(t *testing.T) {
	a := newAllocator(t, "10.250.0.0/24")
	a.SetLimits(3, 2)
	for i := range 3 {
		if _, err := a.Allocate(fmt.Sprintf("tenant/svc-%d", i), v4); err != nil {
			t.Fatal(err)
		}
	}
	ips, err := a.Allocate("tenant/svc-3", v4)
	if !errors.Is(err, ErrPartyLimit) || len(ips) != 0 {
		t.Errorf("a fourth name of the namespace got %v, %v; want ErrPartyLimit", ips, err)
	}
	if !strings.Contains(fmt.Sprint(err), "tenant holds 3") {
		t.Errorf("the refusal does not say whose bound: %v", err)
	}
	// Other namespaces are unaffected; a name already holding IPs keeps
	// them (families changing included); a released name frees a place.
	if _, err := a.Allocate("other/svc", v4); err != nil {
		t.Errorf("another namespace: %v", err)
	}
	if ips, err := a.Allocate("tenant/svc-0", v4); err != nil || len(ips) != 1 {
		t.Errorf("a name holding its IP lost it: %v, %v", ips, err)
	}
	a.Release("tenant/svc-1")
	if _, err := a.Allocate("tenant/svc-3", v4); err != nil {
		t.Errorf("after a release: %v", err)
	}
	// Foreign imports: a member reserves at most two IPs this way.
	if a.SetForeign("evil/ns/a", []string{"10.250.0.200"}).Refused || a.SetForeign("evil/ns/b", []string{"10.250.0.201"}).Refused {
		t.Fatal("the first two foreign imports of a member reserve their IPs")
	}
	if ch := a.SetForeign("evil/ns/c", []string{"10.250.0.202"}); !ch.Refused || len(ch.After) != 0 {
		t.Errorf("a third foreign import of one member reserved its IP: %+v", ch)
	}
	if a.SetForeign("good/ns/a", []string{"10.250.0.203"}).Refused {
		t.Error("another member's foreign import was refused for evil's count")
	}
	// Gone, a foreign import frees its member's place.
	a.SetForeign("evil/ns/a", nil)
	if a.SetForeign("evil/ns/c", []string{"10.250.0.202"}).Refused {
		t.Error("a member's place was not freed when its foreign import went")
	}
}

// TestDisputesAreBoundedPerMember: what one member can make Restore hold
// back is charged to it. Pairs of imports one member writes with one IP
// for two names contradict that member and hold nothing back; disputes
// between members hold back at most the per-member bound each, and the
// pool serves everyone else.
func TestDisputesAreBoundedPerMember(t *testing.T) {
	at := time.Unix(100, 0)
	a := newAllocator(t, "10.250.0.0/28") // 16 IPs
	a.SetLimits(0, 2)
	var claims []Claim
	// The honest member's own import.
	claims = append(claims, Claim{Key: "prod/web", IPs: []string{"10.250.0.1"}, Created: at, Member: "good"})
	// Pairs in one member: every IP of the range but one, each carried
	// for two names.
	for i := 2; i < 16; i++ {
		ip := fmt.Sprintf("10.250.0.%d", i)
		claims = append(claims,
			Claim{Key: fmt.Sprintf("evil/a-%d", i), IPs: []string{ip}, Created: at, Member: "evil"},
			Claim{Key: fmt.Sprintf("evil/b-%d", i), IPs: []string{ip}, Created: at, Member: "evil"})
	}
	if got := a.Restore(claims); len(got) != 0 {
		t.Errorf("one member's pairs held back %v", got)
	}
	if ips, err := a.Allocate("prod/web", v4); err != nil || ips[0] != "10.250.0.1" {
		t.Errorf("the honest import got %v, %v; want its own 10.250.0.1", ips, err)
	}
	for i := range 10 {
		if _, err := a.Allocate(fmt.Sprintf("team-%d/svc", i), v4); err != nil {
			t.Fatalf("export %d of other members: %v (the pool is held by one member's pairs)", i, err)
		}
	}

	// Two members that disagree on six IPs: at most two are held back.
	b := newAllocator(t, "10.250.0.0/28")
	b.SetLimits(0, 2)
	claims = nil
	for i := 1; i <= 6; i++ {
		ip := fmt.Sprintf("10.250.0.%d", i)
		claims = append(claims,
			Claim{Key: fmt.Sprintf("prod/svc-%d", i), IPs: []string{ip}, Created: at, Member: "good"},
			Claim{Key: fmt.Sprintf("evil/x-%d", i), IPs: []string{ip}, Created: at, Member: "evil"})
	}
	if got := b.Restore(claims); len(got) != 2 {
		t.Errorf("held back %v, want two (the per-member bound)", got)
	}
	handedOut := func(a *Allocator) int {
		n := 0
		for i := range 16 {
			if _, err := a.Allocate(fmt.Sprintf("other/svc-%d", i), v4); err == nil {
				n++
			}
		}
		return n
	}
	if got, all := handedOut(b), handedOut(newAllocator(t, "10.250.0.0/28")); got != all-2 {
		t.Errorf("%d IPs handed out after the restore, want %d (all the range's %d less the two held back)", got, all-2, all)
	}
}

// TestSharedPoolIsBoundedPerMember: a member that nothing confines mints
// namespaces, one export each; the per-namespace bound does not stop it,
// the per-member bound does. A name another member exports too still
// gets its IP; names holding IPs keep them; a name that goes frees a
// place.
func TestSharedPoolIsBoundedPerMember(t *testing.T) {
	a := newAllocator(t, "10.250.0.0/24")
	a.SetLimits(1, 0)
	a.SetMemberLimit(3)
	for i := range 3 {
		if _, err := a.AllocateFor(fmt.Sprintf("ns-%d/svc", i), v4, []string{"evil"}); err != nil {
			t.Fatal(err)
		}
	}
	ips, err := a.AllocateFor("ns-3/svc", v4, []string{"evil"})
	if !errors.Is(err, ErrPartyLimit) || len(ips) != 0 || !strings.Contains(err.Error(), "cluster evil") {
		t.Errorf("a fourth namespace's export of one member got %v, %v; want ErrPartyLimit naming the member", ips, err)
	}
	if _, err := a.AllocateFor("shared/svc", v4, []string{"evil", "good"}); err != nil {
		t.Errorf("a name another member exports too: %v", err)
	}
	if _, err := a.AllocateFor("prod/svc", v4, []string{"good"}); err != nil {
		t.Errorf("another member: %v", err)
	}
	if ips, err := a.AllocateFor("ns-0/svc", v4, []string{"evil"}); err != nil || len(ips) != 1 {
		t.Errorf("a name holding its IP lost it: %v, %v", ips, err)
	}
	a.Release("ns-1/svc")
	if _, err := a.AllocateFor("ns-3/svc", v4, []string{"evil"}); err == nil {
		t.Errorf("evil still holds three (ns-0, ns-2 and shared), yet got a fourth")
	}
	a.Release("shared/svc")
	if _, err := a.AllocateFor("ns-3/svc", v4, []string{"evil"}); err != nil {
		t.Errorf("after two releases: %v", err)
	}
}

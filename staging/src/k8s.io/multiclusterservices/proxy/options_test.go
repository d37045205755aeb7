package proxy

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// SpecialPurpose compares integers for IPv4: it must answer exactly as
// the ranges it lists, at every range's edges and elsewhere.
func TestSpecialPurposeMatchesItsRanges(t *testing.T) {
	reference := func(ip netip.Addr) (string, bool) {
		ip = ip.Unmap()
		for _, sp := range specialPurpose {
			if sp.prefix.Contains(ip) {
				return sp.name, true
			}
		}
		return "", false
	}
	var ips []netip.Addr
	for _, sp := range specialPurpose {
		first := sp.prefix.Masked().Addr()
		last := first
		for range 1 << min(sp.prefix.Addr().BitLen()-sp.prefix.Bits(), 12) {
			last = last.Next()
		}
		ips = append(ips, first, first.Prev(), last, last.Next(), netip.AddrFrom16(first.As16()))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		ips = append(ips, netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}))
	}
	ips = append(ips, netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("::ffff:127.0.0.1"), netip.MustParseAddr("fd00:ec2::254"))
	for _, ip := range ips {
		if !ip.IsValid() {
			continue
		}
		gotName, got := SpecialPurpose(ip)
		wantName, want := reference(ip)
		if got != want || gotName != wantName {
			t.Errorf("SpecialPurpose(%s) = %q, %v; its ranges say %q, %v", ip, gotName, got, wantName, want)
		}
	}
}

package clustersetip

import (
	"net/netip"
	"slices"
	"strings"
)

// Imports someone else wrote (not this controller) reserve their IPs:
// none of them is handed out, and each member reserves at most its bound.

// SetForeign records the IPs of an import this controller did not write
// (none: it is gone). Such IPs are never handed out: an import that took
// one would share it with the foreign one, and every proxy would have to
// choose. An IP already allocated is kept (see Owner): moving it would let
// whoever can create an import move anyone's clusterset IP.
//
// id starts with the member holding the import ("<member>/..."): one member
// reserves at most the bound of SetLimits this way, so that a member
// holding imports someone else wrote cannot starve the clusterset. The IPs
// are read as every import's are (those that parse, IPv4-mapped IPv6 as
// IPv4): the change says what id reserved before and reserves now.
func (a *Allocator) SetForeign(id string, ips []string) ForeignChange {
	var parsed []netip.Addr
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil {
			parsed = append(parsed, ip.Unmap())
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := ForeignChange{Before: addrStrings(a.foreignBy[id])}
	if slices.Equal(a.foreignBy[id], parsed) {
		ch.After = ch.Before
		return ch
	}
	member, _, _ := strings.Cut(id, "/")
	if _, had := a.foreignBy[id]; had {
		if a.foreignOf[member]--; a.foreignOf[member] <= 0 {
			delete(a.foreignOf, member)
		}
	}
	for _, ip := range a.foreignBy[id] {
		if a.foreign[ip]--; a.foreign[ip] <= 0 {
			delete(a.foreign, ip)
		}
	}
	delete(a.foreignBy, id)
	if len(parsed) == 0 {
		return ch
	}
	if a.foreignPerMember > 0 && a.foreignOf[member] >= a.foreignPerMember {
		ch.Refused = true
		return ch
	}
	a.foreignOf[member]++
	a.foreignBy[id] = parsed
	for _, ip := range parsed {
		a.foreign[ip]++
	}
	ch.After = addrStrings(parsed)
	return ch
}

// ForeignChange is what SetForeign did with one import's reservation.
type ForeignChange struct {
	// Before and After are the IPs reserved for it before and now.
	Before, After []string
	// Refused: its member holds the most reservations allowed, and
	// none is made for it.
	Refused bool
}

// Changed tells whether the reservation changed.
func (c ForeignChange) Changed() bool { return !slices.Equal(c.Before, c.After) }

func addrStrings(addrs []netip.Addr) []string {
	var out []string
	for _, ip := range addrs {
		out = append(out, ip.String())
	}
	return out
}

// Foreign returns the IPs SetForeign reserves for id (none when it
// reserves none, or its bound kept them from being reserved).
func (a *Allocator) Foreign(id string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return addrStrings(a.foreignBy[id])
}

// Package clustersetip allocates clusterset IPs (the VIPs of ClusterSetIP
// ServiceImports) from the configured clusterset ranges.
//
// The allocator keeps no state of its own across restarts: the
// ServiceImports written in the member clusters are the record of what was
// allocated, and Restore reads them back before anything new is allocated.
// That way a restarted controller, or a second replica taking over, hands
// every import the IPs it already had, and nothing outside the clusters
// can drift from them.
package clustersetip

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/multiclusterservices/export"
)

// Allocator hands out one clusterset IP per IP family to each import key
// (namespace/name). It is safe for concurrent use.
type Allocator struct {
	ranges []netip.Prefix

	mu    sync.Mutex
	byKey map[string][]netip.Addr
	owner map[netip.Addr]string
	// foreign counts, per IP, the imports someone else wrote that carry
	// it, and foreignBy records them by an ID of the caller's choosing.
	foreign   map[netip.Addr]int
	foreignBy map[string][]netip.Addr
	// reserved are ranges handed out only when nothing else is free
	// (SetReserved).
	reserved []netip.Prefix
	// disputed are IPs members carry for two keys alike (Restore): handed
	// out to nobody until a later Restore settles them.
	disputed map[netip.Addr]bool

	// perParty bounds the keys holding IPs per party (PartyOf): one
	// namespace or catalog team cannot take the whole pool (0: no bound).
	// parties counts them.
	perParty int
	parties  map[string]int
	// foreignPerMember bounds the foreign imports whose IPs one member
	// reserves clusterset-wide (0: no bound); foreignOf counts them.
	foreignPerMember int
	foreignOf        map[string]int
	// perMember bounds the keys holding IPs that one member exports (0:
	// no bound): where nothing confines the namespaces a member exports
	// from, it mints namespaces at will, and the per-party bound alone
	// would not bound it. memberKeys counts them, chargedTo records whom
	// each key is charged to (its exporters at its last Allocate).
	perMember  int
	memberKeys map[string]int
	chargedTo  map[string][]string
}

// SetMemberLimit bounds the keys holding IPs per exporting member (0:
// unbounded). Keys that hold IPs keep them whatever the bound.
func (a *Allocator) SetMemberLimit(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.perMember = n
}

// charge records that key, holding IPs, is charged to members (nil: to
// no one), replacing what it was charged to. Called with a.mu held.
func (a *Allocator) charge(key string, members []string) {
	for _, m := range a.chargedTo[key] {
		if a.memberKeys[m]--; a.memberKeys[m] <= 0 {
			delete(a.memberKeys, m)
		}
	}
	delete(a.chargedTo, key)
	if len(members) == 0 {
		return
	}
	members = slices.Compact(slices.Sorted(slices.Values(members)))
	for _, m := range members {
		a.memberKeys[m]++
	}
	a.chargedTo[key] = members
}

// PartyOf is the party a key's IPs count against: everything before its
// last "/" (the namespace of "ns/name", the team of a catalog key).
func PartyOf(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[:i]
	}
	return key
}

// ErrPartyLimit is why a key of a party that already holds its bound of
// keys gets no IP.
var ErrPartyLimit = errors.New("clusterset IP limit reached")

// SetLimits bounds the keys with IPs per party and the foreign imports
// whose IPs one member reserves (0: unbounded). Keys that hold IPs keep
// them whatever the bound: a bound lowered never moves an IP.
func (a *Allocator) SetLimits(perParty, foreignPerMember int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.perParty, a.foreignPerMember = perParty, foreignPerMember
}

// track counts key's party when key goes from no IPs to some (had false,
// has true) or back. Called with a.mu held.
func (a *Allocator) track(key string, had, has bool) {
	switch {
	case !had && has:
		a.parties[PartyOf(key)]++
	case had && !has:
		party := PartyOf(key)
		if a.parties[party]--; a.parties[party] <= 0 {
			delete(a.parties, party)
		}
	}
}

// New returns an allocator over ranges (at most one is used per family:
// the first of each).
func New(ranges []netip.Prefix) *Allocator {
	return &Allocator{
		ranges: ranges, byKey: map[string][]netip.Addr{}, owner: map[netip.Addr]string{},
		foreign: map[netip.Addr]int{}, foreignBy: map[string][]netip.Addr{},
		parties: map[string]int{}, foreignOf: map[string]int{},
		memberKeys: map[string]int{}, chargedTo: map[string][]string{},
	}
}

// SetReserved sets the ranges whose IPs are handed out only when no other
// IP of the family is free: members' Service ranges (ServiceCIDRs) that
// overlap the clusterset's, where a Service may be given an import's IP
// and take its traffic in that member. IPs already allocated there are
// kept: moving them would let whoever may add a ServiceCIDR in one member
// move clusterset IPs every member's clients hold. An IP there is still
// handed out rather than none: the import then works in every other
// member, and says what is wrong in the overlapping one, instead of
// failing everywhere.
func (a *Allocator) SetReserved(ranges []netip.Prefix) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reserved = slices.Clone(ranges)
}

// Owner returns the key an IP is allocated to, if any.
func (a *Allocator) Owner(ip string) (string, bool) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k, ok := a.owner[addr.Unmap()]
	return k, ok
}

// Claim is what one member's ServiceImport says about its IPs.
type Claim struct {
	Key     string
	IPs     []string
	Created time.Time
	// Member is the cluster that holds the import: each member has one
	// vote per key, however many imports it shows. "" counts as a member
	// of its own.
	Member string
}

// Restore adopts the IPs existing imports already carry. Members can
// disagree: one was unreachable while an import changed, an operator
// edited one, or a member's administrator wrote or edited its own copies
// to move a victim's IP at the controller's next start and hand it to
// another name, whose owner would then receive the clients still holding
// it. So every member has one vote per key, and nothing moves on a
// minority's word:
//
//   - per key, the IP set a strict majority of the members holding the
//     key carry is adopted; without one, none is (the key is allocated
//     afresh);
//   - per IP, the key most members carry it for keeps it; when two keys
//     are carried by as many members, neither does, and the IP is held
//     back (never handed out) until a later Restore settles it;
//   - of the rest, older claims first (export.CompareAge), as every
//     replica would.
//
// What one member can make Restore hold back is bounded and charged to
// it: a member that carries one IP for two keys contradicts itself, and
// none of its claims carrying that IP counts (else writing pairs of
// imports would hold back IPs at will); and a disputed IP is held back
// only while no member claiming it has caused more disputes than the
// bound on what a member reserves (SetLimits' foreignPerMember), in the
// order of the IPs. Beyond it the IP is free again: its keys are
// allocated afresh, which is a denial at worst, never an exhausted pool.
//
// A key already allocated is left as it is. Restore returns the IPs held
// back as disputed.
func (a *Allocator) Restore(claims []Claim) []string {
	type candidate struct {
		ips     []string
		votes   int
		created time.Time
	}
	memberOf := func(i int, c Claim) string {
		if c.Member == "" {
			return fmt.Sprintf("#%d", i)
		}
		return c.Member
	}
	// A member's own contradictions: the IPs it carries for two keys.
	keysOf := map[[2]string]map[string]bool{}
	for i, c := range claims {
		for _, ip := range c.IPs {
			mi := [2]string{memberOf(i, c), ip}
			if keysOf[mi] == nil {
				keysOf[mi] = map[string]bool{}
			}
			keysOf[mi][c.Key] = true
		}
	}
	contradicts := func(member string, ips []string) bool {
		return slices.ContainsFunc(ips, func(ip string) bool { return len(keysOf[[2]string{member, ip}]) > 1 })
	}
	// One vote per member and key: the first claim of each counts.
	voted := map[[2]string]bool{}
	perKey := map[string]map[string]*candidate{}
	voters := map[string]int{}
	// ipVotes counts, per IP and key, the members that carry it, and
	// claimants names them.
	ipVotes := map[string]map[string]int{}
	claimants := map[string][]string{}
	for i, c := range claims {
		member := memberOf(i, c)
		if voted[[2]string{member, c.Key}] || contradicts(member, c.IPs) {
			continue
		}
		voted[[2]string{member, c.Key}] = true
		voters[c.Key]++
		ips := slices.Clone(c.IPs)
		slices.Sort(ips)
		ips = slices.Compact(ips)
		id := strings.Join(ips, ",")
		if perKey[c.Key] == nil {
			perKey[c.Key] = map[string]*candidate{}
		}
		cand := perKey[c.Key][id]
		if cand == nil {
			cand = &candidate{ips: ips, created: c.Created}
			perKey[c.Key][id] = cand
		}
		cand.votes++
		if c.Created.Before(cand.created) {
			cand.created = c.Created
		}
		for _, ip := range ips {
			if ipVotes[ip] == nil {
				ipVotes[ip] = map[string]int{}
			}
			ipVotes[ip][c.Key]++
			claimants[ip] = append(claimants[ip], member)
		}
	}
	a.mu.Lock()
	bound := a.foreignPerMember
	a.mu.Unlock()
	// disputed: IPs two keys are carried for by as many members each,
	// none more, held back within each claimant's bound.
	disputed := map[string]bool{}
	winner := map[string]string{}
	charged := map[string]int{}
	for _, ip := range slices.Sorted(maps.Keys(ipVotes)) {
		byKey := ipVotes[ip]
		best, tie := "", false
		for key, n := range byKey {
			switch {
			case best == "" || n > byKey[best]:
				best, tie = key, false
			case n == byKey[best]:
				tie = true
			}
		}
		if !tie {
			winner[ip] = best
			continue
		}
		if bound > 0 && slices.ContainsFunc(claimants[ip], func(m string) bool { return charged[m] >= bound }) {
			continue
		}
		for _, m := range claimants[ip] {
			charged[m]++
		}
		disputed[ip] = true
	}
	type choice struct {
		key string
		candidate
	}
	var chosen []choice
	for key, cands := range perKey {
		for _, c := range cands {
			if 2*c.votes > voters[key] {
				chosen = append(chosen, choice{key, *c})
			}
		}
	}
	slices.SortFunc(chosen, func(x, y choice) int {
		return export.CompareAge(x.created, x.key, y.created, y.key)
	})

	a.mu.Lock()
	defer a.mu.Unlock()
	a.disputed = map[netip.Addr]bool{}
	for ip := range disputed {
		if addr, err := netip.ParseAddr(ip); err == nil && a.owner[addr.Unmap()] == "" {
			a.disputed[addr.Unmap()] = true
		}
	}
	for _, c := range chosen {
		if len(a.byKey[c.key]) > 0 {
			continue
		}
		for _, s := range c.ips {
			ip, err := netip.ParseAddr(s)
			if err != nil || winner[s] != c.key {
				continue
			}
			ip = ip.Unmap()
			if !a.inRange(ip) || a.owner[ip] != "" || hasFamily(a.byKey[c.key], ip.Is4()) {
				continue
			}
			a.owner[ip] = c.key
			a.track(c.key, len(a.byKey[c.key]) > 0, true)
			a.byKey[c.key] = append(a.byKey[c.key], ip)
		}
	}
	out := make([]string, 0, len(a.disputed))
	for ip := range a.disputed {
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return out
}

// Allocate returns key's IPs for families, in the order of families,
// allocating what is missing and releasing IPs of families no longer
// wanted. The error names a family without a configured range or a range
// that is full; the IPs of the other families are still returned.
func (a *Allocator) Allocate(key string, families []v1.IPFamily) ([]string, error) {
	return a.AllocateFor(key, families, nil)
}

// AllocateFor is Allocate for a key that members export: a key with no IP
// yet gets one only while some of them is under the per-member bound
// (SetMemberLimit), and is charged to them all while it holds IPs.
func (a *Allocator) AllocateFor(key string, families []v1.IPFamily, members []string) ([]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	had := len(a.byKey[key]) > 0
	if !had && a.perParty > 0 && a.parties[PartyOf(key)] >= a.perParty && len(families) > 0 {
		return nil, fmt.Errorf("%w: %s holds %d clusterset IPs already, the most one namespace or team may hold", ErrPartyLimit, PartyOf(key), a.parties[PartyOf(key)])
	}
	if !had && a.perMember > 0 && len(members) > 0 && len(families) > 0 &&
		!slices.ContainsFunc(members, func(m string) bool { return a.memberKeys[m] < a.perMember }) {
		return nil, fmt.Errorf("%w: the exports of cluster %s hold %d clusterset IPs already, the most one member's exports may hold", ErrPartyLimit, strings.Join(members, ", "), a.perMember)
	}
	var kept []netip.Addr
	for _, ip := range a.byKey[key] {
		if slices.Contains(families, familyOf(ip)) {
			kept = append(kept, ip)
		} else {
			delete(a.owner, ip)
		}
	}
	var out []string
	var errs []string
	var all []netip.Addr
	for _, f := range families {
		ip, ok := find(kept, f)
		if !ok {
			var err error
			if ip, err = a.allocate(key, f); err != nil {
				errs = append(errs, err.Error())
				continue
			}
		}
		all = append(all, ip)
		out = append(out, ip.String())
	}
	if len(all) == 0 {
		delete(a.byKey, key)
		a.charge(key, nil)
	} else {
		a.byKey[key] = all
		a.charge(key, members)
	}
	a.track(key, had, len(all) > 0)
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// Release frees key's IPs.
func (a *Allocator) Release(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ip := range a.byKey[key] {
		delete(a.owner, ip)
	}
	a.track(key, len(a.byKey[key]) > 0, false)
	a.charge(key, nil)
	delete(a.byKey, key)
}

// Keys returns the keys that hold IPs.
func (a *Allocator) Keys() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(a.byKey))
	for k := range a.byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Allocated returns how many IPs are allocated.
func (a *Allocator) Allocated() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.owner)
}

// Capacity returns how many IPs the allocator may hand out, for the
// pool's use (Allocated against it): the host addresses of each range,
// of an IPv6 range the first 2^32 (all it probes).
func (a *Allocator) Capacity() float64 {
	total := 0.0
	for _, r := range a.ranges {
		size := rangeSize(r)
		// As probe: not the network address, nor IPv4's broadcast.
		hosts := size - 1
		if r.Addr().Is4() && size > 2 {
			hosts--
		}
		total += float64(hosts)
	}
	return total
}

// allocate probes the family's range from a point derived from the key, so
// that even a controller that lost every import tends to give a key the IP
// it had before.
func (a *Allocator) allocate(key string, f v1.IPFamily) (netip.Addr, error) {
	r, ok := a.rangeOf(f)
	if !ok {
		return netip.Addr{}, fmt.Errorf("no clusterset IP range for %s is configured", f)
	}
	size := rangeSize(r)
	sum := sha256.Sum256([]byte(key))
	start := binary.BigEndian.Uint64(sum[:8]) % size
	// Outside the reserved ranges first; within them only when the rest
	// is full (SetReserved).
	if skip := a.reservedIn(r, size); len(skip) > 0 {
		if ip, ok := a.probe(r, size, start, key, skip); ok {
			return ip, nil
		}
	}
	if ip, ok := a.probe(r, size, start, key, nil); ok {
		return ip, nil
	}
	return netip.Addr{}, fmt.Errorf("clusterset IP range %s is full", r)
}

// probe hands key the first free IP of r from offset start on, skipping
// the offsets of skip (whole ranges at a time, so that a reserved range
// costs one step however large it is).
func (a *Allocator) probe(r netip.Prefix, size, start uint64, key string, skip [][2]uint64) (netip.Addr, bool) {
	for i := uint64(0); i < size; i++ {
		off := (start + i) % size
		if j := slices.IndexFunc(skip, func(s [2]uint64) bool { return s[0] <= off && off <= s[1] }); j >= 0 {
			i += skip[j][1] - off
			continue
		}
		if off == 0 || r.Addr().Is4() && off == size-1 && size > 2 {
			// The network and IPv4 broadcast addresses are not unicast
			// host addresses.
			continue
		}
		ip := addOffset(r.Addr(), off)
		if a.owner[ip] == "" && a.foreign[ip] == 0 && !a.disputed[ip] {
			a.owner[ip] = key
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// reservedIn returns the offsets, first and last, of the addresses of r
// (the first size of them) that the reserved ranges hold.
func (a *Allocator) reservedIn(r netip.Prefix, size uint64) [][2]uint64 {
	var out [][2]uint64
	base := new(big.Int).SetBytes(r.Addr().AsSlice())
	for _, p := range a.reserved {
		switch {
		case !p.Overlaps(r):
		case p.Bits() <= r.Bits():
			return [][2]uint64{{0, size - 1}}
		default:
			lo := new(big.Int).Sub(new(big.Int).SetBytes(p.Masked().Addr().AsSlice()), base)
			if lo.IsUint64() && lo.Uint64() < size {
				out = append(out, [2]uint64{lo.Uint64(), min(lo.Uint64()+rangeSize(p)-1, size-1)})
			}
		}
	}
	return out
}

func (a *Allocator) rangeOf(f v1.IPFamily) (netip.Prefix, bool) {
	for _, r := range a.ranges {
		if familyOf(r.Addr()) == f {
			return r, true
		}
	}
	return netip.Prefix{}, false
}

func (a *Allocator) inRange(ip netip.Addr) bool {
	r, ok := a.rangeOf(familyOf(ip))
	return ok && r.Contains(ip)
}

// rangeSize is the number of addresses in r, capped at 2^32 so that a huge
// IPv6 range stays cheap to probe.
func rangeSize(r netip.Prefix) uint64 {
	hostBits := r.Addr().BitLen() - r.Bits()
	if hostBits > 32 {
		hostBits = 32
	}
	return uint64(1) << hostBits
}

func addOffset(base netip.Addr, off uint64) netip.Addr {
	b := base.AsSlice()
	n := new(big.Int).SetBytes(b)
	n.Add(n, new(big.Int).SetUint64(off))
	out := n.FillBytes(make([]byte, len(b)))
	ip, _ := netip.AddrFromSlice(out)
	return ip
}

func familyOf(ip netip.Addr) v1.IPFamily {
	if ip.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

func find(ips []netip.Addr, f v1.IPFamily) (netip.Addr, bool) {
	for _, ip := range ips {
		if familyOf(ip) == f {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func hasFamily(ips []netip.Addr, v4 bool) bool {
	for _, ip := range ips {
		if ip.Is4() == v4 {
			return true
		}
	}
	return false
}

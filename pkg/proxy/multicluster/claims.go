package multicluster

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
)

// This file holds the rule that decides who owns a clusterset IP on this
// node. It is the security-critical part of the proxier: an import that
// wins an IP it should not have captures that IP's traffic. Everything
// here is pure bookkeeping over the claims the Proxier feeds it, so that
// the rule is tested as a table and costs O(log n) per claim, however many
// imports contend for one IP.
//
// The rule, for one IP:
//  1. A local Service that uses the IP (cluster IP) keeps it; no import
//     gets it.
//  2. Otherwise the highest-ranked import that claims it owns it: the
//     oldest by creation time, then the first by namespace/name, so every
//     node agrees.
//  3. An import is programmed only if it owns every IP it claims.
//
// Only imports that passed translation claim anything, and translation
// refuses imports no trusted manager wrote (mcsproxy.ServiceForImport), so
// an import a user created cannot take part.

// claim is one import's claim on its clusterset IPs.
type claim struct {
	key types.NamespacedName
	// created is the import's creationTimestamp, in Unix seconds (the
	// apiserver's resolution).
	created int64
}

// compare ranks claims: negative when a wins over b (export.CompareAge,
// the imports named namespace/name).
func (a claim) compare(b claim) int {
	return export.CompareAgeFunc(time.Unix(a.created, 0), a.key, time.Unix(b.created, 0), b.key, compareKeys)
}

func compareKeys(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }

// claimIndex keeps, per IP, the imports that claim it in rank order (the
// owner first), and per IP the local Services that use it.
type claimIndex struct {
	byIP map[netip.Addr][]*claimOf
	// service lists, per IP, the local Services that use it, sorted
	// (nearly always one: a list, not a set, since a proxier keeps one per
	// Service IP).
	service map[netip.Addr][]types.NamespacedName
	ipsOf   map[types.NamespacedName][]netip.Addr // local Service -> its IPs
}

// claimOf is the record of one import's claim, which the index's lists
// point to. The caller holds it (the Proxier in the import's entry: a
// proxier holds one per import) and hands it to setImport and decide, so
// the index needs no map of its own by import name.
type claimOf struct {
	claim claim
	ips   []netip.Addr
}

func compareClaims(a, b *claimOf) int { return a.claim.compare(b.claim) }

func newClaimIndex() *claimIndex {
	return &claimIndex{
		byIP:    map[netip.Addr][]*claimOf{},
		service: map[netip.Addr][]types.NamespacedName{},
		ipsOf:   map[types.NamespacedName][]netip.Addr{},
	}
}

// owner returns the import ranked first for ip.
func (x *claimIndex) owner(ip netip.Addr) (types.NamespacedName, bool) {
	if c := x.byIP[ip]; len(c) > 0 {
		return c[0].claim.key, true
	}
	return types.NamespacedName{}, false
}

// setImport replaces the claims of import c.key, whose record rec is, with
// ips (none: the import claims nothing) and returns the imports whose
// standing may have changed, each once: c.key first, then the owners,
// before and after, of every IP it claimed or claims. Every other import
// keeps the answer it had, so only these need to be decided again. (A
// list, not a set: it is made for every import a proxier is handed, and
// almost always holds c.key alone.)
//
// The list is appended to dst[:0], so that a caller may hand a buffer of
// its own.
func (x *claimIndex) setImport(rec *claimOf, c claim, ips []netip.Addr, dst []types.NamespacedName) []types.NamespacedName {
	affected := append(dst[:0], c.key)
	oldIPs := rec.ips
	if rec.claim == c && slices.Equal(oldIPs, ips) {
		return affected
	}
	// The owner of a list, noted before and after the change of each list;
	// each list is looked up once (the index holds an IP per import).
	noteOwner := func(list []*claimOf) {
		if len(list) > 0 && !slices.Contains(affected, list[0].claim.key) {
			affected = append(affected, list[0].claim.key)
		}
	}
	// Out of the lists under its old rank...
	for _, ip := range oldIPs {
		list := x.byIP[ip]
		noteOwner(list)
		if i, found := slices.BinarySearchFunc(list, rec, compareClaims); found {
			list = slices.Delete(list, i, i+1)
		}
		if !slices.Contains(ips, ip) {
			// Left for good: this list is final.
			noteOwner(list)
		}
		if len(list) == 0 {
			delete(x.byIP, ip)
		} else {
			x.byIP[ip] = list
		}
	}
	// ...back in under its new one.
	rec.claim, rec.ips = c, ips
	for _, ip := range ips {
		list := x.byIP[ip]
		if !slices.Contains(oldIPs, ip) {
			// The owner before (that of an IP claimed before too is
			// noted above, before the import left its list).
			noteOwner(list)
		}
		i, _ := slices.BinarySearchFunc(list, rec, compareClaims)
		list = slices.Insert(list, i, rec)
		x.byIP[ip] = list
		noteOwner(list)
	}
	return affected
}

// setService records the IPs a local Service uses (none: it is gone) and
// returns, appended to dst[:0], the imports whose standing may have
// changed: the owners of its old and new IPs, each once.
func (x *claimIndex) setService(key types.NamespacedName, ips []netip.Addr, dst []types.NamespacedName) []types.NamespacedName {
	affected := dst[:0]
	old := x.ipsOf[key]
	for _, list := range [][]netip.Addr{old, ips} {
		for _, ip := range list {
			if o, ok := x.owner(ip); ok && !slices.Contains(affected, o) {
				affected = append(affected, o)
			}
		}
	}
	for _, ip := range old {
		users := slices.DeleteFunc(x.service[ip], func(k types.NamespacedName) bool { return k == key })
		if len(users) == 0 {
			delete(x.service, ip)
		} else {
			x.service[ip] = users
		}
	}
	delete(x.ipsOf, key)
	if len(ips) > 0 {
		x.ipsOf[key] = ips
	}
	for _, ip := range ips {
		users := x.service[ip]
		if i, found := slices.BinarySearchFunc(users, key, compareKeys); !found {
			x.service[ip] = slices.Insert(users, i, key)
		}
	}
	return affected
}

// ipsOfService returns the IPs recorded for a local Service.
func (x *claimIndex) ipsOfService(key types.NamespacedName) []netip.Addr {
	return x.ipsOf[key]
}

// decide applies the rule to the import whose record rec is: nil when it
// owns every IP it claims, otherwise why not.
func (x *claimIndex) decide(rec *claimOf) *mcsproxy.RejectionError {
	key := rec.claim.key
	for _, ip := range rec.ips {
		if users := x.service[ip]; len(users) > 0 {
			return &mcsproxy.RejectionError{
				Reason:  mcsproxy.ReasonIPInUseByService,
				Message: fmt.Sprintf("clusterset IP %s is used by Service %s; the Service keeps its traffic", ip, users[0]),
			}
		}
		if o, _ := x.owner(ip); o != key {
			return &mcsproxy.RejectionError{
				Reason:  mcsproxy.ReasonIPInUseByImport,
				Message: fmt.Sprintf("clusterset IP %s is already used by the older ServiceImport %s", ip, o),
			}
		}
	}
	return nil
}

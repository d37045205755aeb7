package multicluster

import (
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// referenceSetImport is setImport written plainly, each list read where it
// is used: setImport reads each list once, and must answer the same.
func referenceSetImport(x *claimIndex, rec *claimOf, c claim, ips []netip.Addr) []types.NamespacedName {
	affected := []types.NamespacedName{c.key}
	oldIPs := rec.ips
	if rec.claim == c && slices.Equal(oldIPs, ips) {
		return affected
	}
	owners := func(ips []netip.Addr) {
		for _, ip := range ips {
			if o, ok := x.owner(ip); ok && !slices.Contains(affected, o) {
				affected = append(affected, o)
			}
		}
	}
	owners(oldIPs)
	owners(ips)
	x.leave(rec, oldIPs)
	rec.claim, rec.ips = c, ips
	for _, ip := range ips {
		list := x.byIP[ip]
		i, _ := slices.BinarySearchFunc(list, rec, compareClaims)
		x.byIP[ip] = slices.Insert(list, i, rec)
	}
	owners(oldIPs)
	owners(ips)
	return affected
}

// TestSetImportMatchesReference changes random claims of a few imports on
// a few IPs (repeated IPs, moves, re-ranks, withdrawals) in two indexes,
// one through setImport and one through the reference, and compares the
// imports each says are affected and who owns every IP after each change.
func TestSetImportMatchesReference(t *testing.T) {
	pool := addrs("10.250.0.1", "10.250.0.2", "10.250.0.3", "fd00:10:250::1")
	rnd := rand.New(rand.NewSource(1))
	got, want := newClaimIndex(), newClaimIndex()
	gotRecs, wantRecs := map[int]*claimOf{}, map[int]*claimOf{}
	for step := range 20000 {
		n := rnd.Intn(6)
		c := claim{key: types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("si-", n)}, created: int64(rnd.Intn(3))}
		var ips []netip.Addr
		for range rnd.Intn(4) {
			ips = append(ips, pool[rnd.Intn(len(pool))])
		}
		if gotRecs[n] == nil {
			gotRecs[n], wantRecs[n] = &claimOf{}, &claimOf{}
		}
		a := got.setImport(gotRecs[n], c, ips, nil)
		b := referenceSetImport(want, wantRecs[n], c, slices.Clone(ips))
		if a[0] != c.key || !sets.New(a...).Equal(sets.New(b...)) || len(a) != len(b) {
			t.Fatalf("step %d: %v claims %v: affected %v, want %v", step, c.key, ips, a, b)
		}
		for _, ip := range pool {
			o1, ok1 := got.owner(ip)
			o2, ok2 := want.owner(ip)
			if o1 != o2 || ok1 != ok2 || len(got.byIP[ip]) != len(want.byIP[ip]) {
				t.Fatalf("step %d: %s owned by %v (%d claims), want %v (%d claims)", step, ip, o1, len(got.byIP[ip]), o2, len(want.byIP[ip]))
			}
		}
	}
}

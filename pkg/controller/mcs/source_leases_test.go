package mcs

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// A member that writes a source Lease renewed far in the future (a clock
// ahead, or a lie) must not keep that source's endpoints imported for
// longer than its TTL after a restart.
func TestLaterRenewalIsBoundedByNow(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		have, lease time.Time
		want        time.Time
	}{
		{"a later lease wins", now.Add(-time.Minute), now.Add(-time.Second), now.Add(-time.Second)},
		{"an earlier lease does not", now.Add(-time.Second), now.Add(-time.Minute), now.Add(-time.Second)},
		{"a lease from the future counts as now", now.Add(-time.Minute), now.Add(365 * 24 * time.Hour), now},
		{"nothing known yet", time.Time{}, now.Add(-time.Second), now.Add(-time.Second)},
	}
	for _, tt := range tests {
		if got := laterRenewal(tt.have, tt.lease, now); !got.Equal(tt.want) {
			t.Errorf("%s: laterRenewal = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The Leases a member holds are written by its own writer, one request per
// source cluster and renewal once written: a member's write cost per
// period is the number of sources, and no probe waits for it. At 26
// members the probes renewed every Lease in every member one after the
// other, a probe outlasted the TTL and every healthy source's endpoints
// were withdrawn and restored over and over.
func TestSourceLeasesWrittenOncePerRenewal(t *testing.T) {
	ids := []string{"cluster-a", "cluster-b", "cluster-c"}
	c, ms := newFakeClusterset(t, Config{}, ids, nil, nil)
	b := ms["cluster-b"]
	ctx := context.Background()
	// The apiserver keeps a Lease's renewTime to the microsecond: so does
	// this one, so that a writer comparing the answer it wrote with the
	// renewTime it read back would write every Lease again on every pass.
	prependReactor(&b.kube.Fake, "*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if l, ok := o.GetObject().(*coordinationv1.Lease); ok && l.Spec.RenewTime != nil {
				l.Spec.RenewTime = &metav1.MicroTime{Time: l.Spec.RenewTime.Truncate(time.Microsecond)}
			}
		}
		return false, nil, nil
	})
	answer := func(at time.Time, ids ...string) {
		c.leases.mu.Lock()
		defer c.leases.mu.Unlock()
		for _, id := range ids {
			c.leases.answered[id], c.leases.renewed[id], c.leases.reachable[id] = at, at, true
		}
	}
	requests := func(do func()) []string {
		t.Helper()
		before := len(b.kube.Actions())
		do()
		var out []string
		for _, a := range b.kube.Actions()[before:] {
			if a.GetResource().Resource == "leases" {
				out = append(out, a.GetVerb())
			}
		}
		slices.Sort(out)
		return out
	}
	renewedIn := func(source string) time.Time {
		t.Helper()
		l, err := b.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace).Get(ctx, sourceLeasePrefix+source, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Lease of %s in b: %v", source, err)
		}
		if l.Labels[mcsv1beta1.LabelSourceCluster] != source || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != c.cfg.Identity {
			t.Errorf("Lease of %s in b: labels %v, holder %v", source, l.Labels, l.Spec.HolderIdentity)
		}
		return l.Spec.RenewTime.Time
	}
	written := leaseWrites{}
	step := func(what string, want []string) {
		t.Helper()
		if got := requests(func() { c.leases.renewInto(ctx, b.member, written) }); !slices.Equal(got, want) {
			t.Errorf("%s: requests to b's Leases %v, want %v", what, got, want)
		}
	}

	t1 := time.Now()
	answer(t1, ids...)
	step("first renewal: each source's Lease read, then created", []string{"create", "create", "create", "get", "get", "get"})
	for _, id := range ids {
		if got := renewedIn(id); !got.Equal(t1.Truncate(time.Microsecond)) {
			t.Errorf("Lease of %s renewed at %s, want the probe's answer %s", id, got, t1)
		}
	}
	step("no probe answered since", nil)

	t2 := t1.Add(3 * time.Second)
	answer(t2, "cluster-a", "cluster-c")
	step("two sources answered again: one update each, nothing read", []string{"update", "update"})
	if got := renewedIn("cluster-a"); !got.Equal(t2.Truncate(time.Microsecond)) {
		t.Errorf("Lease of cluster-a renewed at %s, want %s", got, t2)
	}
	if got := renewedIn("cluster-b"); !got.Equal(t1.Truncate(time.Microsecond)) {
		t.Errorf("Lease of cluster-b renewed at %s, want %s (b did not answer again)", got, t1)
	}

	// Someone deleted a Lease: the update fails, it is read and created.
	if err := b.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace).Delete(ctx, sourceLeasePrefix+"cluster-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	answer(t2.Add(3*time.Second), "cluster-a")
	step("a Lease deleted by someone else", []string{"create", "get", "update"})

	// A member that does not answer is written nothing; what is due is
	// written when it answers again.
	c.leases.mu.Lock()
	c.leases.reachable["cluster-b"] = false
	c.leases.mu.Unlock()
	answer(t2.Add(6*time.Second), "cluster-c")
	step("b unreachable", nil)
	answer(t2.Add(9*time.Second), "cluster-b")
	step("b back", []string{"update", "update"})

	// A member that left is forgotten: no writer renews its Lease again.
	if err := c.leases.forget(ctx, "cluster-c"); err != nil {
		t.Fatal(err)
	}
	answer(t2.Add(12*time.Second), "cluster-a")
	step("c left", []string{"update"})
}

// A member that joins again brings its copies of the Leases: a source the
// controller already knows expired is not renewed by them (the member may
// have edited them, or kept them from before); a source the controller
// knows nothing of yet, and the member's own Lease, are learnt.
func TestRejoiningMemberRenewsNoOtherSource(t *testing.T) {
	ids := []string{"cluster-a", "cluster-b"}
	c, ms := newFakeClusterset(t, Config{EndpointTTL: 10 * time.Second}, ids, nil, nil)
	b := ms["cluster-b"]
	ctx := context.Background()
	now := time.Now()
	for _, source := range []string{"cluster-a", "cluster-b", "cluster-z"} {
		if _, err := b.kube.CoordinationV1().Leases(c.cfg.LeaseNamespace).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: sourceLeasePrefix + source, Labels: map[string]string{mcsv1beta1.LabelSourceCluster: source}},
			Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.leases.mu.Lock()
	c.leases.renewed["cluster-a"] = now.Add(-time.Minute) // expired
	c.leases.renewed["cluster-b"] = now.Add(-time.Minute)
	c.leases.mu.Unlock()
	c.leases.learn(ctx, b.member)
	if c.leases.alive("cluster-a") {
		t.Error("cluster-a, expired, renewed by cluster-b's copy of its Lease")
	}
	if !c.leases.alive("cluster-b") {
		t.Error("cluster-b's own Lease not learnt")
	}
	if !c.leases.alive("cluster-z") {
		t.Error("a source the controller knew nothing of not learnt")
	}
}

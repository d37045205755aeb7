package mcs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// sourceLeasePrefix starts the name of the Lease that represents
// connectivity with one source cluster (KEP-1645 "Endpoint TTL").
const sourceLeasePrefix = "mcs-source-"

// sourceLeases implements endpoint TTL. The controller probes each member's
// API; while a member answers, the Lease of that source cluster is renewed
// in every member. A source whose last renewal is older than the TTL has
// expired: its slices are withdrawn everywhere, and come back when it
// answers again. Nothing else changes on expiry: the cluster's last known
// exports still shape the import, so healthy clusters' endpoints and the
// clusterset IP stay put.
//
// The Leases are also what a restarted controller knows about sources it
// cannot reach (or no longer has in its configuration): their endpoints
// are kept until the Lease written before the restart expires.
type sourceLeases struct {
	c *Controller

	mu sync.Mutex
	// renewed is when each source cluster was last known to answer:
	// probed, or read from a Lease a member holds (learn).
	renewed map[string]time.Time
	// answered is when each member's probe last answered: the renewals
	// the members' Leases are written from.
	answered  map[string]time.Time
	reachable map[string]bool
	wasAlive  map[string]bool
}

func newSourceLeases(c *Controller) *sourceLeases {
	return &sourceLeases{c: c, renewed: map[string]time.Time{}, answered: map[string]time.Time{}, reachable: map[string]bool{}, wasAlive: map[string]bool{}}
}

// alive says whether source cluster id's endpoints are still served.
func (l *sourceLeases) alive(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.aliveLocked(id, time.Now())
}

func (l *sourceLeases) aliveLocked(id string, now time.Time) bool {
	t, ok := l.renewed[id]
	return ok && now.Sub(t) < l.c.cfg.EndpointTTL
}

// remaining is how long source cluster id's endpoints are served
// without its lease being renewed (0: expired, or never renewed).
func (l *sourceLeases) remaining(id string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.renewed[id]
	if !ok {
		return 0
	}
	return max(0, l.c.cfg.EndpointTTL-time.Since(t))
}

// Reachable returns how many members answered their last probe.
func (l *sourceLeases) reachableCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ok := range l.reachable {
		if ok {
			n++
		}
	}
	return n
}

// restore reads the source Leases the members hold, from an earlier run
// or another replica. Members were reachable moments ago (their cluster
// IDs were read), so they start renewed.
func (l *sourceLeases) restore(ctx context.Context) {
	members := l.c.members.all()
	l.mu.Lock()
	now := time.Now()
	for _, m := range members {
		l.renewed[m.id] = now
		l.reachable[m.id] = true
	}
	l.mu.Unlock()
	for _, m := range members {
		l.learn(ctx, m)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.renewed {
		l.wasAlive[id] = l.aliveLocked(id, now)
	}
}

// learn reads the source Leases member m holds and takes from them the
// renewals of sources not heard from more recently. A member that joins
// at run time brings what it knows this way as the members of start-up
// do: without it, a controller that started while the members' inventory
// did not answer would treat every source cluster not yet joined as
// expired, and withdraw its endpoints from the first member to join until
// that source joined too.
func (l *sourceLeases) learn(ctx context.Context, m *member) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	leases, err := m.kube.CoordinationV1().Leases(l.c.cfg.LeaseNamespace).List(lctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelSourceCluster})
	cancel()
	if err != nil {
		klog.FromContext(ctx).Info("Cannot read source cluster leases", "cluster", m.id, "err", err)
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, lease := range leases.Items {
		id := lease.Labels[mcsv1beta1.LabelSourceCluster]
		if id == "" || lease.Spec.RenewTime == nil {
			continue
		}
		_, known := l.renewed[id]
		if known && id != m.id {
			// What a member holds of another source only fills what the
			// controller does not know yet: a Lease in a member is that
			// member's to edit, and a rejoining member's copies would
			// otherwise renew a dead source for a full TTL, bringing its
			// endpoints back into every member. A source's liveness is
			// learnt from that source, or from the controller's probes.
			continue
		}
		l.renewed[id] = laterRenewal(l.renewed[id], lease.Spec.RenewTime.Time, now)
		if !known {
			// Learnt, not changed: nothing to restore yet.
			l.wasAlive[id] = l.aliveLocked(id, now)
		}
	}
}

// laterRenewal returns the later of two renewal times, never later than
// now: a Lease any member holds (one whose clock runs ahead, or one that
// is lying) must not keep a source cluster's endpoints alive past their
// TTL after it is gone.
func laterRenewal(have, lease, now time.Time) time.Time {
	if lease.After(now) {
		lease = now
	}
	if lease.After(have) {
		return lease
	}
	return have
}

func (l *sourceLeases) period() time.Duration { return RenewalPeriod(l.c.cfg.EndpointTTL) }

// RenewalPeriod is how often a source's liveness is renewed for an
// endpoint TTL of ttl: a third of it (a source is withdrawn between
// two-thirds of the TTL and the TTL after it went away, never on one late
// renewal), at most 10s, at least 200ms. Push mode's probes and pull
// mode's agents renew at this period alike.
func RenewalPeriod(ttl time.Duration) time.Duration {
	p := ttl / 3
	if p > 10*time.Second {
		p = 10 * time.Second
	}
	if p < 200*time.Millisecond {
		p = 200 * time.Millisecond
	}
	return p
}

// run checks for expiries until ctx ends; each member's probe runs with
// its workers (Controller.serve).
func (l *sourceLeases) run(ctx context.Context) {
	wait.UntilWithContext(ctx, l.checkExpiry, l.period()/2)
}

// joined starts a member that joined at run time as renewed (it answered
// moments ago).
func (l *sourceLeases) joined(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.renewed[id] = now
	l.reachable[id] = true
	l.wasAlive[id] = true
}

// forget drops a member that left the clusterset: its endpoints are not
// kept for a TTL, since nobody expects it back, and its Lease in each
// remaining member is deleted so that a restarted controller does not
// keep them either.
func (l *sourceLeases) forget(ctx context.Context, id string) error {
	l.mu.Lock()
	delete(l.renewed, id)
	delete(l.answered, id)
	delete(l.reachable, id)
	delete(l.wasAlive, id)
	l.mu.Unlock()
	var errs []error
	for _, m := range l.c.members.all() {
		err := m.kube.CoordinationV1().Leases(l.c.cfg.LeaseNamespace).Delete(ctx, sourceLeasePrefix+id, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting Lease %s%s in %s: %w", sourceLeasePrefix, id, m.id, err))
		}
	}
	return errors.Join(errs...)
}

// probe asks m's apiserver whether it is ready; an answer renews source
// cluster m in memory, which is what decides whether its endpoints are
// served. Probing writes nothing: it wakes each member's own writer
// (writeLeases), which copies the renewals into it, so that the time a
// probe takes does not grow with the members, and a slow member delays
// its own Leases only.
func (l *sourceLeases) probe(ctx context.Context, m *member) {
	logger := klog.FromContext(ctx)
	pctx, cancel := context.WithTimeout(ctx, l.period())
	_, err := m.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(pctx)
	cancel()
	now := time.Now()
	l.mu.Lock()
	back := err == nil && !l.reachable[m.id]
	l.reachable[m.id] = err == nil
	if err == nil {
		l.renewed[m.id] = now
		l.answered[m.id] = now
	}
	l.mu.Unlock()
	if err != nil {
		logger.V(2).Info("Member unreachable", "cluster", m.id, "err", err)
		return
	}
	switch {
	case m.stale.Load():
		// Away past its lease (checkExpiry): listed afresh first.
		if m.rejoining.CompareAndSwap(false, true) {
			logger.Info("Member reachable again after its lease ran out; listing it afresh before writing into it", "cluster", m.id)
			go l.c.rejoin(m)
		}
	case back:
		// A shorter absence: its watches resume where they were, and
		// writes into it may be backing off; start them over.
		logger.Info("Member reachable again", "cluster", m.id)
		l.c.writeAgain(m)
	}
	// Every member's writer is woken, not waited for: the Leases say
	// "alive at" as soon as each member takes the write.
	for _, target := range l.c.members.all() {
		select {
		case target.leasesDue <- struct{}{}:
		default:
		}
	}
}

// writeLeases runs target's writer of source Leases until ctx ends: it
// writes what is due each time a probe answers (renewInto), the wake-ups
// that come while it writes folded into one more pass.
func (l *sourceLeases) writeLeases(ctx context.Context, target *member) {
	written := leaseWrites{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-target.leasesDue:
		}
		l.renewInto(ctx, target, written)
	}
}

// leaseWrites is what one member's writer has written into it, per source
// cluster. Only that writer's goroutine uses it.
type leaseWrites map[string]writtenLease

// writtenLease is a renewal as written: the probe's answer it carries (the
// apiserver keeps microseconds of it, so the Lease's own renewTime cannot
// say whether a later answer is newer), and the Lease as last written.
type writtenLease struct {
	answered time.Time
	lease    *coordinationv1.Lease
}

// renewInto writes into target the Lease of every source cluster whose
// probe answered since the writer last wrote it: at most one write per
// source per period, whatever the other members' latency.
func (l *sourceLeases) renewInto(ctx context.Context, target *member, written leaseWrites) {
	l.mu.Lock()
	if !l.reachable[target.id] {
		l.mu.Unlock()
		return
	}
	due := map[string]time.Time{}
	for id, t := range l.answered {
		if w, ok := written[id]; !ok || w.answered.Before(t) {
			due[id] = t
		}
	}
	l.mu.Unlock()
	for id, t := range due {
		if lease, err := l.renew(ctx, target, id, t, written[id].lease); err != nil {
			klog.FromContext(ctx).V(2).Info("Renewing source cluster lease failed", "cluster", target.id, "source", id, "err", err)
			delete(written, id)
		} else {
			written[id] = writtenLease{answered: t, lease: lease}
		}
	}
}

// renew writes source's Lease into target as renewed at now: one update
// of the Lease this writer wrote last, read first only when it has none or
// someone else changed it.
func (l *sourceLeases) renew(ctx context.Context, target *member, source string, now time.Time, last *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, l.period())
	defer cancel()
	api := target.kube.CoordinationV1().Leases(l.c.cfg.LeaseNamespace)
	name := sourceLeasePrefix + source
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(l.c.cfg.Identity),
		LeaseDurationSeconds: ptr.To(int32((l.c.cfg.EndpointTTL + time.Second - 1) / time.Second)),
		RenewTime:            &metav1.MicroTime{Time: now},
	}
	if last != nil {
		lease := last.DeepCopy()
		lease.Spec = spec
		updated, err := api.Update(ctx, lease, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return updated, err
		}
	}
	lease, err := api.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return api.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{mcsv1beta1.LabelSourceCluster: source}},
			Spec:       spec,
		}, metav1.CreateOptions{})
	case err != nil:
		return nil, err
	}
	lease.Spec = spec
	return api.Update(ctx, lease, metav1.UpdateOptions{})
}

// checkExpiry merges everything again when a source cluster's lease
// expires or comes back.
func (l *sourceLeases) checkExpiry(ctx context.Context) {
	logger := klog.FromContext(ctx)
	now := time.Now()
	var changed []string
	l.mu.Lock()
	for id := range l.renewed {
		alive := l.aliveLocked(id, now)
		if alive != l.wasAlive[id] {
			l.wasAlive[id] = alive
			changed = append(changed, id)
		}
	}
	l.mu.Unlock()
	for _, id := range changed {
		if l.alive(id) {
			logger.Info("Source cluster lease renewed; restoring its endpoints", "source", id)
			continue
		}
		logger.Info("Source cluster lease expired; withdrawing its endpoints from every member", "source", id, "ttl", l.c.cfg.EndpointTTL)
		if m := l.c.members.get(id); m != nil {
			// Away this long, its watches will have to list it again
			// (member.stale): nothing is written into it until then.
			m.stale.Store(true)
		}
	}
	if len(changed) > 0 {
		l.c.enqueueAll()
	}
}

package inventory

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// sync brings one listed member in step; it returns whether to retry soon.
// It is the one path, for every source alike, by which a listed member
// joins, stays, leaves or is refused: it reads the listing and, when the
// listing does not settle it, the member's answer, and applies what the
// pure functions of decide.go decide.
func (inv *Inventory) sync(ctx context.Context, m Membership, key string) bool {
	inv.mu.Lock()
	e := inv.entries[key]
	var k *known
	if e != nil {
		k = &known{id: e.id, hash: e.hash, props: e.props, state: e.state}
	}
	inv.mu.Unlock()

	l, err := inv.listingOf(key)
	if err != nil {
		return true
	}
	d, settled := decideListing(key, k, l, strings.HasPrefix(key, contextPrefix))
	if settled && d == (decision{}) {
		return false
	}
	if d.forget {
		return inv.apply(ctx, m, e, d, nil, l)
	}
	if e == nil {
		e = &entry{key: key}
		inv.mu.Lock()
		inv.entries[key] = e
		inv.mu.Unlock()
		k = &known{}
	}
	inv.track(e, &l)
	defer inv.writeCondition(ctx, key)
	if settled {
		return inv.apply(ctx, m, e, d, nil, l)
	}

	mb, err := inv.resolve(ctx, key, l)
	var others others
	if mb != nil {
		inv.mu.Lock()
		e.reach = mb.Config
		e.verified = ""
		if err == nil {
			if e.claimed != mb.ClusterID {
				// It claims the disputed ID no more.
				e.claimed = ""
			}
			if l.wantID != "" && l.wantID == mb.ClusterID {
				e.verified = mb.ClusterID
			}
			others.holder = inv.holderLocked(mb.ClusterID, key)
			others.twin, others.twinID = inv.twinLocked(l.memberID, key)
			e.props = l.props
		}
		inv.mu.Unlock()
	}
	id := ""
	if err == nil {
		id = mb.ClusterID
	}
	return inv.apply(ctx, m, e, decideAnswer(*k, l, id, err, others), mb, l)
}

// twinLocked returns the listed member other than key whose profile has
// inventory member ID memberID, and the cluster ID it is (joined as,
// bound to or stated), or "" when there is none.
func (inv *Inventory) twinLocked(memberID, key string) (string, string) {
	if memberID == "" {
		return "", ""
	}
	for k, e := range inv.entries {
		if k != key && e.memberID == memberID {
			return k, cmp.Or(e.id, e.bound, e.stated)
		}
	}
	return "", ""
}

// track records what e's listing says of it (its object, the ID it
// states) and binds a listing that states none to the ID it first joined
// as.
func (inv *Inventory) track(e *entry, l *listing) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	e.obj = l.obj
	e.stated = l.wantID
	e.memberID = l.memberID
	if l.wantID == "" && e.bound != "" {
		l.wantID, l.boundAtJoin = e.bound, true
	}
}

// apply does what d decides for e; mb is the member its server answered
// for, when d joins it. It returns whether to retry soon.
func (inv *Inventory) apply(ctx context.Context, m Membership, e *entry, d decision, mb *topology.Member, l listing) bool {
	if d.leave != "" {
		inv.leave(ctx, m, e, d.leave)
	}
	if d.forget {
		inv.mu.Lock()
		delete(inv.entries, e.key)
		// The ID it stated or was bound to is free too, joined or not.
		inv.retryRefusedLocked()
		inv.mu.Unlock()
		return d.retry
	}
	if d.stays {
		inv.logger.V(2).Info("Cannot read a member's cluster ID; it stays a member", "member", e.key, "cluster", e.id, "err", d.message)
	}
	if d.state != "" {
		inv.set(e, d.state, d.message)
	}
	if d.propertiesChanged {
		m.PropertiesChanged(e.id)
	}
	if d.join {
		return inv.join(ctx, m, e, *mb, l)
	}
	return d.retry
}

// join joins e as mb and records the outcome decideJoined decides.
func (inv *Inventory) join(ctx context.Context, m Membership, e *entry, mb topology.Member, l listing) bool {
	jctx, cancel := context.WithTimeout(ctx, inv.cfg.SyncTimeout)
	err := m.Join(jctx, mb)
	// Read before cancel, which would make every refusal look timed out.
	timedOut := jctx.Err() != nil
	cancel()
	d := decideJoined(mb.ClusterID, err, timedOut)
	inv.mu.Lock()
	if err == nil {
		e.id, e.bound, e.hash, e.config = mb.ClusterID, mb.ClusterID, l.hash, mb.Config
	}
	inv.setLocked(e, d.state, d.message)
	inv.mu.Unlock()
	if d.propertiesChanged {
		m.PropertiesChanged(mb.ClusterID)
	}
	return d.retry
}

// sourceOf names where key is listed, for people and metrics.
func sourceOf(key string) string {
	src, _, _ := strings.Cut(key, "/")
	if src == "profile" {
		return "ClusterProfile"
	}
	return src
}

// holderLocked returns the key of the listed member other than key that
// holds cluster ID id (joined as it, bound, claimed in a dispute, or
// stated: by the operator for a context, by any other listing once its
// server answered with it), or "". A statement nobody verified never
// outranks the listing that serves or last served the ID.
func (inv *Inventory) holderLocked(id, key string) string {
	for k, e := range inv.entries {
		stated := e.stated == id && (e.verified == id || strings.HasPrefix(k, contextPrefix))
		if k != key && (e.id == id || stated || e.bound == id || e.claimed == id) {
			return k
		}
	}
	return ""
}

func takenMessage(id, holder string) string {
	return fmt.Sprintf("cluster ID %q is already the ID of member %s (joined, bound to it, stated for it by the operator, or claimed by it too at start-up)", id, holder)
}

func (inv *Inventory) leave(ctx context.Context, m Membership, e *entry, why string) {
	if e.id == "" {
		return
	}
	id, reach := e.id, e.reach
	lctx, cancel := context.WithTimeout(ctx, inv.cfg.LeaveTimeout)
	err := m.Leave(lctx, id, why)
	cancel()
	inv.mu.Lock()
	e.id, e.hash, e.config = "", "", nil
	inv.mu.Unlock()
	if err != nil {
		inv.logger.Error(err, "Member left the clusterset but could not be cleaned", "member", e.key, "cluster", id)
	}
	inv.logger.Info("Member left the clusterset", "member", e.key, "cluster", id, "why", why)
	// Its ID is free: a listing refused for holding it may join now,
	// without waiting for the recheck period.
	inv.mu.Lock()
	inv.retryRefusedLocked()
	inv.mu.Unlock()
	note := fmt.Sprintf("cluster %s left the clusterset: %s", id, why)
	inv.event(e, v1.EventTypeNormal, "MemberLeft", "LeaveClusterSet", note)
	inv.tellMember(reach, v1.EventTypeNormal, "MemberLeft", "LeaveClusterSet", note)
}

// retryRefusedLocked queues every refused or pending listing again: an
// ID that was taken may be free now, and a profile served through its
// twin may serve its cluster itself.
func (inv *Inventory) retryRefusedLocked() {
	for k, other := range inv.entries {
		if other.state == Refused || other.state == Pending {
			inv.queue.Add(k)
		}
	}
}

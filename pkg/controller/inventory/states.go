package inventory

import (
	"context"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics"
)

// What the inventory tells of each listed member: its state, logged,
// recorded as an event on its Secret or profile, and counted.

// set records e's state; a change is logged and, for a Secret, an event.
func (inv *Inventory) set(e *entry, s State, message string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.setLocked(e, s, message)
}

func (inv *Inventory) setLocked(e *entry, s State, message string) {
	if e.state == s && e.message == message {
		return
	}
	e.state, e.message = s, message
	switch s {
	case Joined:
		inv.logger.Info("Member joined", "member", e.key, "cluster", e.id)
		inv.event(e, v1.EventTypeNormal, "MemberJoined", "JoinClusterSet", message)
		inv.tellMember(e.reach, v1.EventTypeNormal, "MemberJoined", "JoinClusterSet", message)
	case Pending:
		inv.logger.Info("Member not served yet", "member", e.key, "reason", message)
		inv.event(e, v1.EventTypeWarning, "MemberPending", "JoinClusterSet", message)
	case Refused:
		inv.logger.Error(nil, "Member refused", "member", e.key, "reason", message)
		inv.event(e, v1.EventTypeWarning, "MemberRefused", "JoinClusterSet", message)
		inv.tellMember(e.reach, v1.EventTypeWarning, "MemberRefused", "JoinClusterSet", message)
	}
}

// tellMember records a change of a member's state on its own
// ClusterProperty (memberEvent), in the background: the caller may hold
// the inventory's lock. Nothing is told to a member whose server never
// answered.
func (inv *Inventory) tellMember(reach *rest.Config, kind, reason, action, note string) {
	if reach == nil {
		return
	}
	logger, now := inv.logger, time.Now()
	go func() {
		if err := memberEvent(context.Background(), reach, now, kind, reason, action, note); err != nil {
			logger.V(2).Info("Cannot record a membership event in the member", "reason", reason, "err", err)
		}
	}()
}

// event records an event about e's Secret or profile. action is what the
// controller did or tried with the member (join, leave); the event has no
// related object, the cluster it names being outside the hub.
func (inv *Inventory) event(e *entry, kind, reason, action, note string) {
	if inv.recorder != nil && e.obj != nil {
		inv.recorder.Eventf(e.obj, nil, kind, reason, action, "%s", note)
	}
}

// States returns, per key, the state of each listed member.
func (inv *Inventory) States() map[string]State {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	out := map[string]State{}
	for k, e := range inv.entries {
		out[k] = e.state
	}
	return out
}

var membersDesc = metrics.NewDesc("mcs_controller_inventory_members",
	"Listed member clusters by source (context, secret, profile) and state (joined, pending, refused).", []string{"source", "state"}, nil, metrics.ALPHA, "")

// Collector returns the inventory's metrics, a component-base collector.
func (inv *Inventory) Collector() metrics.StableCollector { return &inventoryCollector{inv: inv} }

type inventoryCollector struct {
	metrics.BaseStableCollector
	inv *Inventory
}

func (ic *inventoryCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- membersDesc }

func (ic *inventoryCollector) CollectWithStability(ch chan<- metrics.Metric) {
	inv := ic.inv
	counts := map[[2]string]int{}
	for _, src := range []string{"context", "secret", "profile"} {
		for _, s := range []State{Joined, Pending, Refused} {
			counts[[2]string{src, string(s)}] = 0
		}
	}
	for k, s := range inv.States() {
		src, _, _ := strings.Cut(k, "/")
		counts[[2]string{src, string(s)}]++
	}
	for k, n := range counts {
		ch <- metrics.NewLazyConstMetric(membersDesc, metrics.GaugeValue, float64(n), k[0], k[1])
	}
}

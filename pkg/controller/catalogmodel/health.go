package catalogmodel

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	"k8s.io/multiclusterservices/catalog"
)

// The controller probes the addresses of ServiceBindings that ask for a
// health check (endpoints outside Kubernetes, which no kubelet probes):
// a TCP connection, as a kubelet's tcpSocket probe makes. An address is
// not ready until its first success, and again after FailureThreshold
// failures in a row.
//
// The controller dials from its own network, where a team may reach
// nothing by itself, so a binding must not make it a scanner:
//   - only addresses of valid bindings are probed, and the catalog
//     refuses special-purpose addresses (loopback, metadata services),
//     addresses of the clusterset's pods, nodes and Services, and
//     bindings as a cluster where the team owns no namespace;
//   - at most perTeam addresses of a team (its hub namespace) and total
//     addresses in all are probed, the oldest bindings' first
//     (limitTargets); the others are not ready, and their binding
//     says so (HealthChecked=False, ProbeLimitReached);
//   - the status says whether an address answers, never how a dial
//     failed ("connection refused" against "i/o timeout" maps a
//     network), and a failure is recorded at the probe's timeout
//     whatever failed, so that when the verdict lands says no more
//     either. The dial's error goes to the controller's log.

// The limits of probed addresses when the configuration sets none: a
// binding may list 1,000 addresses and a team write any number of
// bindings; at a period of a second these bound the dials to 100 a
// second per team and 1,000 in all.
const (
	DefaultHealthProbesPerTeam = 100
	DefaultHealthProbes        = 1000
)

// Target is one address of one binding to probe.
type Target struct {
	// Binding is the binding's namespace/name.
	Binding string
	// Team is the binding's namespace, and Created its creation time:
	// the limits count per team, oldest binding first.
	Team      string
	Created   time.Time
	Address   string
	Port      int32
	Period    time.Duration
	Timeout   time.Duration
	Threshold int32
}

// ID names a target: the binding's namespace/name and the address.
func (t Target) ID() string { return t.Binding + "/" + t.Address }

// probeState is what the probes of one target said.
type probeState struct {
	healthy  bool
	failures int32
	last     time.Time
	// since is when healthy last changed (or the first probe).
	since    time.Time
	message  string
	inflight bool
}

// Checker probes the targets it is given (Set) and tells, through
// changed, when a target's verdict changes; what the probes said is read
// with Probes.
type Checker struct {
	changed func()

	mu      sync.Mutex
	targets map[string]Target
	state   map[string]*probeState
}

// NewChecker returns a Checker that calls changed whenever a target
// becomes healthy or unhealthy.
func NewChecker(changed func()) *Checker {
	return &Checker{
		changed: changed,
		targets: map[string]Target{},
		state:   map[string]*probeState{},
	}
}

// limitTargets returns the targets probed under the limits, and
// why each other is not, by id. The oldest bindings come first (then by
// name, each in the order of its addresses), so that a new binding never
// takes an older one's probes: at most perTeam addresses of one team,
// total in all.
func limitTargets(targets []Target, perTeam, total int) (probed []Target, unprobed map[string]string) {
	ordered := slices.Clone(targets)
	slices.SortStableFunc(ordered, func(a, b Target) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Binding, b.Binding))
	})
	unprobed = map[string]string{}
	seen := map[string]bool{}
	ofTeam := map[string]int{}
	for _, t := range ordered {
		if seen[t.ID()] {
			continue
		}
		seen[t.ID()] = true
		switch {
		case ofTeam[t.Team] >= perTeam:
			unprobed[t.ID()] = fmt.Sprintf("team %s has %d addresses probed, the controller's limit per team", t.Team, perTeam)
		case len(probed) >= total:
			unprobed[t.ID()] = fmt.Sprintf("the controller probes %d addresses, its limit", total)
		default:
			ofTeam[t.Team]++
			probed = append(probed, t)
		}
	}
	return probed, unprobed
}

// targetsOf are the probes binding b asks for.
func targetsOf(b *catalogv1alpha1.ServiceBinding) []Target {
	hc := b.Spec.HealthCheck
	if hc == nil || len(b.Spec.Ports) == 0 {
		return nil
	}
	port := b.Spec.Ports[0]
	for _, p := range b.Spec.Ports {
		if p.Name == hc.Port {
			port = p
		}
	}
	target := catalog.TargetPort(port)
	seconds := func(v, def int32) time.Duration {
		if v <= 0 {
			v = def
		}
		return time.Duration(v) * time.Second
	}
	threshold := hc.FailureThreshold
	if threshold <= 0 {
		threshold = 3
	}
	var out []Target
	for _, ep := range b.Spec.Endpoints {
		out = append(out, Target{
			Binding: b.Namespace + "/" + b.Name, Team: b.Namespace, Created: b.CreationTimestamp.Time, Address: ep.Address, Port: target,
			Period: seconds(hc.PeriodSeconds, 10), Timeout: seconds(hc.TimeoutSeconds, 2), Threshold: threshold,
		})
	}
	return out
}

// Set replaces the targets; the state of targets that stay is kept.
func (h *Checker) Set(targets []Target) {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := map[string]Target{}
	for _, t := range targets {
		next[t.ID()] = t
	}
	for id := range h.state {
		if _, ok := next[id]; !ok {
			delete(h.state, id)
		}
	}
	h.targets = next
}

// Probe is what the probes of one target said.
type Probe struct {
	Healthy bool
	// Last is when the last probe ended (zero: none has yet), Since
	// when Healthy last changed.
	Last, Since time.Time
	Message     string
}

// Probes returns what the probes of every target said, by Target.ID.
func (h *Checker) Probes() map[string]Probe {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]Probe, len(h.state))
	for id, st := range h.state {
		out[id] = Probe{Healthy: st.healthy, Last: st.last, Since: st.since, Message: st.message}
	}
	return out
}

// endpointHealth is the health of binding b's addresses, for its status,
// from what the probes said (probes, of the targets probed now) and why
// the targets over the limits are not probed (unprobed, by ID); with the
// number of its addresses over the limits, and why the first of them is
// not probed.
func endpointHealth(b *catalogv1alpha1.ServiceBinding, probes map[string]Probe, unprobed map[string]string) (out []catalogv1alpha1.EndpointHealth, over int, why string) {
	for _, ep := range b.Spec.Endpoints {
		id := b.Namespace + "/" + b.Name + "/" + ep.Address
		eh := catalogv1alpha1.EndpointHealth{Address: ep.Address, Message: "not probed yet"}
		if reason, ok := unprobed[id]; ok {
			eh.Message = "not probed: " + reason
			if over++; why == "" {
				why = reason
			}
		} else if pr, ok := probes[id]; ok && !pr.Last.IsZero() {
			eh.Healthy, eh.LastTransitionTime, eh.Message = pr.Healthy, metav1.NewTime(pr.Since.Truncate(time.Second)), pr.Message
		}
		out = append(out, eh)
	}
	return out, over, why
}

// Run probes every target that is due, every half second, until ctx ends.
func (h *Checker) Run(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			h.probeDue(ctx)
		}
	}
}

func (h *Checker) probeDue(ctx context.Context) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, t := range h.targets {
		st := h.state[id]
		if st == nil {
			st = &probeState{}
			h.state[id] = st
		}
		if st.inflight || now.Sub(st.last) < t.Period {
			continue
		}
		st.inflight = true
		go h.probe(ctx, id, t)
	}
}

func (h *Checker) probe(ctx context.Context, id string, t Target) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	d := net.Dialer{Timeout: t.Timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(t.Address, strconv.Itoa(int(t.Port))))
	if err == nil {
		conn.Close()
	} else {
		// A refusal comes at once and a silent address at the timeout:
		// both are recorded at the timeout.
		wait := time.NewTimer(time.Until(start.Add(t.Timeout)))
		select {
		case <-ctx.Done():
		case <-wait.C:
		}
		wait.Stop()
	}
	h.mu.Lock()
	st, ok := h.state[id]
	if !ok {
		h.mu.Unlock()
		return
	}
	st.inflight, st.last = false, time.Now()
	before := st.healthy
	if err == nil {
		st.failures, st.healthy, st.message = 0, true, fmt.Sprintf("TCP port %d answered", t.Port)
	} else {
		st.failures++
		// Not the error: its text tells a refusing host from a silent
		// one, and the status is the team's to read.
		st.message = fmt.Sprintf("TCP port %d not answering", t.Port)
		if st.failures >= t.Threshold {
			st.healthy = false
		}
	}
	after, failures := st.healthy, st.failures
	if before != after || st.since.IsZero() {
		st.since = st.last
	}
	h.mu.Unlock()
	if before != after {
		h.changed()
	}
	switch {
	case err != nil && failures == t.Threshold:
		logger.Info("A bound address fails its health check: not ready", "binding", t.Binding, "address", t.Address, "port", t.Port, "failures", failures, "err", err)
	case err != nil:
		logger.V(4).Info("Health check probe failed", "binding", t.Binding, "address", t.Address, "port", t.Port, "failures", failures, "err", err)
	}
}

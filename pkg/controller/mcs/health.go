package mcs

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	"k8s.io/multiclusterservices/catalog"
)

// The controller probes the addresses of ServiceBindings that ask for a
// health check (endpoints outside Kubernetes, which no kubelet probes):
// a TCP connection, as a kubelet's tcpSocket probe makes. An address is
// not ready until its first success, and again after FailureThreshold
// failures in a row. Only addresses of valid bindings are probed, and
// the catalog refuses special-purpose ones, so a binding cannot make the
// controller connect to loopback or a metadata service.

// healthTarget is one address of one binding to probe.
type healthTarget struct {
	// Binding is the binding's namespace/name.
	Binding   string
	Address   string
	Port      int32
	Period    time.Duration
	Timeout   time.Duration
	Threshold int32
}

func (t healthTarget) id() string { return t.Binding + "/" + t.Address }

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

type healthChecker struct {
	changed func()

	mu      sync.Mutex
	targets map[string]healthTarget
	state   map[string]*probeState
}

func newHealthChecker(changed func()) *healthChecker {
	return &healthChecker{
		changed: changed,
		targets: map[string]healthTarget{},
		state:   map[string]*probeState{},
	}
}

// healthTargets are the probes binding b asks for.
func healthTargets(b *catalogv1alpha1.ServiceBinding) []healthTarget {
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
	var out []healthTarget
	for _, ep := range b.Spec.Endpoints {
		out = append(out, healthTarget{
			Binding: b.Namespace + "/" + b.Name, Address: ep.Address, Port: target,
			Period: seconds(hc.PeriodSeconds, 10), Timeout: seconds(hc.TimeoutSeconds, 2), Threshold: threshold,
		})
	}
	return out
}

// set replaces the targets; the state of targets that stay is kept.
func (h *healthChecker) set(targets []healthTarget) {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := map[string]healthTarget{}
	for _, t := range targets {
		next[t.id()] = t
	}
	for id := range h.state {
		if _, ok := next[id]; !ok {
			delete(h.state, id)
		}
	}
	h.targets = next
}

// healthy tells whether address of binding (namespace/name) passes its
// health check.
func (h *healthChecker) healthy(binding, address string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state[binding+"/"+address]
	return st != nil && st.healthy
}

// status returns the health of binding's addresses, for its status.
func (h *healthChecker) status(binding string, b *catalogv1alpha1.ServiceBinding) []catalogv1alpha1.EndpointHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []catalogv1alpha1.EndpointHealth
	for _, ep := range b.Spec.Endpoints {
		st := h.state[binding+"/"+ep.Address]
		eh := catalogv1alpha1.EndpointHealth{Address: ep.Address, Message: "not probed yet"}
		if st != nil && !st.last.IsZero() {
			eh.Healthy, eh.LastTransitionTime, eh.Message = st.healthy, metav1.NewTime(st.since.Truncate(time.Second)), st.message
		}
		out = append(out, eh)
	}
	return out
}

// run probes every target that is due, every half second, until ctx ends.
func (h *healthChecker) run(ctx context.Context) {
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

func (h *healthChecker) probeDue(ctx context.Context) {
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

func (h *healthChecker) probe(ctx context.Context, id string, t healthTarget) {
	d := net.Dialer{Timeout: t.Timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(t.Address, strconv.Itoa(int(t.Port))))
	if err == nil {
		conn.Close()
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
		st.message = fmt.Sprintf("TCP port %d: %v", t.Port, err)
		if st.failures >= t.Threshold {
			st.healthy = false
		}
	}
	after := st.healthy
	if before != after || st.since.IsZero() {
		st.since = st.last
	}
	h.mu.Unlock()
	if before != after {
		h.changed()
	}
}

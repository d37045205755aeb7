package multicluster

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The test doubles every proxier test shares: a recording proxy.Provider
// (what a real proxier would hold), recorded events, and the objects the
// tests feed.

// recordingProvider is a proxy.Provider that records every call it gets
// and keeps the Services and EndpointSlices a real proxier would hold.
type recordingProvider struct {
	proxy.Provider // nil: calling anything not overridden panics
	mu             sync.Mutex
	calls          []string
	services       map[string]*v1.Service
	slices         map[string]*discoveryv1.EndpointSlice
	// byService holds the slices by the Service they were given for
	// (ns/service-name label), then by name: as upstream's cache keys them.
	byService map[string]map[string]*discoveryv1.EndpointSlice
	// afterSlice, if set, runs after every slice call (with mu held): a
	// sync of the proxier could happen at any of those moments.
	afterSlice func()
	// serviceCIDRs are the ranges last handed over.
	serviceCIDRs []string
}

func (r *recordingProvider) OnServiceCIDRsChanged(cidrs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.serviceCIDRs = cidrs
}

// readyOf returns the addresses of the ready endpoints held for Service
// ns/name, sorted. Called with mu held.
func (r *recordingProvider) readyOf(service string) []string { return r.heldOf(service, true) }

// heldOf returns the addresses of the endpoints held for Service ns/name
// (only the ready ones if readyOnly), sorted. Called with mu held.
func (r *recordingProvider) heldOf(service string, readyOnly bool) []string {
	var out []string
	for _, s := range r.byService[service] {
		for _, ep := range s.Endpoints {
			if !readyOnly || ptr.Deref(ep.Conditions.Ready, true) {
				out = append(out, ep.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out
}

func newRecordingProvider() *recordingProvider {
	return &recordingProvider{services: map[string]*v1.Service{}, slices: map[string]*discoveryv1.EndpointSlice{}, byService: map[string]map[string]*discoveryv1.EndpointSlice{}}
}

func svcKey(s *v1.Service) string { return s.Namespace + "/" + s.Name }
func sliceService(s *discoveryv1.EndpointSlice) string {
	return s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
}

// keep records s as a slice of its Service, or forgets it.
func (r *recordingProvider) keep(s *discoveryv1.EndpointSlice, present bool) {
	m := r.byService[sliceService(s)]
	if m == nil {
		m = map[string]*discoveryv1.EndpointSlice{}
		r.byService[sliceService(s)] = m
	}
	if present {
		m[s.Name] = s
	} else {
		delete(m, s.Name)
	}
}

// endpointsOf returns the addresses of every slice held for Service
// ns/name, sorted.
func (r *recordingProvider) endpointsOf(service string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.byService[service] {
		for _, ep := range s.Endpoints {
			out = append(out, ep.Addresses...)
		}
	}
	slices.Sort(out)
	return out
}
func sliceKey(s *discoveryv1.EndpointSlice) string { return s.Namespace + "/" + s.Name }

func (r *recordingProvider) OnServiceAdd(s *v1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "ServiceAdd "+svcKey(s))
	r.services[svcKey(s)] = s
}
func (r *recordingProvider) OnServiceUpdate(old, s *v1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "ServiceUpdate "+svcKey(s))
	r.services[svcKey(s)] = s
}
func (r *recordingProvider) OnServiceDelete(s *v1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "ServiceDelete "+svcKey(s))
	delete(r.services, svcKey(s))
}
func (r *recordingProvider) OnServiceSynced() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "ServiceSynced")
}
func (r *recordingProvider) OnEndpointSliceAdd(s *discoveryv1.EndpointSlice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "SliceAdd "+sliceKey(s))
	r.slices[sliceKey(s)] = s
	r.keep(s, true)
	r.after()
}

func (r *recordingProvider) after() {
	if r.afterSlice != nil {
		r.afterSlice()
	}
}
func (r *recordingProvider) OnEndpointSliceUpdate(old, s *discoveryv1.EndpointSlice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "SliceUpdate "+sliceKey(s))
	r.slices[sliceKey(s)] = s
	r.keep(old, false)
	r.keep(s, true)
	r.after()
}
func (r *recordingProvider) OnEndpointSliceDelete(s *discoveryv1.EndpointSlice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "SliceDelete "+sliceKey(s))
	delete(r.slices, sliceKey(s))
	r.keep(s, false)
	r.after()
}
func (r *recordingProvider) OnEndpointSlicesSynced() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "SlicesSynced")
}

// takeCalls returns the calls recorded since the last takeCalls.
func (r *recordingProvider) takeCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// recordingEvents records "Kind ns/name Reason" for every event.
type recordingEvents struct{ events []string }

func (r *recordingEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	ref := regarding.(*v1.ObjectReference)
	r.events = append(r.events, fmt.Sprintf("%s %s/%s %s", ref.Kind, ref.Namespace, ref.Name, reason))
}

func (r *recordingEvents) take() []string {
	e := r.events
	r.events = nil
	return e
}

type fixture struct {
	t        *testing.T
	provider *recordingProvider
	events   *recordingEvents
	proxier  *Proxier
}

func newFixture(t *testing.T) *fixture {
	RegisterMetrics()
	provider := newRecordingProvider()
	events := &recordingEvents{}
	opts := &mcsproxy.Options{
		ClusterSetIPCIDRs: []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16")},
		TrustedManagers:   []string{mcsproxy.DefaultManagedBy},
	}
	return &fixture{t: t, provider: provider, events: events, proxier: NewProxier(klog.Background(), provider, opts, events)}
}

// newSyncedFixture is a proxier whose informers have delivered the first
// full state (empty), as kube-proxy runs from then on: every event decides
// again (before, an import's own events do; importer.listed).
func newSyncedFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.proxier.OnServiceSynced()
	f.proxier.OnEndpointSlicesSynced()
	f.proxier.MultiClusterSynced()
	f.provider.takeCalls()
	return f
}

// expectCalls checks the calls the wrapped proxier received since the last check.
func (f *fixture) expectCalls(want ...string) {
	f.t.Helper()
	if diff := cmp.Diff(want, f.provider.takeCalls()); diff != "" {
		f.t.Errorf("calls to the proxier (-want +got):\n%s", diff)
	}
}

func (f *fixture) expectEvents(want ...string) {
	f.t.Helper()
	if diff := cmp.Diff(want, f.events.take()); diff != "" {
		f.t.Errorf("events (-want +got):\n%s", diff)
	}
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func serviceImport(ns, name string, age time.Duration, ips ...string) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(epoch.Add(-age)), Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:  mcsv1beta1.ClusterSetIP,
			IPs:   ips,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
}

func mcsSlice(ns, name, importName, cluster string, addrs ...string) *discoveryv1.EndpointSlice {
	port, proto, portName := int32(8080), v1.ProtocolTCP, "http"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			mcsv1beta1.LabelServiceName:   importName,
			mcsv1beta1.LabelSourceCluster: cluster,
			discoveryv1.LabelManagedBy:    mcsproxy.DefaultManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
	}
	for _, a := range addrs {
		ready := true
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

func localService(ns, name, ip string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
}

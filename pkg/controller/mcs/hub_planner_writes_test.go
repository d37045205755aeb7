package mcs

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/utils/ptr"
)

// TestPlannerWaitsForItsOwnWrites: a name is not planned again from a
// cache that does not show the planner's last writes of it yet (it would
// write them again from old resourceVersions, refused as conflicts), and
// is once the cache shows them, once they are deleted, or once cacheWait
// has passed.
func TestPlannerWaitsForItsOwnWrites(t *testing.T) {
	slice := func(name, rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-plan", Name: name, ResourceVersion: rv}}
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	w := newOwnWrites()
	if wait := w.behind("demo/web"); wait != 0 {
		t.Fatalf("a name never written waits %v", wait)
	}

	w.wrote("demo/web", resourceEndpointSlices, slice("web-a", "10"), store)
	w.wrote("demo/web", resourceEndpointSlices, slice("web-b", "11"), store)
	if wait := w.behind("demo/web"); wait <= 0 || wait > cacheWait {
		t.Fatalf("after two writes the cache has not shown: waits %v, want (0, %v]", wait, cacheWait)
	}
	if wait := w.behind("demo/db"); wait != 0 {
		t.Errorf("another name waits %v for web's writes", wait)
	}
	// An older event of web-a (the watch delivers in order: it comes
	// before the write's) ends nothing; the write's own event does.
	w.seen(resourceEndpointSlices, slice("web-a", "9"), false)
	w.seen(resourceEndpointSlices, slice("web-a", "10"), false)
	if wait := w.behind("demo/web"); wait == 0 {
		t.Fatal("web-b's write is not shown yet, but web waits no more")
	}
	// The same name and version of another resource is another object.
	w.seen(resourceServicePlans, slice("web-b", "11"), false)
	if wait := w.behind("demo/web"); wait == 0 {
		t.Fatal("a ServicePlan's event ended the wait for a slice's write")
	}
	w.seen(resourceEndpointSlices, slice("web-b", "0"), true)
	if wait := w.behind("demo/web"); wait != 0 {
		t.Fatalf("every write shown or deleted: still waits %v", wait)
	}

	// A write whose event came before it returned is already shown.
	if err := store.Add(slice("web-c", "12")); err != nil {
		t.Fatal(err)
	}
	w.wrote("demo/web", resourceEndpointSlices, slice("web-c", "12"), store)
	if wait := w.behind("demo/web"); wait != 0 {
		t.Fatalf("a write the cache showed when it returned: waits %v", wait)
	}

	// A write whose event never comes is waited for cacheWait at most.
	w.wrote("demo/web", resourceEndpointSlices, slice("web-d", "13"), store)
	w.mu.Lock()
	w.byService["demo/web"]["endpointslices/mcs-plan/web-d"] = ownWrite{resourceVersion: "13", at: time.Now().Add(-cacheWait)}
	w.mu.Unlock()
	if wait := w.behind("demo/web"); wait != 0 {
		t.Fatalf("a write waited for cacheWait is still waited for: %v", wait)
	}
	if len(w.byService) != 0 || len(w.service) != 0 {
		t.Errorf("writes still remembered once none is waited for: %v %v", w.byService, w.service)
	}
}

// TestPlanSliceDigest: the planner caches a plan slice without its
// endpoints and ports, and still tells one that says what it plans (an
// empty list and none alike, as the apiserver gives them back) from one
// whose endpoints, ports, address type, labels or annotations differ.
func TestPlanSliceDigest(t *testing.T) {
	port, proto := int32(80), v1.ProtocolTCP
	want := func() *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-plan", Name: "demo.web-a", Labels: map[string]string{"l": "1"},
				Annotations: map[string]string{hubv1alpha1.AnnotationImportedSlice: "web-a"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
		}
	}
	cached := func(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
		out, err := digestPlanSlice(s.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		c := out.(*discoveryv1.EndpointSlice)
		if c.Endpoints != nil || c.Ports != nil {
			t.Fatalf("the cached slice keeps its endpoints or ports: %v %v", c.Endpoints, c.Ports)
		}
		return c
	}
	have := cached(want())
	if !planSliceUpToDate(have, want()) {
		t.Errorf("a slice that says what is planned is not up to date")
	}
	// client-go may transform an object it holds again.
	if !planSliceUpToDate(cached(have), want()) {
		t.Errorf("a slice digested twice is not up to date")
	}
	for name, change := range map[string]func(*discoveryv1.EndpointSlice){
		"an endpoint's address": func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses[0] = "10.1.0.2" },
		"an endpoint's readiness": func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Conditions.Ready = ptr.To(false)
		},
		"one more endpoint": func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.0.3"}})
		},
		"a port":           func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = ptr.To[int32](81) },
		"the address type": func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 },
		"a label":          func(s *discoveryv1.EndpointSlice) { s.Labels["l"] = "2" },
		"an annotation":    func(s *discoveryv1.EndpointSlice) { s.Annotations["a"] = "b" },
	} {
		w := want()
		change(w)
		if planSliceUpToDate(have, w) {
			t.Errorf("planned with %s changed, the cached slice is taken as up to date", name)
		}
	}
	empty, none := want(), want()
	empty.Endpoints, none.Endpoints = []discoveryv1.Endpoint{}, nil
	if !planSliceUpToDate(cached(empty), none) || !planSliceUpToDate(cached(none), empty) {
		t.Errorf("an empty endpoint list and none differ")
	}
	uncached := want()
	if planSliceUpToDate(uncached, want()) {
		t.Errorf("a slice without its digest is taken as up to date")
	}
}

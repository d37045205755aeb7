package mcs

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/utils/ptr"
)

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

package mcs

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestImportReadyCondition(t *testing.T) {
	v4 := map[v1.IPFamily]bool{v1.IPv4Protocol: true}
	tests := []struct {
		name     string
		families []v1.IPFamily
		served   map[v1.IPFamily]bool
		ipError  string
		status   metav1.ConditionStatus
		reason   mcsv1beta1.ServiceImportConditionReason
		message  string
	}{
		{"served family", []v1.IPFamily{v1.IPv4Protocol}, v4, "", metav1.ConditionTrue, mcsv1beta1.ServiceImportReasonReady, ""},
		{"dual-stack import in an IPv4 member", []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}, v4, "", metav1.ConditionTrue, mcsv1beta1.ServiceImportReasonReady, ""},
		{"IPv6 import in an IPv4 member", []v1.IPFamily{v1.IPv6Protocol}, v4, "", metav1.ConditionFalse, mcsv1beta1.ServiceImportReasonIPFamilyNotSupported, "[IPv4] only"},
		{"unknown member families", []v1.IPFamily{v1.IPv6Protocol}, nil, "", metav1.ConditionTrue, mcsv1beta1.ServiceImportReasonReady, ""},
		{"no clusterset IP", []v1.IPFamily{v1.IPv4Protocol}, v4, "clusterset IP range 10.250.0.0/30 is full", metav1.ConditionFalse, mcsv1beta1.ServiceImportReasonPending, "is full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := importReadyCondition(tt.families, tt.served, "cluster-a", tt.ipError)
			if c.Status != tt.status || c.Reason != string(tt.reason) || !strings.Contains(c.Message, tt.message) {
				t.Errorf("got %s/%s %q, want %s/%s containing %q", c.Status, c.Reason, c.Message, tt.status, tt.reason, tt.message)
			}
		})
	}
}

func TestSameSlice(t *testing.T) {
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-cluster-a-1", Namespace: "demo",
			Labels:          map[string]string{mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: "cluster-a"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ServiceImport", Name: "web", UID: "u1"}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	// What the apiserver returns of what was written.
	stored := func() *discoveryv1.EndpointSlice {
		s := want.DeepCopy()
		s.UID, s.ResourceVersion, s.Generation = "s1", "7", 1
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: fieldManager, Operation: metav1.ManagedFieldsOperationUpdate}}
		return s
	}
	if !sameSlice(newWrittenSlice(stored()), want) {
		t.Errorf("a slice differing only in server-side metadata is not the same")
	}
	empty := want.DeepCopy()
	empty.Ports = []discoveryv1.EndpointPort{}
	noPorts := stored()
	noPorts.Ports = nil
	if !sameSlice(newWrittenSlice(noPorts), empty) {
		t.Errorf("an empty port list and none are not the same")
	}
	for name, change := range map[string]func(*discoveryv1.EndpointSlice){
		"readiness":   func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Conditions.Ready = ptr.To(false) },
		"address":     func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses[0] = "10.0.0.2" },
		"port":        func(s *discoveryv1.EndpointSlice) { s.Ports[0].Port = ptr.To[int32](8080) },
		"label":       func(s *discoveryv1.EndpointSlice) { s.Labels[mcsv1beta1.LabelSourceCluster] = "cluster-b" },
		"owner":       func(s *discoveryv1.EndpointSlice) { s.OwnerReferences[0].UID = "u2" },
		"addressType": func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 },
	} {
		have := stored()
		change(have)
		if sameSlice(newWrittenSlice(have), want) {
			t.Errorf("a change of %s went unnoticed", name)
		}
	}
}

// TestWrittenSlice checks what the cache keeps of a slice with the
// controller's managed-by label: who else wrote it (reported when it is
// deleted), and what others set that an update must not drop.
func TestWrittenSlice(t *testing.T) {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-cluster-a-1", Namespace: "demo", UID: "s1", ResourceVersion: "7",
			Labels:      map[string]string{mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: "cluster-a", discoveryv1.LabelServiceName: "web"},
			Annotations: map[string]string{"note": "x"},
			Finalizers:  []string{"example.com/hold"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: fieldManager}, {Manager: "kubectl-edit"}, {Manager: "attacker"}, {Manager: "kubectl-edit"},
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}},
	}
	w := newWrittenSlice(s)
	if got := strings.Join(w.writers, ","); got != "attacker,kubectl-edit" {
		t.Errorf("writers = %q, want attacker,kubectl-edit", got)
	}
	if service, ok := w.service(); !ok || service != "web" || w.importName() != "web" || w.sourceCluster() != "cluster-a" || w.Namespace() != "demo" {
		t.Errorf("labels read back as service %q (%v), import %q, source %q, namespace %q", service, ok, w.importName(), w.sourceCluster(), w.Namespace())
	}
	if key, err := cache.MetaNamespaceKeyFunc(w); err != nil || key != "demo/web-cluster-a-1" {
		t.Errorf("informer key = %q, %v", key, err)
	}
	want := s.DeepCopy()
	want.ObjectMeta = metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels}
	want.Endpoints[0].Addresses[0] = "10.0.0.2"
	u := w.update(want)
	if u.ResourceVersion != "7" || u.Annotations["note"] != "x" || len(u.Finalizers) != 1 || u.Endpoints[0].Addresses[0] != "10.0.0.2" {
		t.Errorf("update = %+v, want want's content on the stored identity, annotations and finalizers kept", u)
	}
	if want.ResourceVersion != "" {
		t.Errorf("update changed want, which every member's worker shares")
	}
}

// TestCompactLocalSlice checks what the cache keeps of a member's own
// slice: every endpoint and what is mirrored of it, nothing that names the
// member's Pods (only that the target is a Pod of the namespace, as one
// shared reference), and no room left over from decoding.
func TestCompactLocalSlice(t *testing.T) {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: "demo", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   make([]discoveryv1.Endpoint, 0, 16),
	}
	for i := range 10 {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.0.0.%d", i+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To("node-a"),
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: fmt.Sprintf("web-%d", i)},
		})
	}
	obj, err := compactLocalSlice(s)
	got, ok := obj.(*discoveryv1.EndpointSlice)
	if err != nil || !ok {
		t.Fatalf("compactLocalSlice = %T, %v", obj, err)
	}
	if len(got.Endpoints) != 10 || cap(got.Endpoints) != 10 || got.ManagedFields != nil {
		t.Errorf("endpoints len %d cap %d, managedFields %v: want 10, 10, none", len(got.Endpoints), cap(got.Endpoints), got.ManagedFields)
	}
	for i, ep := range got.Endpoints {
		if ep.TargetRef != podTarget || ep.Addresses[0] != fmt.Sprintf("10.0.0.%d", i+1) || ep.NodeName == nil || !*ep.Conditions.Ready {
			t.Errorf("endpoint %d = %+v: want its address, readiness and node, and the shared Pod target", i, ep)
		}
	}
}

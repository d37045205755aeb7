package mcs

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	a := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "s", ResourceVersion: "1", Labels: map[string]string{"l": "v"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	b := a.DeepCopy()
	b.ResourceVersion, b.ManagedFields = "2", []metav1.ManagedFieldsEntry{{Manager: "x"}}
	if !sameSlice(a, b) {
		t.Errorf("slices differing only in server-side metadata are not the same")
	}
	b.Endpoints[0].Conditions.Ready = ptr.To(false)
	if sameSlice(a, b) {
		t.Errorf("a readiness change went unnoticed")
	}
}

package mcs

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A derived Service asks only for the families its member serves, so that
// a dual-stack import is served single-stack in a single-stack member
// instead of being refused by the member's apiserver.
func TestFitFamilies(t *testing.T) {
	v4 := map[v1.IPFamily]bool{v1.IPv4Protocol: true}
	v6 := map[v1.IPFamily]bool{v1.IPv6Protocol: true}
	dual := map[v1.IPFamily]bool{v1.IPv4Protocol: true, v1.IPv6Protocol: true}
	for _, tc := range []struct {
		name     string
		families []v1.IPFamily
		served   map[v1.IPFamily]bool
		ok       bool
		want     []v1.IPFamily
		policy   v1.IPFamilyPolicy
	}{
		{"dual import, IPv4 member", []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}, v4, true, []v1.IPFamily{v1.IPv4Protocol}, v1.IPFamilyPolicySingleStack},
		{"dual import, dual member", []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}, dual, true, []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}, v1.IPFamilyPolicyRequireDualStack},
		{"IPv4 import, IPv6 member", []v1.IPFamily{v1.IPv4Protocol}, v6, false, nil, ""},
		{"unknown member", []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}, nil, true, []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}, v1.IPFamilyPolicyRequireDualStack},
		{"no families (headless import)", nil, v4, true, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &v1.Service{Spec: v1.ServiceSpec{IPFamilies: slices.Clone(tc.families)}}
			if len(tc.families) == 2 {
				svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
			}
			ok := fitFamilies(svc, tc.served)
			if ok != tc.ok {
				t.Fatalf("fitFamilies = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if !slices.Equal(svc.Spec.IPFamilies, tc.want) || string(ptr.Deref(svc.Spec.IPFamilyPolicy, "")) != string(tc.policy) {
				t.Errorf("families %v policy %v, want %v %v", svc.Spec.IPFamilies, ptr.Deref(svc.Spec.IPFamilyPolicy, ""), tc.want, tc.policy)
			}
		})
	}
}

// What cannot change in a Service in place makes the controller replace
// its derived Service; what can does not.
func TestNeedsRecreate(t *testing.T) {
	svc := func(clusterIP string, families ...v1.IPFamily) *v1.Service {
		return &v1.Service{Spec: v1.ServiceSpec{ClusterIP: clusterIP, IPFamilies: families}}
	}
	for _, tc := range []struct {
		name       string
		have, want *v1.Service
		recreate   bool
	}{
		{"same", svc("10.96.0.7", v1.IPv4Protocol), svc("", v1.IPv4Protocol), false},
		{"becomes headless", svc("10.96.0.7", v1.IPv4Protocol), svc(v1.ClusterIPNone), true},
		{"stops being headless", svc(v1.ClusterIPNone), svc("", v1.IPv4Protocol), true},
		{"family changes", svc("10.96.0.7", v1.IPv4Protocol), svc("", v1.IPv6Protocol), true},
		{"becomes dual-stack", svc("10.96.0.7", v1.IPv4Protocol), svc("", v1.IPv4Protocol, v1.IPv6Protocol), true},
		{"headless, families left to the apiserver", svc(v1.ClusterIPNone, v1.IPv4Protocol), svc(v1.ClusterIPNone), false},
	} {
		if got := needsRecreate(tc.have, tc.want); got != tc.recreate {
			t.Errorf("%s: needsRecreate = %v, want %v", tc.name, got, tc.recreate)
		}
	}
}

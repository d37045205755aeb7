package export

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var defaultManagers = []string{ManagerEndpointSliceController, ManagerMirroringController}

// sourceSlice is a slice of Service web in namespace ns labelled with
// manager, controlled by owner (kind/name/uid; none when kind is empty).
func sourceSlice(manager, kind, name string, uid types.UID, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abcde", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: manager,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if kind != "" {
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return s
}

// TestCheckSource: the managed-by label is a claim any slice writer can
// make. A slice is mirrored only when it is also owned as the claimed
// manager's slices are, and that manager is the one Kubernetes runs for
// the Service: a tenant who may write EndpointSlices cannot publish its
// own addresses (another network's, another member's nodes or apiserver)
// under a name it exports.
func TestCheckSource(t *testing.T) {
	withSelector := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "svc-uid"}, Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	selectorless := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "svc-uid"}}
	for _, tc := range []struct {
		name     string
		slice    *discoveryv1.EndpointSlice
		svc      *v1.Service
		managers []string
		want     SourceRefusal
	}{
		{"the EndpointSlice controller's slice of a Service with a selector", sourceSlice(ManagerEndpointSliceController, "Service", "web", "svc-uid"), withSelector, defaultManagers, ""},
		{"the mirroring controller's slice of a selector-less Service", sourceSlice(ManagerMirroringController, "Endpoints", "web", "ep-uid"), selectorless, defaultManagers, ""},
		{"a slice of a manager nobody trusts", sourceSlice("tenant-controller", "Service", "web", "svc-uid"), withSelector, defaultManagers, SourceUntrustedManager},
		{"a slice with no managed-by", sourceSlice("", "Service", "web", "svc-uid"), withSelector, defaultManagers, SourceUntrustedManager},

		// Attacks: the label forged.
		{"attack: the EndpointSlice controller's label, no owner", sourceSlice(ManagerEndpointSliceController, "", "", ""), withSelector, defaultManagers, SourceNotOwned},
		{"attack: the EndpointSlice controller's label, owned by another Service", sourceSlice(ManagerEndpointSliceController, "Service", "db", "db-uid"), withSelector, defaultManagers, SourceNotOwned},
		{"attack: the EndpointSlice controller's label, owned by a former Service of the name", sourceSlice(ManagerEndpointSliceController, "Service", "web", "old-uid"), withSelector, defaultManagers, SourceNotOwned},
		{"attack: the EndpointSlice controller's label, owned by a ConfigMap of the name", sourceSlice(ManagerEndpointSliceController, "ConfigMap", "web", "svc-uid"), withSelector, defaultManagers, SourceNotOwned},
		{"attack: the Service as an owner that is not the controller", func() *discoveryv1.EndpointSlice {
			s := sourceSlice(ManagerEndpointSliceController, "Service", "web", "svc-uid")
			s.OwnerReferences[0].Controller = nil
			return s
		}(), withSelector, defaultManagers, SourceNotOwned},
		{"attack: the EndpointSlice controller's label for a selector-less Service", sourceSlice(ManagerEndpointSliceController, "Service", "web", "svc-uid"), selectorless, defaultManagers, SourceWrongController},
		{"attack: the mirroring controller's label, no owner", sourceSlice(ManagerMirroringController, "", "", ""), selectorless, defaultManagers, SourceNotOwned},
		{"attack: the mirroring controller's label, owned by the Service", sourceSlice(ManagerMirroringController, "Service", "web", "svc-uid"), selectorless, defaultManagers, SourceNotOwned},
		{"attack: the mirroring controller's label, owned by other Endpoints", sourceSlice(ManagerMirroringController, "Endpoints", "db", "ep-uid"), selectorless, defaultManagers, SourceNotOwned},
		{"attack: the mirroring controller's label for a Service with a selector", sourceSlice(ManagerMirroringController, "Endpoints", "web", "ep-uid"), withSelector, defaultManagers, SourceWrongController},

		// Other managers the operator trusts must be owned by the Service.
		{"another trusted manager's slice owned by the Service", sourceSlice("gateway.example.com", "Service", "web", "svc-uid"), selectorless, []string{"gateway.example.com"}, ""},
		{"another trusted manager's slice with no owner", sourceSlice("gateway.example.com", "", "", ""), selectorless, []string{"gateway.example.com"}, SourceNotOwned},
		{"the EndpointSlice controller when only another manager is trusted", sourceSlice(ManagerEndpointSliceController, "Service", "web", "svc-uid"), withSelector, []string{"gateway.example.com"}, SourceUntrustedManager},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := CheckSource(tc.slice, tc.svc, tc.managers)
			if got != tc.want {
				t.Errorf("CheckSource = %q (%s), want %q", got, why, tc.want)
			}
			if (got == "") != (why == "") {
				t.Errorf("CheckSource = %q with message %q: a refusal says why, an acceptance says nothing", got, why)
			}
		})
	}
}

// TestVouched: while a source cluster's endpoint ranges are unknown, an
// address is mirrored only when the writer vouches for it: an endpoint
// the EndpointSlice controller wrote for a Pod of the namespace, for a
// Service with a selector. Nothing of a selector-less Service is (its
// Endpoints, which anyone who may write one fills with any address:
// other members' nodes, an apiserver), whoever says it wrote the slice.
func TestVouched(t *testing.T) {
	pod := func(ns string) *v1.ObjectReference {
		return &v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0"}
	}
	withSelector := &v1.Service{Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	selectorless := &v1.Service{}
	for _, tc := range []struct {
		name        string
		manager     string
		svc         *v1.Service
		targets     []*v1.ObjectReference // one endpoint per target, 10.1.0.<i+1>
		kept, drops []string
	}{
		{"every endpoint names a Pod of the namespace", ManagerEndpointSliceController, withSelector, []*v1.ObjectReference{pod("ns"), pod("ns")}, []string{"10.1.0.1", "10.1.0.2"}, nil},
		{"a target with no namespace is the slice's own", ManagerEndpointSliceController, withSelector, []*v1.ObjectReference{{Kind: "Pod", Name: "web-0"}}, []string{"10.1.0.1"}, nil},
		{"attack: an endpoint with no target", ManagerEndpointSliceController, withSelector, []*v1.ObjectReference{pod("ns"), nil}, []string{"10.1.0.1"}, []string{"10.1.0.2"}},
		{"attack: an endpoint naming a Node", ManagerEndpointSliceController, withSelector, []*v1.ObjectReference{{Kind: "Node", Name: "node-1"}}, nil, []string{"10.1.0.1"}},
		{"attack: an endpoint naming a Pod of another namespace", ManagerEndpointSliceController, withSelector, []*v1.ObjectReference{pod("kube-system")}, nil, []string{"10.1.0.1"}},
		{"attack: mirrored from Endpoints, even naming Pods", ManagerMirroringController, selectorless, []*v1.ObjectReference{pod("ns"), nil}, nil, []string{"10.1.0.1", "10.1.0.2"}},
		{"attack: another trusted manager's Pods of a selector-less Service", "gateway.example.com", selectorless, []*v1.ObjectReference{pod("ns")}, nil, []string{"10.1.0.1"}},
		{"another trusted manager's Pods of a Service with a selector", "gateway.example.com", withSelector, []*v1.ObjectReference{pod("ns"), nil}, []string{"10.1.0.1"}, []string{"10.1.0.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := sourceSlice(tc.manager, "", "", "")
			for i, ref := range tc.targets {
				src.Endpoints = append(src.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.0.%d", i+1)}, TargetRef: ref})
			}
			before := len(src.Endpoints)
			got, dropped := Vouched(src, tc.svc)
			var kept []string
			for _, ep := range got.Endpoints {
				kept = append(kept, ep.Addresses...)
			}
			if !slices.Equal(kept, tc.kept) || !slices.Equal(dropped, tc.drops) {
				t.Errorf("Vouched kept %v dropped %v, want %v and %v", kept, dropped, tc.kept, tc.drops)
			}
			if len(src.Endpoints) != before {
				t.Errorf("Vouched changed its argument, an informer's object")
			}
			if tc.drops == nil && got != src {
				t.Errorf("Vouched copied a slice it keeps whole")
			}
		})
	}
}

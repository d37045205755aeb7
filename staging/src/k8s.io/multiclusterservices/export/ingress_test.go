package export

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func ingressNode(name string, ready bool, addrs ...v1.NodeAddress) *v1.Node {
	status := v1.ConditionTrue
	if !ready {
		status = v1.ConditionUnknown
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{
			Addresses:  addrs,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: status}},
		},
	}
}

func internal(ip string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip} }
func external(ip string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeExternalIP, Address: ip} }

func nodePortService(typ v1.ServiceType) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: IngressName("shop", "web")},
		Spec: v1.ServiceSpec{
			Type: typ,
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080},
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053},
				{Name: "admin", Protocol: v1.ProtocolTCP, Port: 9000, NodePort: 30900},
			},
		},
	}
}

func TestIngressSlices(t *testing.T) {
	served := map[string]bool{"http": true, "dns": true}
	deleting := ingressNode("c-node3", true, internal("172.30.2.4"))
	deleting.DeletionTimestamp = &metav1.Time{}
	nodes := []*v1.Node{
		ingressNode("c-node0", true, internal("172.30.2.1"), external("203.0.113.1")),
		ingressNode("c-node1", true, external("203.0.113.2")),
		ingressNode("c-node2", false, internal("172.30.2.3")),
		deleting,
		ingressNode("c-node4", true, internal("fd00:172:30::2:5"), internal("172.30.2.5")),
		ingressNode("c-node5", true, internal("169.254.169.254")),
	}
	lb := nodePortService(v1.ServiceTypeLoadBalancer)
	lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "172.31.2.1"}, {Hostname: "lb.example"}, {IP: "127.0.0.1"}}
	lbPending := nodePortService(v1.ServiceTypeLoadBalancer)

	nodePorts := []discoveryv1.EndpointPort{
		{Name: ptr.To("http"), Port: ptr.To[int32](30080), Protocol: ptr.To(v1.ProtocolTCP)},
		{Name: ptr.To("dns"), Port: ptr.To[int32](30053), Protocol: ptr.To(v1.ProtocolUDP)},
	}
	type family struct {
		addrs []string
		ports []discoveryv1.EndpointPort
	}
	for _, tc := range []struct {
		name     string
		ingress  *v1.Service
		nodes    []*v1.Node
		// entryPoints, when set, are given as they are (as a member
		// publishes them in pull mode) instead of EntryPoints(nodes).
		entryPoints []string
		ready       bool
		want     map[discoveryv1.AddressType]family
		reason   string
		readyEPs bool
	}{{
		name: "node ports on ready nodes, internal address first, per family", ingress: nodePortService(v1.ServiceTypeNodePort), nodes: nodes, ready: true,
		want: map[discoveryv1.AddressType]family{
			discoveryv1.AddressTypeIPv4: {[]string{"172.30.2.1", "172.30.2.5", "203.0.113.2"}, nodePorts},
			discoveryv1.AddressTypeIPv6: {[]string{"fd00:172:30::2:5"}, nodePorts},
		},
		reason: IngressReasonServing, readyEPs: true,
	}, {
		name: "published entry points: only global unicast, not special-purpose, addresses are taken", ingress: nodePortService(v1.ServiceTypeNodePort),
		entryPoints: []string{"172.30.2.1", "not-an-address", "127.0.0.1", "169.254.169.254", "0.0.0.0", "::ffff:172.30.2.9", "fe80::1", "224.0.0.1", "172.30.2.1", "fd00:172:30::2:5"}, ready: true,
		want: map[discoveryv1.AddressType]family{
			discoveryv1.AddressTypeIPv4: {[]string{"172.30.2.1"}, nodePorts},
			discoveryv1.AddressTypeIPv6: {[]string{"fd00:172:30::2:5"}, nodePorts},
		},
		reason: IngressReasonServing, readyEPs: true,
	}, {
		name: "no ready endpoint behind: entry points not ready", ingress: nodePortService(v1.ServiceTypeNodePort), nodes: nodes[:1], ready: false,
		want:   map[discoveryv1.AddressType]family{discoveryv1.AddressTypeIPv4: {[]string{"172.30.2.1"}, nodePorts}},
		reason: IngressReasonServing, readyEPs: false,
	}, {
		name: "load balancer address on the Service's ports, nodes ignored", ingress: lb, nodes: nodes, ready: true,
		want: map[discoveryv1.AddressType]family{discoveryv1.AddressTypeIPv4: {[]string{"172.31.2.1"}, []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(v1.ProtocolTCP)},
			{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(v1.ProtocolUDP)},
		}}},
		reason: IngressReasonServing, readyEPs: true,
	}, {
		name: "load balancer without an address yet", ingress: lbPending, nodes: nodes, ready: true, reason: IngressReasonPending,
	}, {
		name: "no ready node", ingress: nodePortService(v1.ServiceTypeNodePort), nodes: []*v1.Node{nodes[2], deleting, nodes[5]}, ready: true, reason: IngressReasonNoNodes,
	}, {
		name: "a ClusterIP Service is no ingress", ingress: func() *v1.Service { s := nodePortService(v1.ServiceTypeClusterIP); return s }(), nodes: nodes, ready: true, reason: IngressReasonPending,
	}, {
		name: "node ports not allocated yet", ingress: func() *v1.Service {
			s := nodePortService(v1.ServiceTypeNodePort)
			for i := range s.Spec.Ports {
				s.Spec.Ports[i].NodePort = 0
			}
			return s
		}(), nodes: nodes, ready: true, reason: IngressReasonPending,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			entryPoints := tc.entryPoints
			if entryPoints == nil {
				entryPoints = EntryPoints(tc.nodes)
			}
			got, st := IngressSlices(tc.ingress, entryPoints, "web", "cluster-c", "mcs-controller", served, tc.ready)
			if st.Reason != tc.reason || st.Serving != (tc.reason == IngressReasonServing) || st.Message == "" {
				t.Errorf("state %+v, want reason %s", st, tc.reason)
			}
			gotFamilies := map[discoveryv1.AddressType]family{}
			for _, s := range got {
				if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
					t.Errorf("slice name %q: %v", s.Name, errs)
				}
				// The import's synthetic Service, never a local one.
				wantLabels := map[string]string{mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: "cluster-c", discoveryv1.LabelManagedBy: "mcs-controller",
					discoveryv1.LabelServiceName: "web.clusterset"}
				if diff := cmp.Diff(wantLabels, s.Labels); diff != "" {
					t.Errorf("labels (-want +got):\n%s", diff)
				}
				var addrs []string
				for _, ep := range s.Endpoints {
					addrs = append(addrs, ep.Addresses...)
					if *ep.Conditions.Ready != tc.readyEPs || *ep.Conditions.Serving != tc.readyEPs || *ep.Conditions.Terminating || ep.NodeName != nil {
						t.Errorf("endpoint %v: conditions %+v nodeName %v, want ready=serving=%v", ep.Addresses, ep.Conditions, ep.NodeName, tc.readyEPs)
					}
				}
				gotFamilies[s.AddressType] = family{addrs, s.Ports}
			}
			if diff := cmp.Diff(tc.want, gotFamilies, cmp.AllowUnexported(family{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("entry points (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIngressService(t *testing.T) {
	exported := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"team": "a"}},
		Spec: v1.ServiceSpec{
			Type:            v1.ServiceTypeClusterIP,
			Selector:        map[string]string{"app": "web"},
			ClusterIP:       "10.96.0.20",
			IPFamilies:      []v1.IPFamily{v1.IPv4Protocol},
			IPFamilyPolicy:  ptr.To(v1.IPFamilyPolicySingleStack),
			SessionAffinity: v1.ServiceAffinityClientIP,
			Ports:           []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web")}},
		},
	}
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "export-uid"}}
	got := IngressService(exported, se, v1.ServiceTypeNodePort, "mcs-controller")
	if errs := validation.IsDNS1035Label(got.Name); len(errs) > 0 || got.Name == exported.Name || got.Name != IngressName("shop", "web") {
		t.Errorf("name %q: %v", got.Name, errs)
	}
	if got.Spec.ClusterIP != "" || got.Spec.Type != v1.ServiceTypeNodePort || got.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyCluster ||
		got.Spec.Selector["app"] != "web" || got.Spec.SessionAffinity != v1.ServiceAffinityClientIP || got.Labels["team"] != "" ||
		got.Labels[LabelIngressFor] != "web" || got.Labels[LabelManagedBy] != "mcs-controller" {
		t.Errorf("ingress Service %+v", got)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "export-uid" || got.OwnerReferences[0].Kind != "ServiceExport" {
		t.Errorf("owner %+v, want the ServiceExport", got.OwnerReferences)
	}
	// Changing the selector keeps the node ports other members hold.
	have := got.DeepCopy()
	have.Spec.ClusterIP = "10.96.0.30"
	have.Spec.Ports[0].NodePort = 31234
	if IngressDiffers(have, got) {
		t.Error("the apiserver's node port and cluster IP count as a difference")
	}
	exported.Spec.Selector = map[string]string{"app": "web2"}
	want := IngressService(exported, se, v1.ServiceTypeNodePort, "mcs-controller")
	if !IngressDiffers(have, want) {
		t.Error("a new selector is no difference")
	}
	updated := UpdateIngress(have, want)
	if updated.Spec.Ports[0].NodePort != 31234 || updated.Spec.Selector["app"] != "web2" || updated.Spec.ClusterIP != "10.96.0.30" || IngressDiffers(updated, want) {
		t.Errorf("updated %+v", updated.Spec)
	}
}

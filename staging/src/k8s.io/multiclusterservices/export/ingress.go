package export

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"k8s.io/multiclusterservices/proxy"
)

// A member whose pods other members cannot reach (a private or
// overlapping pod network) is represented to them by its ingress: a
// NodePort or LoadBalancer Service in front of the exported Service's
// pods. The EndpointSlices the other members get for that cluster carry
// the ingress's addresses and ports instead of pod IPs, and their proxies
// DNAT a clusterset IP to them as they would to pods. Inside the
// exporting cluster nothing changes.

// LabelIngressFor, on a Service the controller created as the ingress of
// an export, names the exported Service.
const LabelIngressFor = "multiclusterservices.k8s.io/ingress-for"

// IngressName is the name of the ingress Service of export
// namespace/name: "ingress-" and the first ten characters of the
// lower-case, unpadded base32hex encoding of the SHA-256 of
// "namespace/name" (as DerivedName), a DNS-1035 label whatever the
// export's name.
func IngressName(namespace, name string) string {
	return "ingress-" + strings.TrimPrefix(proxy.DerivedServiceName(namespace, name), "derived-")
}

// IsIngress tells whether exported Service svc is its own ingress: a
// NodePort or LoadBalancer Service is reached through its node ports or
// load-balancer addresses as it is, and no other Service is made for it.
func IsIngress(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer
}

// IngressService is the Service that makes the pods of exported Service
// svc reachable from other clusters through their nodes (NodePort) or a
// load balancer (LoadBalancer), as typ says: the same selector, ports,
// IP families and session affinity, externalTrafficPolicy Cluster (every
// node forwards to every ready pod, so that any ready node is an entry
// point), labelled with managedBy and the exported Service's name, and
// owned by the ServiceExport se, so that it goes with the export.
func IngressService(svc *v1.Service, se *mcsv1beta1.ServiceExport, typ v1.ServiceType, managedBy string) *v1.Service {
	out := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace,
			Name:      IngressName(svc.Namespace, svc.Name),
			Labels: map[string]string{
				LabelIngressFor: svc.Name,
				LabelManagedBy:  managedBy,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: mcsv1beta1.GroupVersion.String(),
				Kind:       "ServiceExport",
				Name:       se.Name,
				UID:        se.UID,
			}},
		},
		Spec: v1.ServiceSpec{
			Type:                  typ,
			Selector:              maps.Clone(svc.Spec.Selector),
			IPFamilies:            slices.Clone(svc.Spec.IPFamilies),
			IPFamilyPolicy:        svc.Spec.IPFamilyPolicy,
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
			SessionAffinity:       svc.Spec.SessionAffinity,
		},
	}
	if svc.Spec.SessionAffinityConfig != nil {
		out.Spec.SessionAffinityConfig = svc.Spec.SessionAffinityConfig.DeepCopy()
	}
	if len(out.Spec.IPFamilies) == 0 {
		out.Spec.IPFamilies = nil
	}
	for _, p := range svc.Spec.Ports {
		out.Spec.Ports = append(out.Spec.Ports, v1.ServicePort{
			Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol,
			Port: p.Port, TargetPort: p.TargetPort,
		})
	}
	return out
}

// IngressDiffers tells whether the ingress Service have (as the apiserver
// holds it) must be updated to be want (IngressService): the fields the
// controller sets, ignoring what the apiserver fills in (node ports,
// cluster IPs, defaults).
func IngressDiffers(have, want *v1.Service) bool {
	if have.Spec.Type != want.Spec.Type || !maps.Equal(have.Spec.Selector, want.Spec.Selector) ||
		have.Spec.SessionAffinity != want.Spec.SessionAffinity ||
		have.Spec.ExternalTrafficPolicy != want.Spec.ExternalTrafficPolicy ||
		len(have.Spec.Ports) != len(want.Spec.Ports) {
		return true
	}
	for i, p := range want.Spec.Ports {
		h := have.Spec.Ports[i]
		if h.Name != p.Name || h.Protocol != p.Protocol || h.Port != p.Port || h.TargetPort != p.TargetPort ||
			!ptr.Equal(h.AppProtocol, p.AppProtocol) {
			return true
		}
	}
	return false
}

// UpdateIngress returns have changed to carry want's fields (IngressDiffers),
// keeping the node ports already allocated to ports that stay, so that
// the entry points other members hold stay valid.
func UpdateIngress(have, want *v1.Service) *v1.Service {
	out := have.DeepCopy()
	out.Labels, out.OwnerReferences = want.Labels, want.OwnerReferences
	out.Spec.Type, out.Spec.Selector = want.Spec.Type, want.Spec.Selector
	out.Spec.SessionAffinity, out.Spec.SessionAffinityConfig = want.Spec.SessionAffinity, want.Spec.SessionAffinityConfig
	out.Spec.ExternalTrafficPolicy = want.Spec.ExternalTrafficPolicy
	ports := make([]v1.ServicePort, 0, len(want.Spec.Ports))
	for _, p := range want.Spec.Ports {
		for _, h := range have.Spec.Ports {
			if h.Name == p.Name && h.Protocol == p.Protocol {
				p.NodePort = h.NodePort
			}
		}
		ports = append(ports, p)
	}
	out.Spec.Ports = ports
	return out
}

// IngressState says whether an ingress serves, and why not.
type IngressState struct {
	// Reason is a CamelCase word, Message a sentence for people.
	Reason, Message string
	// Serving is true when the ingress has at least one entry point.
	Serving bool
}

// Reasons of IngressState.
const (
	IngressReasonServing    = "EntryPointsReady"
	IngressReasonHeadless   = "HeadlessExport"
	IngressReasonNoSelector = "NoSelector"
	IngressReasonPending    = "IngressPending"
	IngressReasonNoNodes    = "NoReadyNodes"
)

// IngressSlices are the EndpointSlices that members which cannot reach the
// pods of source cluster cluster get for its export of service, instead
// of the slices of its pods: the entry points of ingress, the Service
// that is the export's ingress there, as the apiserver holds it.
//
//   - A LoadBalancer Service is entered at its load-balancer IP addresses,
//     on the Service's own ports (none until the load balancer has one).
//   - A NodePort Service is entered at entryPoints, the addresses of the
//     cluster's ready nodes (EntryPoints), on the node ports.
//
// Only the ports served (Result.ServedPorts) are listed, by the import's
// port names, so that the proxies match them to the import's ports as
// they match pods' ports. An entry point is ready while the cluster has
// at least one ready endpoint for the export (backendsReady): with no
// pod behind it, a cluster takes no share of the traffic. Each entry point
// is one endpoint to the proxies: a cluster reached through its ingress
// gets as many shares of the clusterset's traffic as it has entry points,
// whatever the number of pods behind them (the proxies weigh endpoints
// equally), and spreads its share over its ready pods itself.
//
// Addresses that are not global unicast, or are special-purpose (cloud
// metadata, loopback), are never entry points. One slice per address
// family, named after the cluster and the family, labelled as
// ImportedSlice labels; the caller sets the owner reference.
func IngressSlices(ingress *v1.Service, entryPoints []string, service, cluster, managedBy string, served map[string]bool, backendsReady bool) ([]*discoveryv1.EndpointSlice, IngressState) {
	byFamily := map[discoveryv1.AddressType][]string{}
	add := func(s string) {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" || !ip.IsGlobalUnicast() || special(ip) || ip.Is4In6() {
			return
		}
		t := discoveryv1.AddressTypeIPv4
		if ip.Is6() {
			t = discoveryv1.AddressTypeIPv6
		}
		if !slices.Contains(byFamily[t], ip.String()) {
			byFamily[t] = append(byFamily[t], ip.String())
		}
	}
	// A LoadBalancer Service is entered through its load balancer only:
	// who asks for one says its nodes are not the way in.
	viaLB := ingress.Spec.Type == v1.ServiceTypeLoadBalancer
	if viaLB {
		for _, in := range ingress.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				add(in.IP)
			}
		}
	}
	var ports []discoveryv1.EndpointPort
	for _, p := range ingress.Spec.Ports {
		if !served[p.Name] {
			continue
		}
		port := p.Port
		if !viaLB {
			port = p.NodePort
		}
		if port == 0 {
			continue
		}
		q := discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(port), Protocol: ptr.To(p.Protocol)}
		if q.Protocol == nil || *q.Protocol == "" {
			q.Protocol = ptr.To(v1.ProtocolTCP)
		}
		if p.AppProtocol != nil {
			q.AppProtocol = ptr.To(*p.AppProtocol)
		}
		ports = append(ports, q)
	}
	if !viaLB {
		if !IsIngress(ingress) {
			return nil, IngressState{Reason: IngressReasonPending, Message: fmt.Sprintf("Service %s is %s: it has no node ports", ingress.Name, ingress.Spec.Type)}
		}
		if len(ports) == 0 {
			return nil, IngressState{Reason: IngressReasonPending, Message: fmt.Sprintf("Service %s has no node ports yet", ingress.Name)}
		}
		for _, a := range entryPoints {
			add(a)
		}
	}
	if len(byFamily) == 0 {
		if viaLB {
			return nil, IngressState{Reason: IngressReasonPending, Message: fmt.Sprintf("Service %s has no load-balancer IP address yet", ingress.Name)}
		}
		return nil, IngressState{Reason: IngressReasonNoNodes, Message: fmt.Sprintf("cluster %s has no ready node with an address to serve Service %s's node ports", cluster, ingress.Name)}
	}
	var out []*discoveryv1.EndpointSlice
	for _, t := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		addrs := byFamily[t]
		if len(addrs) == 0 {
			continue
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:      SliceName(service, cluster, "ingress-"+strings.ToLower(string(t))),
				Namespace: ingress.Namespace,
				Labels:    ImportedSliceLabels(service, cluster, managedBy),
			},
			AddressType: t,
			Ports:       slices.Clone(ports),
		}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses: []string{a},
				Conditions: discoveryv1.EndpointConditions{
					Ready: ptr.To(backendsReady), Serving: ptr.To(backendsReady), Terminating: ptr.To(false),
				},
			})
		}
		out = append(out, s)
	}
	how := "its ready nodes' node ports"
	if viaLB {
		how = "its load-balancer address"
	}
	st := IngressState{Reason: IngressReasonServing, Serving: true, Message: fmt.Sprintf("other clusters reach this export through Service %s at %s", ingress.Name, how)}
	if !backendsReady {
		st.Message += "; no endpoint is ready behind it, so its entry points are not ready"
	}
	return out, st
}

// EntryPoints are the addresses at which nodes serve node ports to other
// clusters: every entry-point node's (IsEntryPoint) InternalIP addresses,
// its ExternalIP ones where it has no internal one, sorted and each once.
// Which of them may carry traffic (global unicast, not special-purpose)
// IngressSlices decides, where the plan is made: in pull mode a member
// publishes its EntryPoints and the planner checks them.
func EntryPoints(nodes []*v1.Node) []string {
	var out []string
	for _, n := range nodes {
		if !IsEntryPoint(n) {
			continue
		}
		internal := false
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				out = append(out, a.Address)
				internal = true
			}
		}
		if !internal {
			for _, a := range n.Status.Addresses {
				if a.Type == v1.NodeExternalIP {
					out = append(out, a.Address)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// IsEntryPoint tells whether node n serves node ports to other clusters:
// its Ready condition is True and it is not being deleted.
func IsEntryPoint(n *v1.Node) bool {
	if n.DeletionTimestamp != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// ReadyEndpoints counts the ready endpoints of slices (a missing Ready
// condition counts as ready, as EndpointSlice consumers read it).
func ReadyEndpoints(slices []*discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ptr.Deref(ep.Conditions.Ready, true) {
				n++
			}
		}
	}
	return n
}

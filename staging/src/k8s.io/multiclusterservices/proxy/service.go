package proxy

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// maxSessionAffinityTimeout is the largest ClientIP timeout a Service may
// have (one day), as enforced by Service validation.
const maxSessionAffinityTimeout = 86400

// The policies every translation points to: a proxy never writes a Service
// it is handed, and a proxier is handed one per import.
var (
	singleStack          = v1.IPFamilyPolicySingleStack
	requireDualStack     = v1.IPFamilyPolicyRequireDualStack
	trafficPolicyCluster = v1.ServiceInternalTrafficPolicyCluster
	trafficPolicyLocal   = v1.ServiceInternalTrafficPolicyLocal
)

// ServiceForImport returns the Service a proxy programs for a ServiceImport.
// It returns (nil, nil) for a Headless import, which is served by DNS only,
// and a *RejectionError for an import that must not be programmed.
func ServiceForImport(si *mcsv1beta1.ServiceImport, opts *Options) (*v1.Service, error) {
	if msg := invalidServiceName(si.Name); msg != "" {
		return nil, reject(ReasonInvalidName, "name %q is not a valid Service name: %s", si.Name, msg)
	}
	if manager := si.Labels[LabelImportManagedBy]; !opts.trusts(manager) {
		return nil, reject(ReasonUntrustedManager, "label %s=%q is not one of the trusted managers %v", LabelImportManagedBy, manager, opts.TrustedManagers)
	}
	switch si.Spec.Type {
	case mcsv1beta1.Headless:
		return nil, nil
	case mcsv1beta1.ClusterSetIP:
	default:
		return nil, reject(ReasonInvalidType, "type %q is neither %s nor %s", si.Spec.Type, mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless)
	}

	ips, families, err := clusterSetIPs(si, opts)
	if err != nil {
		return nil, err
	}
	ports, err := servicePorts(si.Spec.Ports)
	if err != nil {
		return nil, err
	}

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:              ServiceName(si.Name),
			Namespace:         si.Namespace,
			UID:               si.UID,
			CreationTimestamp: si.CreationTimestamp,
		},
		Spec: v1.ServiceSpec{
			Type:                v1.ServiceTypeClusterIP,
			ClusterIP:           ips[0],
			ClusterIPs:          ips,
			IPFamilies:          families,
			IPFamilyPolicy:      &singleStack,
			Ports:               ports,
			SessionAffinity:     v1.ServiceAffinityNone,
			TrafficDistribution: si.Spec.TrafficDistribution,
		},
	}
	if len(ips) == 2 {
		svc.Spec.IPFamilyPolicy = &requireDualStack
	}

	switch si.Spec.SessionAffinity {
	case "", v1.ServiceAffinityNone:
	case v1.ServiceAffinityClientIP:
		// The proxier dereferences the timeout of a ClientIP Service, so a
		// missing one gets the Service default.
		timeout := int32(v1.DefaultClientIPServiceAffinitySeconds)
		if c := si.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			timeout = *c.ClientIP.TimeoutSeconds
		}
		if timeout <= 0 || timeout > maxSessionAffinityTimeout {
			return nil, reject(ReasonInvalidSessionAffinity, "sessionAffinityConfig.clientIP.timeoutSeconds %d is not in 1..%d", timeout, maxSessionAffinityTimeout)
		}
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
	default:
		return nil, reject(ReasonInvalidSessionAffinity, "sessionAffinity %q is neither None nor ClientIP", si.Spec.SessionAffinity)
	}

	switch p := si.Spec.InternalTrafficPolicy; {
	case p == nil || *p == v1.ServiceInternalTrafficPolicyCluster:
		svc.Spec.InternalTrafficPolicy = &trafficPolicyCluster
	case *p == v1.ServiceInternalTrafficPolicyLocal:
		svc.Spec.InternalTrafficPolicy = &trafficPolicyLocal
	default:
		return nil, reject(ReasonInvalidTrafficPolicy, "internalTrafficPolicy %q is neither Cluster nor Local", *p)
	}
	return svc, nil
}

// The IP families of a translation, one list per order the import may
// give: shared, as the policies above, since a proxier is handed a Service
// per import and never writes one.
var (
	familiesV4   = []v1.IPFamily{v1.IPv4Protocol}
	familiesV6   = []v1.IPFamily{v1.IPv6Protocol}
	familiesV4V6 = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	familiesV6V4 = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
)

// clusterSetIPs validates an import's IPs and returns them in canonical
// form with their families, in the order the import lists them. When the
// import lists them in canonical form already (always for IPv4: ParseAddr
// accepts no other), the list returned is the import's own, shared as
// EndpointSliceForImport shares a slice's endpoints: informer objects are
// never modified, and neither is a translation.
func clusterSetIPs(si *mcsv1beta1.ServiceImport, opts *Options) ([]string, []v1.IPFamily, error) {
	raw := importIPs(si)
	if len(raw) == 0 {
		return nil, nil, reject(ReasonNoIPs, "a %s import has no ips yet", mcsv1beta1.ClusterSetIP)
	}
	if len(raw) > 2 {
		return nil, nil, reject(ReasonInvalidIP, "ips has %d entries; at most one per IP family is allowed", len(raw))
	}
	var canonical [2]string
	var families [2]v1.IPFamily
	shared := true
	for i, s := range raw {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" || ip.Is4In6() || !ip.IsGlobalUnicast() {
			return nil, nil, reject(ReasonInvalidIP, "ip %q is not a valid unicast IP address", s)
		}
		if !opts.admits(ip) {
			return nil, nil, reject(ReasonIPOutsideClusterSetCIDR, "ip %s is outside the clusterset IP ranges %v this proxy accepts", ip, opts.ClusterSetIPCIDRs)
		}
		family := familyOf(ip)
		if i == 1 && families[0] == family {
			return nil, nil, reject(ReasonInvalidIP, "ips has two %s addresses", family)
		}
		if len(si.Spec.IPFamilies) > 0 && !slices.Contains(si.Spec.IPFamilies, family) {
			return nil, nil, reject(ReasonIPFamilyMismatch, "ip %s is %s but ipFamilies is %v", ip, family, si.Spec.IPFamilies)
		}
		canonical[i] = s
		if !ip.Is4() {
			if canonical[i] = ip.String(); canonical[i] != s {
				shared = false
			}
		}
		families[i] = family
	}
	ips := raw[:len(raw):len(raw)]
	if !shared {
		ips = slices.Clone(canonical[:len(raw)])
	}
	switch {
	case len(raw) == 1 && families[0] == v1.IPv4Protocol:
		return ips, familiesV4, nil
	case len(raw) == 1:
		return ips, familiesV6, nil
	case families[0] == v1.IPv4Protocol:
		return ips, familiesV4V6, nil
	default:
		return ips, familiesV6V4, nil
	}
}

// MaxImportPorts is the most ports a proxy programs for one import: as
// many as one EndpointSlice may carry (the API's bound), so that endpoints
// can be given for every one of them.
const MaxImportPorts = 100

func servicePorts(in []mcsv1beta1.ServicePort) ([]v1.ServicePort, error) {
	if len(in) == 0 {
		return nil, reject(ReasonNoPorts, "ports is empty")
	}
	if len(in) > MaxImportPorts {
		// Every node would program rules for each, whoever wrote the
		// import while the admission policy is absent.
		return nil, reject(ReasonTooManyPorts, "%d ports are more than the %d an EndpointSlice can serve", len(in), MaxImportPorts)
	}
	type portKey struct {
		port     int32
		protocol v1.Protocol
	}
	// Duplicates are looked for only among several ports: most imports
	// have one.
	var names map[string]bool
	var seen map[portKey]bool
	if len(in) > 1 {
		names, seen = map[string]bool{}, map[portKey]bool{}
	}
	out := make([]v1.ServicePort, 0, len(in))
	for i, p := range in {
		protocol := p.Protocol
		if protocol == "" {
			protocol = v1.ProtocolTCP
		}
		switch protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		default:
			return nil, reject(ReasonUnsupportedProtocol, "ports[%d].protocol %q is not TCP, UDP or SCTP", i, p.Protocol)
		}
		if p.Port < 1 || p.Port > 65535 {
			return nil, reject(ReasonInvalidPort, "ports[%d].port %d is not in 1..65535", i, p.Port)
		}
		if p.Name != "" {
			if msg := invalidPortName(p.Name); msg != "" {
				return nil, reject(ReasonInvalidPort, "ports[%d].name %q: %s", i, p.Name, msg)
			}
		} else if len(in) > 1 {
			// Endpoints are matched to Service ports by name, so names
			// must tell the ports apart, as for a Service.
			return nil, reject(ReasonInvalidPort, "ports[%d] has no name; every port of a multi-port import needs one", i)
		}
		if len(in) > 1 {
			if names[p.Name] {
				return nil, reject(ReasonDuplicatePort, "ports[%d].name %q is used twice", i, p.Name)
			}
			k := portKey{p.Port, protocol}
			if seen[k] {
				return nil, reject(ReasonDuplicatePort, "ports[%d] %d/%s is listed twice", i, p.Port, protocol)
			}
			names[p.Name], seen[k] = true, true
		}
		out = append(out, v1.ServicePort{
			Name:        p.Name,
			Protocol:    protocol,
			AppProtocol: p.AppProtocol,
			Port:        p.Port,
		})
	}
	return out, nil
}

func familyOf(ip netip.Addr) v1.IPFamily {
	if ip.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// ReservedIPs returns the externalIPs and load-balancer ingress IPs of a
// local Service that lie in the clusterset ranges. Those ranges belong to
// imports: a proxy must not program such an IP for the Service, or any
// user allowed to set spec.externalIPs could take a clusterset IP, and its
// traffic, from the import that owns it. (A ClusterIP in those ranges is
// another matter: the apiserver allocated it, and the Service keeps it.)
func ReservedIPs(svc *v1.Service, opts *Options) []string {
	var out []string
	for _, s := range svc.Spec.ExternalIPs {
		if reserved(s, opts) {
			out = append(out, s)
		}
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if reserved(ing.IP, opts) {
			out = append(out, ing.IP)
		}
	}
	return out
}

// WithoutReservedIPs returns svc without its ReservedIPs: svc itself when
// it has none, otherwise a copy.
func WithoutReservedIPs(svc *v1.Service, opts *Options) *v1.Service {
	if len(ReservedIPs(svc, opts)) == 0 {
		return svc
	}
	out := svc.DeepCopy()
	out.Spec.ExternalIPs = nil
	for _, s := range svc.Spec.ExternalIPs {
		if !reserved(s, opts) {
			out.Spec.ExternalIPs = append(out.Spec.ExternalIPs, s)
		}
	}
	out.Status.LoadBalancer.Ingress = nil
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if !reserved(ing.IP, opts) {
			out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, ing)
		}
	}
	return out
}

func reserved(s string, opts *Options) bool {
	ip, err := netip.ParseAddr(s)
	return err == nil && opts.admits(ip.Unmap())
}

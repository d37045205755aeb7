package export

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/endpointslice/trafficdist"
	"k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// sliceHashLength is how many hex digits of a hash end an imported slice's
// name: enough that two source slices practically never collide.
const sliceHashLength = 10

// SliceName is the name of the EndpointSlice that mirrors a source
// cluster's slice sourceSlice of Service service. It is deterministic, so
// that every member and every controller restart agree on it, and always a
// valid object name: the readable prefix is cut so that the whole fits,
// while the hash of the untruncated parts keeps it unique.
func SliceName(service, cluster, sourceSlice string) string {
	sum := sha256.Sum256([]byte(service + "/" + cluster + "/" + sourceSlice))
	hash := hex.EncodeToString(sum[:])[:sliceHashLength]
	prefix := service + "-" + cluster + "-"
	if max := validation.DNS1123SubdomainMaxLength - sliceHashLength; len(prefix) > max {
		prefix = prefix[:max]
	}
	return prefix + hash
}

// special reports cloud metadata and other special-purpose addresses: a
// member that publishes one must not send every other member's clusterset
// traffic to their own metadata service.
func special(ip netip.Addr) bool {
	_, ok := proxy.SpecialPurpose(ip)
	return ok
}

// ImportedSlice returns the EndpointSlice members get for src, a slice of
// the exported Service in source cluster cluster, or nil when src cannot
// be imported (its address type is not IP). served holds the names of the
// import's ports this cluster serves (Result.ServedPorts); other ports are
// left out so that no traffic for them reaches this cluster's endpoints.
//
// The result carries the labels KEP-1645 asks for and never
// kubernetes.io/service-name, which would make it a slice of a local
// Service. Target references are dropped: they name Pods of another
// cluster. Node names stay, for the proxies of the source cluster itself
// (internalTrafficPolicy Local, PreferSameNode); proxies elsewhere drop
// them (proxy.EndpointSliceForImport). The source's topology hints are
// replaced by the ones the import's trafficDistribution asks for, computed
// as the EndpointSlice controller computes them for a Service
// (k8s.io/endpointslice/trafficdist): the source's own may weigh that
// cluster's nodes only. Endpoints without a valid unicast address are
// dropped too, as are special-purpose addresses (cloud metadata,
// loopback), because a proxy rejects a whole slice that has one. The
// caller sets the owner reference to the member's ServiceImport.
func ImportedSlice(src *discoveryv1.EndpointSlice, service, cluster, managedBy string, served map[string]bool, trafficDistribution *string) *discoveryv1.EndpointSlice {
	var valid func(netip.Addr) bool
	switch src.AddressType {
	case discoveryv1.AddressTypeIPv4:
		valid = netip.Addr.Is4
	case discoveryv1.AddressTypeIPv6:
		valid = func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }
	default:
		return nil
	}
	out := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      SliceName(service, cluster, src.Name),
			Namespace: src.Namespace,
			Labels:    ImportedSliceLabels(service, cluster, managedBy),
		},
		AddressType: src.AddressType,
	}
	for _, p := range src.Ports {
		name := ptr.Deref(p.Name, "")
		if !served[name] || p.Port == nil {
			continue
		}
		q := discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(*p.Port), Protocol: ptr.To(ptr.Deref(p.Protocol, v1.ProtocolTCP))}
		if p.AppProtocol != nil {
			q.AppProtocol = ptr.To(*p.AppProtocol)
		}
		out.Ports = append(out.Ports, q)
	}
	// Sized once: the controller holds every source slice's result for as
	// long as the name is exported, and appends would leave it room for
	// up to twice as many endpoints.
	if len(src.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, 0, len(src.Endpoints))
	}
	for _, ep := range src.Endpoints {
		addrs := importedAddresses(ep.Addresses, valid)
		if len(addrs) == 0 {
			continue
		}
		// What is kept is shared with src: informer objects are never
		// modified, and neither is the result (callers copy it to change
		// it, as ForMember's callers do).
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{
			Addresses: addrs, Conditions: ep.Conditions,
			Hostname: ep.Hostname, NodeName: ep.NodeName, Zone: ep.Zone,
		})
	}
	trafficdist.ReconcileHints(trafficDistribution, []*discoveryv1.EndpointSlice{out}, nil, nil)
	return out
}

// ImportedSliceLabels are the labels of every EndpointSlice the
// mcs-controller writes for import service from source cluster: the
// import, the cluster and the writer, and in kubernetes.io/service-name
// the import's synthetic Service (proxy.ServiceName), the name a proxy
// programs the import as and keys its slices by, so that a proxy can hand
// the slice on as it is, with no copy (proxy.SharesImportService). No real
// Service has such a name.
func ImportedSliceLabels(service, cluster, managedBy string) map[string]string {
	return map[string]string{
		mcsv1beta1.LabelServiceName:   service,
		mcsv1beta1.LabelSourceCluster: cluster,
		discoveryv1.LabelManagedBy:    managedBy,
		discoveryv1.LabelServiceName:  proxy.ServiceName(service),
	}
}

// importedAddresses returns the addresses of addrs an imported slice
// keeps, in canonical form: addrs itself when it is kept whole.
func importedAddresses(addrs []string, valid func(netip.Addr) bool) []string {
	importable := func(s string) (netip.Addr, bool) {
		ip, err := netip.ParseAddr(s)
		return ip, err == nil && ip.Zone() == "" && valid(ip) && ip.IsGlobalUnicast() && !special(ip)
	}
	var buf [64]byte
	whole := true
	for _, s := range addrs {
		if ip, ok := importable(s); !ok || string(ip.AppendTo(buf[:0])) != s {
			whole = false
			break
		}
	}
	if whole {
		return addrs
	}
	var out []string
	for _, s := range addrs {
		if ip, ok := importable(s); ok {
			out = append(out, ip.String())
		}
	}
	return out
}

// ForMember removes from an imported slice, in place, what only its
// source cluster's own member can use: node names and node hints. Another
// member has no such nodes (or, worse, nodes of its own with the same
// names), and its proxies would drop them; written only where they mean
// something, the slice reaches every other member's proxies as they
// program it, and each proxy can share it as it is instead of copying it.
func ForMember(slice *discoveryv1.EndpointSlice, member string) {
	if slice.Labels[mcsv1beta1.LabelSourceCluster] == member {
		return
	}
	for i := range slice.Endpoints {
		ep := &slice.Endpoints[i]
		ep.NodeName = nil
		if ep.Hints != nil {
			ep.Hints.ForNodes = nil
			if len(ep.Hints.ForZones) == 0 {
				ep.Hints = nil
			}
		}
	}
}

// KeepWithin removes, in place, the addresses of an imported slice that
// lie outside ranges, and the endpoints left without one, and returns the
// addresses removed. ranges are where the source cluster's pods can be
// (its nodes' pod CIDRs or the ranges configured for it, and the nodes'
// own addresses, for host-network pods); nil means they are not known,
// and nothing is removed: the caller then keeps only what Vouched keeps.
// A member that publishes another network's addresses under an exported
// name would otherwise send every other member's clients there.
func KeepWithin(slice *discoveryv1.EndpointSlice, ranges []netip.Prefix) []string {
	if len(ranges) == 0 {
		return nil
	}
	var dropped []string
	kept := slice.Endpoints[:0]
	for _, ep := range slice.Endpoints {
		var addrs []string
		for _, s := range ep.Addresses {
			if ip, err := netip.ParseAddr(s); err == nil && slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(ip) }) {
				addrs = append(addrs, s)
			} else {
				dropped = append(dropped, s)
			}
		}
		if len(addrs) > 0 {
			ep.Addresses = addrs
			kept = append(kept, ep)
		}
	}
	slice.Endpoints = kept
	return dropped
}

// The endpointslice.kubernetes.io/managed-by values of Kubernetes' own
// EndpointSlice writers: the EndpointSlice controller, which writes the
// slices of a Service with a selector from its Pods, and the mirroring
// controller, which copies the Endpoints of a Service without one.
const (
	ManagerEndpointSliceController = "endpointslice-controller.k8s.io"
	ManagerMirroringController     = "endpointslicemirroring-controller.k8s.io"
)

// SourceRefusal says why a member's own EndpointSlice of an exported
// Service is not mirrored to the other members. It is at once the reason
// of the event on the export and what tests expect; "" means the slice
// may be mirrored.
type SourceRefusal string

const (
	// SourceUntrustedManager: its managed-by is not one of the trusted
	// source managers.
	SourceUntrustedManager SourceRefusal = "EndpointSliceNotMirrored"
	// SourceNotOwned: its managed-by names a trusted manager, but it is
	// not owned as that manager's slices are. The label is a claim any
	// slice writer can make; the owner is what the manager really sets.
	SourceNotOwned SourceRefusal = "EndpointSliceNotOwned"
	// SourceWrongController: it claims the controller that Kubernetes
	// does not run for this Service: the EndpointSlice controller for a
	// Service without a selector (nothing would ever remove such a
	// slice), or the mirroring controller for one with a selector.
	SourceWrongController SourceRefusal = "EndpointSliceWrongController"
)

// CheckSource says whether src, a slice labelled with Service svc's name
// in the source cluster, may be mirrored, and if not why, in a sentence
// for the export's event. A slice is mirrored only when its managed-by is
// one of managers and it is owned as that manager's slices are:
//
//   - the EndpointSlice controller's by svc (a controller reference of
//     the same UID; the controller writes none for a Service without a
//     selector);
//   - the mirroring controller's by the Endpoints of svc's name (the
//     mirroring controller deletes its slices of a Service with a
//     selector). The Endpoints' UID is not checked: the controller keeps
//     no Endpoints, and a reference of another UID is collected by the
//     garbage collector;
//   - any other trusted manager's by svc, as the EndpointSlice
//     controller's, whatever the Service's selector.
func CheckSource(src *discoveryv1.EndpointSlice, svc *v1.Service, managers []string) (SourceRefusal, string) {
	manager := src.Labels[discoveryv1.LabelManagedBy]
	if !slices.Contains(managers, manager) {
		return SourceUntrustedManager, fmt.Sprintf("its endpointslice.kubernetes.io/managed-by %q is not one of %v", manager, managers)
	}
	switch manager {
	case ManagerEndpointSliceController:
		if svc.Spec.Selector == nil {
			return SourceWrongController, fmt.Sprintf("it says the EndpointSlice controller wrote it, but Service %s has no selector and that controller writes no slices for it", svc.Name)
		}
	case ManagerMirroringController:
		if svc.Spec.Selector != nil {
			return SourceWrongController, fmt.Sprintf("it says it was mirrored from Endpoints, but Service %s has a selector and the mirroring controller deletes mirrored slices of it", svc.Name)
		}
		if controllerRef(src, "Endpoints", svc.Name) == nil {
			return SourceNotOwned, fmt.Sprintf("it says it was mirrored from Endpoints, but its controller is not Endpoints %s", svc.Name)
		}
		return "", ""
	}
	if ref := controllerRef(src, "Service", svc.Name); ref == nil || ref.UID != svc.UID {
		return SourceNotOwned, fmt.Sprintf("it says %s wrote it, but its controller is not Service %s (UID %s)", manager, svc.Name, svc.UID)
	}
	return "", ""
}

// controllerRef returns s's controller reference when it names the
// core/v1 object kind/name, else nil.
func controllerRef(s *discoveryv1.EndpointSlice, kind, name string) *metav1.OwnerReference {
	if ref := metav1.GetControllerOfNoCopy(s); ref != nil && ref.APIVersion == "v1" && ref.Kind == kind && ref.Name == name {
		return ref
	}
	return nil
}

// Vouched returns what of src, a slice of Service svc that CheckSource
// accepts, may be mirrored while its source cluster's endpoint ranges are
// unknown, and the addresses left out (src itself when nothing is). With
// no range to check an address against, only the writer can vouch for it:
//
//   - for a Service with a selector, the EndpointSlice controller (or
//     another trusted manager) writes the addresses of Pods, and names
//     the Pod as the endpoint's target; an endpoint that names no Pod of
//     src's namespace is left out. (A target with no namespace is one of
//     src's own, as for any namespaced reference.)
//   - for a Service without one, the mirroring controller (or whoever
//     writes its slices) copies whatever someone wrote into an Endpoints
//     object, any address at all: nothing is kept.
//
// The Pods are not looked up (the controller keeps none of them, the
// largest and busiest objects of a cluster): a writer who forges the
// EndpointSlice controller's label, owner and targets is stopped by the
// admission policy that reserves its label, and undone by the
// EndpointSlice controller itself, which rewrites the slices it owns.
func Vouched(src *discoveryv1.EndpointSlice, svc *v1.Service) (*discoveryv1.EndpointSlice, []string) {
	vouched := func(ep discoveryv1.Endpoint) bool {
		ref := ep.TargetRef
		return svc.Spec.Selector != nil && ref != nil && ref.Kind == "Pod" && (ref.Namespace == "" || ref.Namespace == src.Namespace)
	}
	if !slices.ContainsFunc(src.Endpoints, func(ep discoveryv1.Endpoint) bool { return !vouched(ep) }) {
		return src, nil
	}
	out := *src
	out.Endpoints = nil
	var dropped []string
	for _, ep := range src.Endpoints {
		if vouched(ep) {
			out.Endpoints = append(out.Endpoints, ep)
		} else {
			dropped = append(dropped, ep.Addresses...)
		}
	}
	return &out, dropped
}

package proxy

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// SliceKind is what a proxy makes of an EndpointSlice, by its two
// service-name labels.
type SliceKind int

const (
	// LocalSlice belongs to a local Service (or to none): the Service path
	// handles it.
	LocalSlice SliceKind = iota
	// MultiClusterSlice belongs to the ServiceImport its
	// multicluster.kubernetes.io/service-name label names, and to no local
	// Service. It may also carry kubernetes.io/service-name with its
	// import's synthetic Service name (SharesImportService): it still
	// names no local Service.
	MultiClusterSlice
	// ImportClaimingSlice names, in kubernetes.io/service-name, the
	// synthetic Service of an import that it is not an MCS EndpointSlice
	// of. No real Service has such a name, and only a checked MCS
	// EndpointSlice may reach an import's rules, so a proxy must drop such
	// a slice: anyone who can write an EndpointSlice in the namespace could
	// otherwise steer the import's clusterset IP.
	ImportClaimingSlice
	// LocalServiceClaimingSlice carries an import's MCS labels and names,
	// in kubernetes.io/service-name, a local Service other than the
	// import's synthetic or derived Service (DerivedServiceName): the
	// Service of the import's own name, as the mcs-controller writes for
	// native names in a derived member whose stock proxies read no
	// imports, or any other. A proxy that programs imports does native
	// names itself, with the owner's consent (AcceptsNativeNames), and
	// must drop such a slice: routed as the Service's own it would add
	// endpoints to a Service nobody asked, with nothing but the writer's
	// word.
	LocalServiceClaimingSlice
)

// KindOf classifies a slice, reading each of its two service-name labels
// once: a proxy asks it of every EndpointSlice it is handed.
func KindOf(slice *discoveryv1.EndpointSlice) SliceKind {
	name, mcs := slice.Labels[mcsv1beta1.LabelServiceName]
	service, local := slice.Labels[discoveryv1.LabelServiceName]
	_, synthetic := ImportName(service)
	shares := mcs && IsServiceOfImport(service, name)
	switch {
	case synthetic && !shares:
		return ImportClaimingSlice
	case mcs && (!local || shares):
		return MultiClusterSlice
	case mcs && service != DerivedServiceName(slice.Namespace, name):
		return LocalServiceClaimingSlice
	default:
		return LocalSlice
	}
}

// IsMultiClusterEndpointSlice tells whether a slice belongs to a
// ServiceImport rather than to a local Service (MultiClusterSlice).
func IsMultiClusterEndpointSlice(slice *discoveryv1.EndpointSlice) bool {
	return KindOf(slice) == MultiClusterSlice
}

// ClaimsImportService tells whether a slice names an import's synthetic
// Service without being that import's MCS EndpointSlice
// (ImportClaimingSlice): a proxy must drop it.
func ClaimsImportService(slice *discoveryv1.EndpointSlice) bool {
	return KindOf(slice) == ImportClaimingSlice
}

// SharesImportService tells whether an MCS EndpointSlice already names its
// import's synthetic Service in kubernetes.io/service-name, the label a
// proxy keys slices by: a proxy can then be handed the slice itself, as
// long as it needs nothing else changed.
func SharesImportService(slice *discoveryv1.EndpointSlice) bool {
	name, mcs := slice.Labels[mcsv1beta1.LabelServiceName]
	return mcs && IsServiceOfImport(slice.Labels[discoveryv1.LabelServiceName], name)
}

// ImportNameOf returns the name of the ServiceImport an MCS EndpointSlice
// belongs to.
func ImportNameOf(slice *discoveryv1.EndpointSlice) string {
	return slice.Labels[mcsv1beta1.LabelServiceName]
}

// namesANode tells whether an endpoint names a node: by nodeName, by a
// node hint, or by hints that are left empty without them.
func namesANode(ep discoveryv1.Endpoint) bool {
	return ep.NodeName != nil || ep.Hints != nil && (len(ep.Hints.ForNodes) > 0 || len(ep.Hints.ForZones) == 0)
}

// EndpointSliceForImport returns the EndpointSlice a proxy programs for an
// MCS EndpointSlice: a copy that belongs to the import's synthetic Service
// and shares with slice what it does not change, or slice itself when it
// already names that Service and holds nothing a proxy would remove.
// A slice that is not trusted, or that holds anything a proxy could not turn
// into a valid rule, is rejected whole with a *RejectionError.
func EndpointSliceForImport(slice *discoveryv1.EndpointSlice, opts *Options) (*discoveryv1.EndpointSlice, error) {
	name := ImportNameOf(slice)
	if msg := invalidServiceName(name); msg != "" {
		return nil, reject(ReasonInvalidName, "label %s=%q is not a valid Service name: %s", mcsv1beta1.LabelServiceName, name, msg)
	}
	if manager := slice.Labels[discoveryv1.LabelManagedBy]; !opts.trusts(manager) {
		return nil, reject(ReasonUntrustedManager, "label %s=%q is not one of the trusted managers %v", discoveryv1.LabelManagedBy, manager, opts.TrustedManagers)
	}
	var v4 bool
	switch slice.AddressType {
	case discoveryv1.AddressTypeIPv4:
		v4 = true
	case discoveryv1.AddressTypeIPv6:
	default:
		return nil, reject(ReasonUnsupportedAddressType, "addressType %q cannot be proxied", slice.AddressType)
	}
	for i, p := range slice.Ports {
		if p.Protocol != nil {
			switch *p.Protocol {
			case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
			default:
				return nil, reject(ReasonUnsupportedProtocol, "ports[%d].protocol %q is not TCP, UDP or SCTP", i, *p.Protocol)
			}
		}
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			return nil, reject(ReasonInvalidPort, "ports[%d].port is missing or not in 1..65535", i)
		}
	}
	// By index, here and below: an Endpoint is large, and a proxy checks
	// every endpoint it is handed.
	for i := range slice.Endpoints {
		ep := &slice.Endpoints[i]
		if len(ep.Addresses) == 0 {
			return nil, reject(ReasonInvalidEndpoint, "endpoints[%d] has no address", i)
		}
		for _, s := range ep.Addresses {
			ip, err := netip.ParseAddr(s)
			// The family the slice says: IPv4, or IPv6 not mapping IPv4.
			family := ip.Is4() == v4 && !ip.Is4In6()
			if err != nil || ip.Zone() != "" || !family || !ip.IsGlobalUnicast() {
				return nil, reject(ReasonInvalidEndpoint, "endpoints[%d] address %q is not a unicast %s address", i, s, slice.AddressType)
			}
			if name, special := SpecialPurpose(ip); special {
				return nil, reject(ReasonInvalidEndpoint, "endpoints[%d] address %q is a %s address, never an endpoint", i, s, name)
			}
		}
	}

	remote := slice.Labels[mcsv1beta1.LabelSourceCluster] != opts.LocalClusterID || opts.LocalClusterID == ""
	stripNodes := remote && slices.ContainsFunc(slice.Endpoints, namesANode)
	// name is the import's, checked above: whether the slice names its
	// synthetic Service is SharesImportService without reading it again.
	if !stripNodes && IsServiceOfImport(slice.Labels[discoveryv1.LabelServiceName], name) {
		// Labelled as a proxy keys it, with nothing to remove: the
		// slice itself, shared with the informer that holds it anyway.
		return slice, nil
	}
	// A proxy holds the result as long as the slice exists: it shares with
	// slice what it does not change (addresses, conditions, ports), which
	// is safe because informer objects are never modified, and neither is
	// the result.
	out := *slice
	out.ManagedFields = nil
	out.Annotations = nil
	// A proxy reads one label, the Service a slice belongs to. Only it is
	// kept, so that every slice of an import can share one map
	// (Options.Labels).
	out.Labels = opts.labels(slice.Namespace, name)
	if stripNodes {
		// Node names of another cluster mean nothing here: kept, they would
		// make endpoints look node-local (internalTrafficPolicy Local,
		// PreferSameNode). Zone hints stay: zones are named alike across a
		// clusterset, and the controller writes them from the import's
		// trafficDistribution, so a proxy prefers the endpoints of its zone
		// in every cluster.
		out.Endpoints = make([]discoveryv1.Endpoint, len(slice.Endpoints))
		for i, ep := range slice.Endpoints {
			ep.NodeName = nil
			if ep.Hints != nil && len(ep.Hints.ForNodes) > 0 {
				ep.Hints = &discoveryv1.EndpointHints{ForZones: ep.Hints.ForZones}
			}
			if ep.Hints != nil && len(ep.Hints.ForZones) == 0 {
				ep.Hints = nil
			}
			out.Endpoints[i] = ep
		}
	}
	return &out, nil
}

package multicluster

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// This file routes what kube-proxy's own informers deliver: local
// Services (admitted, their IPs claimed), and EndpointSlices, each of
// which is a local Service's (forwarded, or joined by native names), an
// MCS slice (recorded for its import), or a slice that names an import's
// synthetic Service (dropped).

// OnServiceAdd is called by kube-proxy's Service informer.
func (p *Proxier) OnServiceAdd(service *v1.Service) {
	p.mu.Lock()
	defer p.mu.Unlock()
	service = p.admitService(service)
	p.im.setServiceClaims(service, localServiceIPs(service))
	p.Provider.OnServiceAdd(service)
	p.im.setNativeNamesAccepted(service, mcsproxy.AcceptsNativeNames(service, p.im.opts.TrustedManagers))
}

// OnServiceUpdate is called by kube-proxy's Service informer.
func (p *Proxier) OnServiceUpdate(oldService, service *v1.Service) {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldService, service = mcsproxy.WithoutReservedIPs(oldService, p.im.opts), p.admitService(service)
	// Claim old and new IPs while the proxier switches, so an import never
	// shares an IP with the Service in one ruleset in either direction.
	key := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	newIPs := localServiceIPs(service)
	p.im.setServiceClaims(service, slices.Concat(p.im.claims.ipsOfService(key), newIPs))
	p.Provider.OnServiceUpdate(oldService, service)
	p.im.setServiceClaims(service, newIPs)
	p.im.setNativeNamesAccepted(service, mcsproxy.AcceptsNativeNames(service, p.im.opts.TrustedManagers))
}

// OnServiceDelete is called by kube-proxy's Service informer.
func (p *Proxier) OnServiceDelete(service *v1.Service) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The local Service's rules go first, so that an import waiting for
	// its IP never shares it with the Service in one ruleset.
	p.Provider.OnServiceDelete(mcsproxy.WithoutReservedIPs(service, p.im.opts))
	p.im.setServiceClaims(service, nil)
	p.im.setNativeNamesAccepted(service, false)
	delete(p.reservedReported, types.NamespacedName{Namespace: service.Namespace, Name: service.Name})
}

// admitService returns service as the proxier may program it: without the
// externalIPs and load-balancer IPs inside the clusterset ranges, which
// are reserved for imports. Any user who may set spec.externalIPs (all of
// them, unless DenyServiceExternalIPs is on) could otherwise take a
// clusterset IP from its import on every node. Each change of what is
// left out is reported once.
func (p *Proxier) admitService(service *v1.Service) *v1.Service {
	admitted := mcsproxy.WithoutReservedIPs(service, p.im.opts)
	key := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	reserved := strings.Join(mcsproxy.ReservedIPs(service, p.im.opts), ", ")
	if reserved == p.reservedReported[key] {
		return admitted
	}
	if reserved == "" {
		delete(p.reservedReported, key)
		return admitted
	}
	p.reservedReported[key] = reserved
	p.events.report(rejection{kind: kindService, obj: service, RejectionError: &mcsproxy.RejectionError{
		Reason:  mcsproxy.ReasonReservedIP,
		Message: fmt.Sprintf("external or load-balancer IPs %s lie in the clusterset IP ranges, which are reserved for ServiceImports; they are not programmed", reserved),
	}})
	return admitted
}

// OnServiceSynced is called by kube-proxy's Service informer.
func (p *Proxier) OnServiceSynced() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.servicesSynced = true
	p.forwardSynced()
}

// sliceRoute says where kube-proxy's EndpointSlice informer's slices go.
type sliceRoute int

const (
	// routeNone: no slice (the old side of an add, the new of a delete).
	routeNone sliceRoute = iota
	// routeLocal: a local Service's slice, for the wrapped Provider as is.
	routeLocal
	// routeMultiCluster: an MCS EndpointSlice, checked and translated
	// here before its import's rules get it.
	routeMultiCluster
	// routeDropped: a slice that names an import's synthetic Service
	// without being that import's MCS EndpointSlice (it would reach the
	// import's rules without any check), or an MCS slice that names a
	// local Service (it would add endpoints to the Service without its
	// owner's consent: native names are decided here, native.go).
	routeDropped
)

// routeOf reads a slice's route from its labels (mcsproxy.KindOf, which
// reads each once: every slice of the cluster passes here).
func routeOf(slice *discoveryv1.EndpointSlice) sliceRoute {
	if slice == nil {
		return routeNone
	}
	switch mcsproxy.KindOf(slice) {
	case mcsproxy.ImportClaimingSlice, mcsproxy.LocalServiceClaimingSlice:
		return routeDropped
	case mcsproxy.MultiClusterSlice:
		return routeMultiCluster
	default:
		return routeLocal
	}
}

// OnEndpointSliceAdd is called by kube-proxy's EndpointSlice informer,
// which delivers the MCS EndpointSlices too: they are held here until their
// import is programmed, so that kube-proxy caches each slice once.
func (p *Proxier) OnEndpointSliceAdd(slice *discoveryv1.EndpointSlice) {
	p.routeSlice(nil, slice)
}

// OnEndpointSliceUpdate is called by kube-proxy's EndpointSlice informer.
func (p *Proxier) OnEndpointSliceUpdate(oldSlice, slice *discoveryv1.EndpointSlice) {
	p.routeSlice(oldSlice, slice)
}

// OnEndpointSliceDelete is called by kube-proxy's EndpointSlice informer.
func (p *Proxier) OnEndpointSliceDelete(slice *discoveryv1.EndpointSlice) {
	p.routeSlice(slice, nil)
}

// routeSlice delivers a change from old to slice (either nil for an add or
// a delete) to where each belongs; a slice relabelled from one route to
// another leaves the old one first. Native names follow every change of a
// local Service's slices.
func (p *Proxier) routeSlice(old, slice *discoveryv1.EndpointSlice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	from, to := routeOf(old), routeOf(slice)
	if from == routeMultiCluster && to == routeMultiCluster && importKeyOf(old) != importKeyOf(slice) {
		// Moved to another import: it leaves the old one first.
		p.im.deleteMultiClusterSlice(old)
	}
	if from != to {
		switch from {
		case routeMultiCluster:
			p.im.deleteMultiClusterSlice(old)
		case routeDropped:
			p.forgetDroppedSlice(old)
		}
	}
	switch to {
	case routeMultiCluster:
		p.im.upsertMultiClusterSlice(slice)
	case routeDropped:
		p.dropSlice(slice)
	}
	if from == routeLocal || to == routeLocal {
		var localOld, localNew *discoveryv1.EndpointSlice
		if from == routeLocal {
			localOld = old
		}
		if to == routeLocal {
			localNew = slice
		}
		// The local Service's own change goes to the Provider in the
		// middle of its native name's, as the slice itself or carrying
		// remote endpoints (localSliceChanged).
		p.im.localSliceChanged(localOld, localNew)
	}
}

// dropSlice reports, once per slice, a slice dropped (routeDropped): a
// plain EndpointSlice that names an import's synthetic Service, or an MCS
// slice that names a local Service.
func (p *Proxier) dropSlice(slice *discoveryv1.EndpointSlice) {
	key := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
	if p.droppedSlices.Has(key) {
		return
	}
	p.droppedSlices.Insert(key)
	why := &mcsproxy.RejectionError{
		Reason: mcsproxy.ReasonReservedServiceName,
		Message: fmt.Sprintf("label %s=%q names the synthetic Service of a ServiceImport; only MCS EndpointSlices (label %s) reach an import",
			discoveryv1.LabelServiceName, slice.Labels[discoveryv1.LabelServiceName], mcsv1beta1.LabelServiceName),
	}
	if mcsproxy.KindOf(slice) == mcsproxy.LocalServiceClaimingSlice {
		why = &mcsproxy.RejectionError{
			Reason: mcsproxy.ReasonLocalServiceName,
			Message: fmt.Sprintf("an MCS EndpointSlice (label %s=%q) names local Service %q in %s; its endpoints reach no local Service this way (native names are decided by kube-proxy, with the Service owner's %s)",
				mcsv1beta1.LabelServiceName, slice.Labels[mcsv1beta1.LabelServiceName], slice.Labels[discoveryv1.LabelServiceName], discoveryv1.LabelServiceName, mcsproxy.AnnotationAcceptNativeNames),
		}
	}
	p.events.report(rejection{kind: kindEndpointSlice, obj: slice, RejectionError: why})
}

func (p *Proxier) forgetDroppedSlice(slice *discoveryv1.EndpointSlice) {
	p.droppedSlices.Delete(types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name})
}

// OnEndpointSlicesSynced is called by kube-proxy's EndpointSlice informer.
func (p *Proxier) OnEndpointSlicesSynced() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endpointSlicesSynced = true
	p.forwardSynced()
}

// MultiClusterSynced tells the Proxier that the ServiceImports that
// existed at start-up have all been delivered, or that there are none to
// wait for. (MCS EndpointSlices come with kube-proxy's own EndpointSlice
// informer, whose sync OnEndpointSlicesSynced reports.)
func (p *Proxier) MultiClusterSynced() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.im.mcsSynced {
		return
	}
	p.im.mcsSynced = true
	p.im.reconcileAllSlices()
	p.forwardSynced()
}

func (p *Proxier) forwardSynced() {
	if !p.im.mcsSynced {
		return
	}
	if p.servicesSynced && p.endpointSlicesSynced && !p.im.listed {
		p.im.listingDone()
	}
	if p.servicesSynced && !p.forwardedServicesSynced {
		p.forwardedServicesSynced = true
		p.Provider.OnServiceSynced()
	}
	if p.endpointSlicesSynced && !p.forwardedSlicesSynced {
		p.forwardedSlicesSynced = true
		p.Provider.OnEndpointSlicesSynced()
	}
	if p.forwardedServicesSynced && p.forwardedSlicesSynced && p.synced != nil {
		close(p.synced)
		p.synced = nil
	}
}

func ownedByServiceImport(slice *discoveryv1.EndpointSlice) bool {
	for _, ref := range slice.OwnerReferences {
		if ref.Kind == mcsv1beta1.ServiceImportKindName {
			return true
		}
	}
	return false
}

// localServiceIPs returns every IP on which the proxier programs rules for
// a local Service: an import on any of them would share its rules.
func localServiceIPs(service *v1.Service) []netip.Addr {
	var raw []string
	raw = append(raw, service.Spec.ClusterIPs...)
	if len(service.Spec.ClusterIPs) == 0 {
		raw = append(raw, service.Spec.ClusterIP)
	}
	raw = append(raw, service.Spec.ExternalIPs...)
	for _, ing := range service.Status.LoadBalancer.Ingress {
		raw = append(raw, ing.IP)
	}
	var out []netip.Addr
	for _, s := range raw {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

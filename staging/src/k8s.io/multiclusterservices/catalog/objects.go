package catalog

import (
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	"k8s.io/multiclusterservices/export"
	"k8s.io/multiclusterservices/proxy"
)

// AnnotationGlobalService, on a ServiceImport (multicluster.x-k8s.io)
// written for the catalog, names the global service it imports
// (namespace/name in the hub).
const AnnotationGlobalService = "catalog.multiclusterservices.k8s.io/global-service"

// Exports returns the valid bindings of s as the exports export.Merge
// merges, so that the catalog's imports take ports, type and session
// affinity by the rules of KEP-1645: one per binding, with the binding's
// name in place of a cluster (two bindings of one cluster are two
// sources) and its creation time as the export's, and the bound Service
// (services looks it up in the binding's cluster) or, for addresses, a
// Service with the binding's ports. Bindings whose Service does not exist
// or cannot be exported are returned in unbound, with why.
func Exports(s *Service, services func(cluster string, name catalogv1alpha1.LocalName) *v1.Service) (exports []export.Export, unbound map[string]string) {
	unbound = map[string]string{}
	for _, b := range s.Bindings {
		svc := bindingService(b)
		if b.Spec.Service != nil {
			svc = services(b.Spec.Cluster, *b.Spec.Service)
			if svc == nil {
				unbound[b.Name] = "Service " + b.Spec.Service.Namespace + "/" + b.Spec.Service.Name + " does not exist in cluster " + b.Spec.Cluster
				continue
			}
			if v := export.Validate(svc); !v.Valid {
				unbound[b.Name] = v.Message
				continue
			}
		}
		exports = append(exports, export.Export{
			Cluster:       b.Name,
			ServiceExport: &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, CreationTimestamp: b.CreationTimestamp}},
			Service:       svc,
		})
	}
	return exports, unbound
}

// bindingService is the Service an address binding stands for: its ports,
// ClusterIP, or headless when the endpoints name themselves (hostnames).
func bindingService(b *catalogv1alpha1.ServiceBinding) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Spec.GlobalService},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP},
	}
	for _, ep := range b.Spec.Endpoints {
		if ep.Hostname != "" {
			svc.Spec.ClusterIP = v1.ClusterIPNone
		}
	}
	for _, p := range b.Spec.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{
			Name: p.Name, Port: p.Port, Protocol: protocolOf(p), AppProtocol: p.AppProtocol,
			TargetPort: intstr.FromInt32(TargetPort(p)),
		})
	}
	return svc
}

func protocolOf(p catalogv1alpha1.BoundPort) v1.Protocol {
	if p.Protocol == "" {
		return v1.ProtocolTCP
	}
	return p.Protocol
}

// TargetPort is the port bound endpoints serve p on: TargetPort, default
// Port.
func TargetPort(p catalogv1alpha1.BoundPort) int32 {
	if p.TargetPort == 0 {
		return p.Port
	}
	return p.TargetPort
}

// Import is the ServiceImport (multicluster.x-k8s.io) that placement p of
// global service s gets in its cluster: the merged spec r with the global
// service's clusterset IPs, named as the placement says, labelled as
// managedBy's and annotated with the global service.
func Import(p Placement, s *Service, r export.Result, ips []string, managedBy string) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   p.LocalName.Namespace,
			Name:        p.LocalName.Name,
			Labels:      map[string]string{proxy.LabelImportManagedBy: managedBy},
			Annotations: map[string]string{AnnotationGlobalService: s.Key},
		},
		Spec: *r.Spec.DeepCopy(),
	}
	if si.Spec.Type == mcsv1beta1.ClusterSetIP {
		si.Spec.IPs = append([]string(nil), ips...)
	}
	return si
}

// ServiceSlice is the EndpointSlice that placement p gets for src, a
// slice of the Service bound by binding b in b's cluster: the slice an
// export's consumer gets (export.ImportedSlice), in the placement's
// namespace and under its name, named after the binding so that two
// bindings of one cluster never share a name. served are the import's
// ports the binding serves (Result.ServedPorts of the binding).
func ServiceSlice(src *discoveryv1.EndpointSlice, b *catalogv1alpha1.ServiceBinding, p Placement, managedBy string, served map[string]bool, trafficDistribution *string) *discoveryv1.EndpointSlice {
	out := export.ImportedSlice(src, p.LocalName.Name, b.Spec.Cluster, managedBy, served, trafficDistribution)
	if out == nil {
		return nil
	}
	out.Namespace = p.LocalName.Namespace
	out.Name = export.SliceName(p.LocalName.Name, b.Spec.Cluster, b.Name+"-"+src.Name)
	return out
}

// BindingSlices are the EndpointSlices that placement p gets for an
// address binding b: one per address family, its served ports at their
// target ports, each endpoint ready when the binding says so and, where
// a health check runs, healthy says so too (healthy nil: no check).
func BindingSlices(b *catalogv1alpha1.ServiceBinding, p Placement, managedBy string, served map[string]bool, healthy func(address string) bool) []*discoveryv1.EndpointSlice {
	var ports []discoveryv1.EndpointPort
	for _, bp := range b.Spec.Ports {
		if !served[bp.Name] {
			continue
		}
		q := discoveryv1.EndpointPort{Name: ptr.To(bp.Name), Port: ptr.To(TargetPort(bp)), Protocol: ptr.To(protocolOf(bp))}
		if bp.AppProtocol != nil {
			q.AppProtocol = ptr.To(*bp.AppProtocol)
		}
		ports = append(ports, q)
	}
	byFamily := map[discoveryv1.AddressType]*discoveryv1.EndpointSlice{}
	var out []*discoveryv1.EndpointSlice
	for _, ep := range b.Spec.Endpoints {
		ip, err := netip.ParseAddr(ep.Address)
		if err != nil {
			continue
		}
		family := discoveryv1.AddressTypeIPv4
		if ip.Is6() {
			family = discoveryv1.AddressTypeIPv6
		}
		s, ok := byFamily[family]
		if !ok {
			s = &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: p.LocalName.Namespace,
					Name:      export.SliceName(p.LocalName.Name, b.Spec.Cluster, b.Name+"-"+strings.ToLower(string(family))),
					Labels:    export.ImportedSliceLabels(p.LocalName.Name, b.Spec.Cluster, managedBy),
				},
				AddressType: family,
				Ports:       ports,
			}
			byFamily[family] = s
			out = append(out, s)
		}
		ready := ptr.Deref(ep.Ready, true) && (healthy == nil || healthy(ip.String()))
		e := discoveryv1.Endpoint{
			Addresses:  []string{ip.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)},
		}
		if ep.Hostname != "" {
			e.Hostname = ptr.To(ep.Hostname)
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return out
}

package export

import (
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Derived mode serves members that keep a stock kube-proxy (or none): the
// import is represented by an ordinary Service, the derived Service, and
// EndpointSlices of it, which any Service proxy programs. The names and
// the annotation are the mcs-api reference controller's, so that tools
// that know them find ours.

// AnnotationDerivedService, on a ServiceImport, names its derived Service.
const AnnotationDerivedService = proxy.AnnotationDerivedService

// DerivedName is the name of the derived Service of import
// namespace/name: "derived-" and the first ten characters of the
// lower-case, unpadded base32hex encoding of the SHA-256 of
// "namespace/name". A DNS-1035 label, whatever the import's name.
func DerivedName(namespace, name string) string {
	return proxy.DerivedServiceName(namespace, name)
}

// DerivedSliceName is the name of a derived EndpointSlice of source
// cluster: "<derived>-<cluster>", the name derived-Service
// implementations give the one slice per source cluster, or, where the cluster's endpoints come in several
// slices (both address families, more endpoints than one slice holds,
// endpoints with different ports), one per imported slice, named with
// part, the imported slice's own hash.
func DerivedSliceName(derived, cluster, part string) string {
	if part == "" {
		return derived + "-" + cluster
	}
	return derived + "-" + cluster + "-" + part
}

// DerivedSlices are the derived EndpointSlices of svc, the derived Service
// of an import, in a member whose imported slices (ImportedSlice, with
// ForMember applied) are imported: one per imported slice, so that a
// change of one source slice is one write, keyed by the imported slice's
// name.
func DerivedSlices(imported []*discoveryv1.EndpointSlice, svc *v1.Service, managedBy string) map[string]*discoveryv1.EndpointSlice {
	return slicesFor(imported, svc, svc.Name, managedBy)
}

// LocalServiceSlices are the EndpointSlices that make local Service svc
// of a derived member serve the endpoints of import importName's other
// source clusters (imported, never the member's own), for native names
// (RemoteAndLocal) where the member's proxies do not program imports:
// labelled for svc and the import, owned by svc, named
// "<derived>-local-<cluster>" so that they never take the name of a slice
// the EndpointSlice controller makes for svc.
func LocalServiceSlices(imported []*discoveryv1.EndpointSlice, svc *v1.Service, importName, managedBy string) map[string]*discoveryv1.EndpointSlice {
	return slicesFor(imported, svc, DerivedName(svc.Namespace, importName)+"-local", managedBy)
}

// slicesFor copies the imported slices for local Service svc, named after
// prefix (DerivedSliceName), keyed by the imported slice's name.
func slicesFor(imported []*discoveryv1.EndpointSlice, svc *v1.Service, prefix, managedBy string) map[string]*discoveryv1.EndpointSlice {
	perCluster := map[string]int{}
	for _, s := range imported {
		perCluster[s.Labels[mcsv1beta1.LabelSourceCluster]]++
	}
	out := make(map[string]*discoveryv1.EndpointSlice, len(imported))
	for _, s := range imported {
		cluster := s.Labels[mcsv1beta1.LabelSourceCluster]
		part := ""
		if perCluster[cluster] > 1 && len(s.Name) > sliceHashLength {
			part = s.Name[len(s.Name)-sliceHashLength:]
		}
		name := DerivedSliceName(prefix, cluster, part)
		out[s.Name] = DerivedSlice(s, svc, name, managedBy)
	}
	return out
}

// DerivedService is the derived Service of import si in a member: a
// selector-less ClusterIP Service (only the exporting clusters' endpoints
// serve an import, KEP-1645), headless for a Headless import so that both
// cluster.local and clusterset.local answer with the endpoints, with the
// import's ports, session affinity and IP families, labelled with the
// import's name and managedBy and owned by the import, so that it goes
// with it. Exports of LoadBalancer and NodePort Services are imported as
// ClusterSetIP, so their derived Services are ClusterIP too. The
// apiserver picks the cluster IPs from the member's own ranges; the
// import's ips become those.
func DerivedService(si *mcsv1beta1.ServiceImport, managedBy string) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: si.Namespace,
			Name:      DerivedName(si.Namespace, si.Name),
			Labels: map[string]string{
				mcsv1beta1.LabelServiceName: si.Name,
				LabelManagedBy:              managedBy,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: mcsv1beta1.GroupVersion.String(),
				Kind:       mcsv1beta1.ServiceImportKindName,
				Name:       si.Name,
				UID:        si.UID,
			}},
		},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			IPFamilies: append([]v1.IPFamily(nil), si.Spec.IPFamilies...),
		},
	}
	if si.Spec.Type == mcsv1beta1.Headless {
		svc.Spec.ClusterIP = v1.ClusterIPNone
	}
	switch len(svc.Spec.IPFamilies) {
	case 0:
		svc.Spec.IPFamilies = nil
	case 1:
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicySingleStack)
	default:
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	}
	setImportedPortsAndAffinity(&svc.Spec, si)
	return svc
}

// DerivedSlice is imported slice src (what ImportedSlice wrote for one
// source cluster, its node names already cleared for other members) as an
// EndpointSlice of the derived Service svc named name: labelled
// kubernetes.io/service-name with the derived Service, so that any Service
// proxy programs it, and with the import's name, the source cluster and
// managedBy, and owned by the derived Service.
func DerivedSlice(src *discoveryv1.EndpointSlice, svc *v1.Service, name, managedBy string) *discoveryv1.EndpointSlice {
	out := src.DeepCopy()
	out.ObjectMeta = metav1.ObjectMeta{
		Namespace: svc.Namespace,
		Name:      name,
		Labels: map[string]string{
			discoveryv1.LabelServiceName:  svc.Name,
			mcsv1beta1.LabelServiceName:   src.Labels[mcsv1beta1.LabelServiceName],
			mcsv1beta1.LabelSourceCluster: src.Labels[mcsv1beta1.LabelSourceCluster],
			discoveryv1.LabelManagedBy:    managedBy,
		},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1",
			Kind:       "Service",
			Name:       svc.Name,
			UID:        svc.UID,
		}},
	}
	return out
}

// OwnedByImport tells whether svc, a derived or native-names Service, is
// owned (by owner reference, not by a label anyone can set) by import si
// itself: a Service that someone else created is never adopted.
func OwnedByImport(svc *v1.Service, si *mcsv1beta1.ServiceImport) bool {
	for _, o := range svc.OwnerReferences {
		// (The apiserver refuses an owner reference without a UID.)
		if o.Kind == mcsv1beta1.ServiceImportKindName && o.Name == si.Name && o.UID == si.UID {
			return true
		}
	}
	return false
}

// ServiceUpdate returns have, a Service the controller made for an import
// (DerivedService, NativeService) as it is, made what want says in every field that decides where its
// traffic comes from and goes: labels, owners, type, selector, ports,
// external and load-balancer IPs, session affinity, readiness publishing,
// and the traffic policies; nil when nothing differs. A field someone else
// changed (a selector adding their pods, a NodePort or LoadBalancer type
// or externalIPs exposing other clusters' endpoints outside the cluster)
// is put back; the fields the apiserver fills (cluster IPs, node ports of
// a type that has them) are left to it: on the change back to ClusterIP
// it drops what only the other types have.
func ServiceUpdate(have, want *v1.Service) *v1.Service {
	h, w := &have.Spec, &want.Spec
	ports := make([]v1.ServicePort, len(w.Ports))
	copy(ports, w.Ports)
	same := apiequality.Semantic.DeepEqual(have.Labels, want.Labels) &&
		apiequality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences) &&
		h.Type == w.Type && len(h.Selector) == 0 && len(h.ExternalIPs) == 0 &&
		h.LoadBalancerIP == "" && len(h.LoadBalancerSourceRanges) == 0 && h.ExternalName == "" &&
		!h.PublishNotReadyAddresses && apiequality.Semantic.DeepEqual(h.Ports, w.Ports) &&
		h.SessionAffinity == w.SessionAffinity && apiequality.Semantic.DeepEqual(h.SessionAffinityConfig, w.SessionAffinityConfig) &&
		ptr.Deref(h.InternalTrafficPolicy, v1.ServiceInternalTrafficPolicyCluster) == v1.ServiceInternalTrafficPolicyCluster &&
		h.TrafficDistribution == nil
	if same {
		return nil
	}
	out := have.DeepCopy()
	out.Labels, out.OwnerReferences = want.Labels, want.OwnerReferences
	o := &out.Spec
	o.Type, o.Selector, o.ExternalIPs = w.Type, nil, nil
	o.LoadBalancerIP, o.LoadBalancerSourceRanges, o.ExternalName = "", nil, ""
	o.PublishNotReadyAddresses = false
	o.Ports = ports
	o.SessionAffinity, o.SessionAffinityConfig = w.SessionAffinity, w.SessionAffinityConfig
	o.InternalTrafficPolicy, o.TrafficDistribution = nil, nil
	return out
}

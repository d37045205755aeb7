package export

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The mcs-api reference controller's names, computed independently
// (Python: "derived-" + b32hexencode(sha256(b"ns/name")).rstrip("=").lower()[:10]).
func TestDerivedNameIsTheReferenceControllers(t *testing.T) {
	for _, tc := range []struct{ namespace, name, want string }{
		{"default", "web", "derived-gapqrqeg1j"},
		{"prod", "db", "derived-iriqaii1u1"},
		{"demo", "nginx", "derived-kaa23d902o"},
		{"ns", "a-very-long-service-name-0123456789", "derived-latlfc2s4u"},
	} {
		got := DerivedName(tc.namespace, tc.name)
		if got != tc.want {
			t.Errorf("DerivedName(%s, %s) = %s, want %s", tc.namespace, tc.name, got, tc.want)
		}
		if errs := validation.IsDNS1035Label(got); len(errs) > 0 {
			t.Errorf("%s is no Service name: %v", got, errs)
		}
	}
	if DerivedName("a", "bc") == DerivedName("ab", "c") {
		t.Errorf("namespace and name are not kept apart")
	}
}

func TestDerivedSliceName(t *testing.T) {
	if got := DerivedSliceName("derived-gapqrqeg1j", "cluster-a", ""); got != "derived-gapqrqeg1j-cluster-a" {
		t.Errorf("first slice of cluster-a: %s", got)
	}
	if got := DerivedSliceName("derived-gapqrqeg1j", "cluster-a", "ipv6"); got != "derived-gapqrqeg1j-cluster-a-ipv6" {
		t.Errorf("another slice of cluster-a: %s", got)
	}
}

// The derived Service of a ClusterSetIP import, as the mcs-api reference
// controller makes it for stock proxies: a ClusterIP derived
// Service with the import's ports, owned by the import, no selector.
func TestDerivedServiceOfAClusterSetIPImport(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "si-uid"},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:                  mcsv1beta1.ClusterSetIP,
			IPs:                   []string{"10.250.0.7"},
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}},
			Ports: []mcsv1beta1.ServicePort{
				{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, AppProtocol: ptr.To("http")},
				{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
				{Name: "metrics", Port: 9090},
			},
		},
	}
	want := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default",
			Name:      "derived-gapqrqeg1j",
			Labels:    map[string]string{"multicluster.kubernetes.io/service-name": "web", "app.kubernetes.io/managed-by": "mcs-controller"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "multicluster.x-k8s.io/v1beta1", Kind: "ServiceImport", Name: "web", UID: "si-uid",
			}},
		},
		Spec: v1.ServiceSpec{
			Type:                  v1.ServiceTypeClusterIP,
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
			IPFamilyPolicy:        ptr.To(v1.IPFamilyPolicySingleStack),
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}},
			Ports: []v1.ServicePort{
				{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, AppProtocol: ptr.To("http"), TargetPort: intstr.FromInt32(80)},
				{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9090, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(9090)},
			},
		},
	}
	if diff := cmp.Diff(want, DerivedService(si, "mcs-controller")); diff != "" {
		t.Errorf("derived Service (-want +got):\n%s", diff)
	}
}

// The derived Service of a headless import, and of a dual-stack one.
func TestDerivedServiceOfHeadlessAndDualStackImports(t *testing.T) {
	headless := DerivedService(&mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "cassandra"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Name: "cql", Port: 9042}}},
	}, "mcs-controller")
	if headless.Spec.ClusterIP != v1.ClusterIPNone || headless.Spec.Type != v1.ServiceTypeClusterIP || headless.Spec.Selector != nil {
		t.Errorf("headless import: %+v, want a selector-less headless ClusterIP Service", headless.Spec)
	}
	if headless.Spec.SessionAffinity != v1.ServiceAffinityNone || headless.Spec.IPFamilyPolicy != nil {
		t.Errorf("headless import without affinity or families: %+v", headless.Spec)
	}
	dual := DerivedService(&mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol},
			IPs: []string{"fd00:10:250::7", "10.250.0.7"}, Ports: []mcsv1beta1.ServicePort{{Port: 80}}},
	}, "mcs-controller")
	if p := dual.Spec.IPFamilyPolicy; p == nil || *p != v1.IPFamilyPolicyRequireDualStack ||
		!cmp.Equal(dual.Spec.IPFamilies, []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}) {
		t.Errorf("dual-stack import: policy %v families %v, want RequireDualStack in the import's order", p, dual.Spec.IPFamilies)
	}
	if dual.Spec.ClusterIP != "" || len(dual.Spec.ClusterIPs) != 0 {
		t.Errorf("the derived Service asks for the clusterset IPs %v; the member's apiserver allocates its own", dual.Spec.ClusterIPs)
	}
}

// A derived EndpointSlice per source cluster: labelled for the derived
// Service and the import, owned by the derived Service.
func TestDerivedSlice(t *testing.T) {
	src := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "imported-web-cluster-a-xyz", ResourceVersion: "12",
			Labels: map[string]string{
				"multicluster.kubernetes.io/service-name":   "web",
				"multicluster.kubernetes.io/source-cluster": "cluster-a",
				"endpointslice.kubernetes.io/managed-by":    "mcs-controller",
			},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ServiceImport", Name: "web"}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "derived-gapqrqeg1j", UID: "svc-uid"}}
	got := DerivedSlice(src, svc, DerivedSliceName(svc.Name, "cluster-a", ""), "mcs-controller")
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "derived-gapqrqeg1j-cluster-a",
			Labels: map[string]string{
				"kubernetes.io/service-name":                "derived-gapqrqeg1j",
				"multicluster.kubernetes.io/service-name":   "web",
				"multicluster.kubernetes.io/source-cluster": "cluster-a",
				"endpointslice.kubernetes.io/managed-by":    "mcs-controller",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "derived-gapqrqeg1j", UID: "svc-uid"}},
		},
		AddressType: src.AddressType,
		Endpoints:   src.Endpoints,
		Ports:       src.Ports,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("derived slice (-want +got):\n%s", diff)
	}
	got.Endpoints[0].Addresses[0] = "10.9.9.9"
	if src.Endpoints[0].Addresses[0] != "10.1.0.5" {
		t.Errorf("the derived slice shares its endpoints with the imported one")
	}
}

// One slice per source cluster is named "<derived>-<cluster>"; a cluster
// whose endpoints come in several slices gets one derived slice per
// imported slice, each named with the imported slice's hash, so that no
// two collide and every endpoint is kept.
func TestDerivedSlicesNamePerSourceCluster(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "derived-gapqrqeg1j", UID: "svc-uid"}}
	imported := func(cluster, source, addr string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "default", Name: SliceName("web", cluster, source),
				Labels: map[string]string{
					"multicluster.kubernetes.io/service-name":   "web",
					"multicluster.kubernetes.io/source-cluster": cluster,
				},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		}
	}
	a := imported("cluster-a", "web-abcde", "10.1.0.5")
	b1 := imported("cluster-b", "web-v4", "10.2.0.5")
	b2 := imported("cluster-b", "web-v4-more", "10.2.0.6")
	got := DerivedSlices([]*discoveryv1.EndpointSlice{a, b1, b2}, svc, "mcs-controller")
	byName := map[string]*discoveryv1.EndpointSlice{}
	for imported, s := range got {
		if src := map[string]*discoveryv1.EndpointSlice{a.Name: a, b1.Name: b1, b2.Name: b2}[imported]; src == nil || src.Endpoints[0].Addresses[0] != s.Endpoints[0].Addresses[0] {
			t.Errorf("derived slice %s is keyed by %s, not by the imported slice it stands for", s.Name, imported)
		}
		byName[s.Name] = s
	}
	wantNames := map[string]string{
		"derived-gapqrqeg1j-cluster-a":                              "10.1.0.5",
		"derived-gapqrqeg1j-cluster-b-" + b1.Name[len(b1.Name)-10:]: "10.2.0.5",
		"derived-gapqrqeg1j-cluster-b-" + b2.Name[len(b2.Name)-10:]: "10.2.0.6",
	}
	if len(got) != len(wantNames) {
		t.Fatalf("got %d derived slices, want %d: %v", len(got), len(wantNames), got)
	}
	for name, addr := range wantNames {
		s, ok := byName[name]
		if !ok {
			t.Errorf("no derived slice %s", name)
			continue
		}
		if s.Name != name || s.Endpoints[0].Addresses[0] != addr || s.Labels["kubernetes.io/service-name"] != svc.Name {
			t.Errorf("%s: %+v", name, s)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("%s: %v", name, errs)
		}
	}
}

// The slices that make a derived member's local Service serve the other
// clusters' endpoints (RemoteAndLocal) are labelled for that Service and
// named so that no EndpointSlice controller name (<service>-<5 characters>)
// can collide with them.
func TestLocalServiceSlices(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "user-svc"}}
	src := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: SliceName("web", "cluster-a", "web-abcde"),
			Labels: map[string]string{"multicluster.kubernetes.io/service-name": "web", "multicluster.kubernetes.io/source-cluster": "cluster-a"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}}},
	}
	got := LocalServiceSlices([]*discoveryv1.EndpointSlice{src}, svc, "web", "mcs-controller")[src.Name]
	if got == nil || got.Name != "derived-gapqrqeg1j-local-cluster-a" {
		t.Fatalf("local Service slice %v, want derived-gapqrqeg1j-local-cluster-a", got)
	}
	if got.Labels["kubernetes.io/service-name"] != "web" || got.Labels["multicluster.kubernetes.io/service-name"] != "web" ||
		len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "user-svc" {
		t.Errorf("labels %v owners %v, want a slice of Service web owned by it", got.Labels, got.OwnerReferences)
	}
}

// A derived Service is the controller's alone: whatever a user changed in
// it that decides where its traffic goes is put back, and one someone
// else created is never the import's, whatever its labels.
func TestServiceUpdateAndOwnership(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db", UID: "import-uid"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []mcsv1beta1.ServicePort{{Name: "sql", Protocol: v1.ProtocolTCP, Port: 5432}}},
	}
	want := DerivedService(si, "mcs-controller")
	if ServiceUpdate(want.DeepCopy(), want) != nil {
		t.Error("an unchanged derived Service is updated")
	}
	for name, tamper := range map[string]func(*v1.Service){
		"a selector adding the user's pods": func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "evil"} },
		"NodePort, reachable from outside":  func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort; s.Spec.Ports[0].NodePort = 30001 },
		"LoadBalancer":                      func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeLoadBalancer },
		"external IPs":                      func(s *v1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1"} },
		"load-balancer source ranges":       func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"0.0.0.0/0"} },
		"not-ready endpoints published":     func(s *v1.Service) { s.Spec.PublishNotReadyAddresses = true },
		"another port":                      func(s *v1.Service) { s.Spec.Ports[0].Port = 22 },
		"labels taken away":                 func(s *v1.Service) { s.Labels = nil },
		"owners changed":                    func(s *v1.Service) { s.OwnerReferences = nil },
		"node-local traffic only":           func(s *v1.Service) { s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal) },
	} {
		have := want.DeepCopy()
		have.Spec.ClusterIP, have.Spec.ClusterIPs = "10.96.0.9", []string{"10.96.0.9"}
		tamper(have)
		got := ServiceUpdate(have, want)
		if got == nil {
			t.Errorf("%s: not put back", name)
			continue
		}
		if got.Spec.Type != v1.ServiceTypeClusterIP || len(got.Spec.Selector) > 0 || len(got.Spec.ExternalIPs) > 0 ||
			len(got.Spec.LoadBalancerSourceRanges) > 0 || got.Spec.PublishNotReadyAddresses || got.Spec.Ports[0].Port != 5432 ||
			got.Spec.Ports[0].NodePort != 0 || got.Spec.InternalTrafficPolicy != nil || !OwnedByImport(got, si) || got.Labels[LabelManagedBy] != "mcs-controller" {
			t.Errorf("%s: put back as %+v", name, got)
		}
		if got.Spec.ClusterIP != "10.96.0.9" {
			t.Errorf("%s: the cluster IP, the apiserver's, changed to %q", name, got.Spec.ClusterIP)
		}
	}

	forged := want.DeepCopy()
	forged.OwnerReferences[0].UID = "someone-elses"
	if OwnedByImport(forged, si) {
		t.Error("a Service owned by another object of the import's name is the import's")
	}
	forged.OwnerReferences = nil
	if OwnedByImport(forged, si) {
		t.Error("a Service with the controller's labels and no owner is the import's")
	}
}

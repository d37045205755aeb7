package integration

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

// attempt is one write an actor tries in a member with the admission
// policies installed, and how it must end.
type attempt struct {
	what    string
	do      func() error
	allowed bool
	// byRBAC: refused by RBAC rather than by a policy.
	byRBAC bool
}

// admissionScene is what TestAdmissionPolicies set up before the
// attempts: the member, its actors' clients (alice, a namespace admin of
// "attacker"; the controller; a user merely named as the controller),
// the objects they aim at, and the writes they share.
type admissionScene struct {
	m                 *testMember
	aliceKube         kubernetes.Interface
	aliceMCS          mcsclientset.Interface
	ctrlKube          kubernetes.Interface
	ctrlMCS           mcsclientset.Interface
	bareMCS           mcsclientset.Interface
	victimDerived     string
	controllerLabel   map[string]string
	updateService     func(kube kubernetes.Interface, ns, name string, mutate func(*v1.Service)) error
	exportWith        func(name string, annotations map[string]string) func() error
	evil              *mcsv1beta1.ServiceImport
	mcsLabels         func(manager string) map[string]string
	localServiceSlice func() error
}

// admissionAttempts are the writes TestAdmissionPolicies tries, each
// allowed or refused (by RBAC or by an admission policy) as it says.
func admissionAttempts(ctx context.Context, t *testing.T, sc admissionScene) []attempt {
	return []attempt{
		// A namespace admin.
		{what: "alice creates a ServiceImport", do: func() error {
			_, err := sc.aliceMCS.MulticlusterV1beta1().ServiceImports("attacker").Create(ctx, sc.evil, metav1.CreateOptions{})
			return err
		}},
		{what: "alice creates an MCS EndpointSlice", do: func() error {
			_, err := sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("mcs", sc.mcsLabels("alice")), metav1.CreateOptions{})
			return err
		}},
		{what: "alice creates a slice with the controller's managed-by", do: func() error {
			_, err := sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("managed", map[string]string{
				discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: mcsproxy.DefaultManagedBy,
			}), metav1.CreateOptions{})
			return err
		}},
		{what: "alice creates a slice for an import's synthetic Service", do: func() error {
			_, err := sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("synthetic", map[string]string{
				discoveryv1.LabelServiceName: "db.clusterset",
			}), metav1.CreateOptions{})
			return err
		}},
		{what: "alice creates an MCS slice naming its import's synthetic Service", do: func() error {
			l := sc.mcsLabels(mcsproxy.DefaultManagedBy)
			l[discoveryv1.LabelServiceName] = mcsproxy.ServiceName("db")
			_, err := sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("db-synthetic-forged", l), metav1.CreateOptions{})
			return err
		}},
		{what: "alice relabels her slice into an MCS one", do: func() error {
			s, err := sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Get(ctx, "plain", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Labels = sc.mcsLabels(mcsproxy.DefaultManagedBy)
			_, err = sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{what: "alice labels her slice as written by the EndpointSlice controller", do: func() error {
			_, err := sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("forged-source", map[string]string{
				discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			}), metav1.CreateOptions{})
			return err
		}},
		{what: "alice labels her slice as written by the mirroring controller", do: func() error {
			_, err := sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("forged-mirror", map[string]string{
				discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslicemirroring-controller.k8s.io",
			}), metav1.CreateOptions{})
			return err
		}},
		{what: "the EndpointSlice controller writes its slice", allowed: true, do: func() error {
			kube, _ := impersonate(t, sc.m, "system:serviceaccount:kube-system:endpointslice-controller")
			_, err := kube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("web-abcde", map[string]string{
				discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			}), metav1.CreateOptions{})
			return err
		}},
		{what: "alice creates a plain slice for her own Service", allowed: true, do: func() error {
			_, err := sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("plain-2", map[string]string{
				discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "alice",
			}), metav1.CreateOptions{})
			return err
		}},
		// Capture through exportedAnnotations: the clusterset IPs a
		// derived import asks every proxy to program.
		{what: "alice exports a Service with another import's clusterset IP in its annotations", do: sc.exportWith("capture", map[string]string{
			mcsproxy.AnnotationDerivedService: "derived-x", mcsproxy.AnnotationClusterSetIPs: "10.250.0.7",
		})},
		{what: "alice exports a Service asking for native names", allowed: true, do: sc.exportWith("native", map[string]string{
			mcsproxy.AnnotationNativeNames: string(mcsproxy.LocalFirst),
		})},
		// Derived members: the derived Service and its endpoints.
		{what: "alice creates a plain slice for a derived Service", do: func() error {
			_, err := sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("derived-forged", map[string]string{
				discoveryv1.LabelServiceName: sc.victimDerived, discoveryv1.LabelManagedBy: "alice",
			}), metav1.CreateOptions{})
			return err
		}},
		{what: "alice creates Endpoints named as a derived Service (mirrored into its slices)", do: func() error {
			_, err := sc.aliceKube.CoreV1().Endpoints("attacker").Create(ctx, &v1.Endpoints{ //nolint:staticcheck // the mirroring path under attack
				ObjectMeta: metav1.ObjectMeta{Name: sc.victimDerived},
				Subsets:    []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: "10.2.0.66"}}, Ports: []v1.EndpointPort{{Name: "http", Port: 8080}}}}, //nolint:staticcheck
			}, metav1.CreateOptions{})
			return err
		}},
		{what: "alice creates a Service named as a derived Service before the controller does", do: func() error {
			_, err := sc.aliceKube.CoreV1().Services("attacker").Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: export.DerivedName("attacker", "later")},
				Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "sc.evil"}, Ports: []v1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{what: "alice points the controller's derived Service at her pods", do: func() error {
			return sc.updateService(sc.aliceKube, "attacker", sc.victimDerived, func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "sc.evil"} })
		}},
		{what: "alice exposes the controller's derived Service on node ports", do: func() error {
			return sc.updateService(sc.aliceKube, "attacker", sc.victimDerived, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })
		}},
		{what: "alice creates a Service labelled as the controller's", do: func() error {
			_, err := sc.aliceKube.CoreV1().Services("attacker").Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "fake-native", Labels: sc.controllerLabel},
				Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{what: "alice deletes the controller's derived Service", do: func() error {
			return sc.aliceKube.CoreV1().Services("attacker").Delete(ctx, sc.victimDerived, metav1.DeleteOptions{})
		}},
		// Deletes: an import deleted comes back younger and loses its IP
		// to an older claim.
		{what: "alice deletes her namespace's ServiceImport", do: func() error {
			return sc.aliceMCS.MulticlusterV1beta1().ServiceImports("attacker").Delete(ctx, "victim", metav1.DeleteOptions{})
		}},
		{what: "alice deletes an MCS slice", do: func() error {
			return sc.aliceKube.DiscoveryV1().EndpointSlices("attacker").Delete(ctx, "victim-cluster-a", metav1.DeleteOptions{})
		}},
		// The clusterset IP ranges are the imports'.
		{what: "alice sets an external IP in the clusterset range", do: func() error {
			_, err := sc.aliceKube.CoreV1().Services("attacker").Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "ext"},
				Spec:       v1.ServiceSpec{ExternalIPs: []string{"10.250.0.7"}, Ports: []v1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{what: "alice asks for an import's clusterset IP as her cluster IP (a ServiceCIDR added later)", do: func() error {
			_, err := sc.aliceKube.CoreV1().Services("attacker").Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "squat"},
				Spec:       v1.ServiceSpec{ClusterIP: "10.250.0.7", Ports: []v1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			// The overlapping range goes (the apiserver gives out no
			// more of its IPs once it is being deleted): every Service
			// given one of them would be refused, the controller's too.
			if derr := sc.m.kube.NetworkingV1().ServiceCIDRs().Delete(ctx, "overlapping", metav1.DeleteOptions{}); derr != nil {
				t.Fatal(derr)
			}
			return err
		}},
		{what: "alice creates her own Service", allowed: true, do: func() error {
			_, err := sc.aliceKube.CoreV1().Services("attacker").Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "own"},
				Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "own"}, Ports: []v1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{what: "alice exports a Service", allowed: true, do: func() error {
			_, err := sc.aliceMCS.MulticlusterV1beta1().ServiceExports("attacker").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
			return err
		}},

		// The controller's identity.
		{what: "the controller writes a slice for default/kubernetes", do: func() error {
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("default").Create(ctx, slice("kubernetes-sc.evil", map[string]string{
				discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: mcsproxy.DefaultManagedBy,
			}), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes an MCS slice under another manager", do: func() error {
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("other-manager", sc.mcsLabels("someone")), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller takes over alice's plain slice as an MCS slice", do: func() error {
			s, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("attacker").Get(ctx, "plain", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Labels = sc.mcsLabels(mcsproxy.DefaultManagedBy)
			_, err = sc.ctrlKube.DiscoveryV1().EndpointSlices("attacker").Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{what: "the controller writes a slice for a Service not named as a derived Service", do: func() error {
			l := sc.mcsLabels(mcsproxy.DefaultManagedBy)
			l[discoveryv1.LabelServiceName] = "derived-kube-dns"
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("derived-lookalike", l), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a slice of a derived Service", allowed: true, do: func() error {
			l := sc.mcsLabels(mcsproxy.DefaultManagedBy)
			l[discoveryv1.LabelServiceName] = export.DerivedName("prod", "db")
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice(export.DerivedSliceName(export.DerivedName("prod", "db"), "cluster-a", ""), l), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a slice for kube-system/kube-dns named as an import of kube-dns", do: func() error {
			l := map[string]string{mcsv1beta1.LabelServiceName: "kube-dns", mcsv1beta1.LabelSourceCluster: "cluster-b",
				discoveryv1.LabelManagedBy: mcsproxy.DefaultManagedBy, discoveryv1.LabelServiceName: "kube-dns"}
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, slice("kube-dns-sc.evil", l), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a slice for a Service other than the slice's import", do: func() error {
			l := sc.mcsLabels(mcsproxy.DefaultManagedBy)
			l[discoveryv1.LabelServiceName] = "users"
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("users-sc.evil", l), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes an MCS slice naming its import's synthetic Service", allowed: true, do: func() error {
			l := sc.mcsLabels(mcsproxy.DefaultManagedBy)
			l[discoveryv1.LabelServiceName] = mcsproxy.ServiceName("db")
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("db-cluster-a-synthetic", l), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes an MCS slice naming another import's synthetic Service", do: func() error {
			l := sc.mcsLabels(mcsproxy.DefaultManagedBy)
			l[discoveryv1.LabelServiceName] = mcsproxy.ServiceName("users")
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("users-synthetic-sc.evil", l), metav1.CreateOptions{})
			return err
		}},
		// In a member served natively (every binding here), native
		// names are kube-proxy's, with the Service owner's consent: the
		// controller writes no slice of a local Service. (A derived
		// member, below, lets it.)
		{what: "the controller writes a slice of the local Service named as its import, in a native member", do: sc.localServiceSlice},
		{what: "the controller moves its derived slice to another Service", do: func() error {
			name := export.DerivedSliceName(export.DerivedName("prod", "db"), "cluster-a", "")
			s, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Labels[discoveryv1.LabelServiceName] = export.DerivedName("prod", "other")
			_, err = sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{what: "the controller deletes alice's plain slice", do: func() error {
			return sc.ctrlKube.DiscoveryV1().EndpointSlices("attacker").Delete(ctx, "plain", metav1.DeleteOptions{})
		}},
		{what: "the controller takes the scheduler's Lease", do: func() error {
			l, err := sc.ctrlKube.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
			if err != nil {
				return err
			}
			l.Spec.HolderIdentity = ptr.To("mcs-controller")
			_, err = sc.ctrlKube.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
			return err
		}},
		// The system namespaces, through any object kind.
		{what: "the controller writes a ServiceImport in kube-system", do: func() error {
			si := sc.evil.DeepCopy()
			si.Name = "kube-dns"
			_, err := sc.ctrlMCS.MulticlusterV1beta1().ServiceImports("kube-system").Create(ctx, si, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes the ServiceImport default/kubernetes", do: func() error {
			si := sc.evil.DeepCopy()
			si.Name = "kubernetes"
			_, err := sc.ctrlMCS.MulticlusterV1beta1().ServiceImports("default").Create(ctx, si, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes an MCS slice in kube-system", do: func() error {
			l := sc.mcsLabels(mcsproxy.DefaultManagedBy)
			l[mcsv1beta1.LabelServiceName] = "kube-dns"
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, slice("kube-dns-cluster-b", l), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a Service of its own in kube-system", do: func() error {
			_, err := sc.ctrlKube.CoreV1().Services("kube-system").Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-native", Labels: sc.controllerLabel},
				Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 53}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a Lease outside its namespace", byRBAC: true, do: func() error {
			_, err := sc.ctrlKube.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "mcs-source-x"}}, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a Service that selects pods", do: func() error {
			_, err := sc.ctrlKube.CoreV1().Services("prod").Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"app.kubernetes.io/managed-by": mcsproxy.DefaultManagedBy}},
				Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "db"}, Ports: []v1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a ClusterIP Service that selects pods under an ingress name", do: func() error {
			_, err := sc.ctrlKube.CoreV1().Services("prod").Create(ctx, ingressService("ingress-0123456789", v1.ServiceTypeClusterIP, true), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a NodePort Service that selects pods under another name", do: func() error {
			_, err := sc.ctrlKube.CoreV1().Services("prod").Create(ctx, ingressService("users-np", v1.ServiceTypeNodePort, true), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes an ingress Service that does not say which export it serves", do: func() error {
			_, err := sc.ctrlKube.CoreV1().Services("prod").Create(ctx, ingressService("ingress-0123456789", v1.ServiceTypeNodePort, false), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes the ingress Service of an export", allowed: true, do: func() error {
			_, err := sc.ctrlKube.CoreV1().Services("prod").Create(ctx, ingressService(export.IngressName("prod", "db"), v1.ServiceTypeNodePort, true), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller turns the ingress Service of an export into a ClusterIP Service", do: func() error {
			s, err := sc.ctrlKube.CoreV1().Services("prod").Get(ctx, export.IngressName("prod", "db"), metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Type = v1.ServiceTypeClusterIP
			for i := range s.Spec.Ports {
				s.Spec.Ports[i].NodePort = 0
			}
			_, err = sc.ctrlKube.CoreV1().Services("prod").Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{what: "the controller deletes the ingress Service of an export", allowed: true, do: func() error {
			return sc.ctrlKube.CoreV1().Services("prod").Delete(ctx, export.IngressName("prod", "db"), metav1.DeleteOptions{})
		}},
		{what: "the controller writes a Service not labelled as its own", do: func() error {
			_, err := sc.ctrlKube.CoreV1().Services("prod").Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "y"}, Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller takes over a user's Service", do: func() error {
			s, err := sc.ctrlKube.CoreV1().Services("prod").Get(ctx, "users", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Labels = map[string]string{"app.kubernetes.io/managed-by": mcsproxy.DefaultManagedBy}
			s.Spec.Selector = nil
			_, err = sc.ctrlKube.CoreV1().Services("prod").Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{what: "the controller deletes a user's Service", do: func() error {
			return sc.ctrlKube.CoreV1().Services("prod").Delete(ctx, "users", metav1.DeleteOptions{})
		}},
		{what: "the controller writes a native Service", allowed: true, do: func() error {
			_, err := sc.ctrlKube.CoreV1().Services("prod").Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "native", Labels: map[string]string{"app.kubernetes.io/managed-by": mcsproxy.DefaultManagedBy}},
				Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller deletes its native Service", allowed: true, do: func() error {
			return sc.ctrlKube.CoreV1().Services("prod").Delete(ctx, "native", metav1.DeleteOptions{})
		}},
		{what: "the controller writes a Secret", byRBAC: true, do: func() error {
			_, err := sc.ctrlKube.CoreV1().Secrets("prod").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes an MCS slice", allowed: true, do: func() error {
			_, err := sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("db-cluster-a", sc.mcsLabels(mcsproxy.DefaultManagedBy)), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller deletes its MCS slice", allowed: true, do: func() error {
			return sc.ctrlKube.DiscoveryV1().EndpointSlices("prod").Delete(ctx, "db-cluster-a", metav1.DeleteOptions{})
		}},
		{what: "the controller writes its source Lease", allowed: true, do: func() error {
			_, err := sc.ctrlKube.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "mcs-source-cluster-a"}}, metav1.CreateOptions{})
			return err
		}},
		{what: "pull mode's member agent, as the member's mcs-controller, writes its leader election Lease", allowed: true, do: func() error {
			_, err := sc.ctrlKube.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "mcs-member-agent"}}, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a Lease named after the member agent's", do: func() error {
			_, err := sc.ctrlKube.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "mcs-member-agent-x"}}, metav1.CreateOptions{})
			return err
		}},
		{what: "a user named mcs-controller by an external identity provider writes a ServiceImport", do: func() error {
			si := sc.evil.DeepCopy()
			si.Name = "minted"
			_, err := sc.bareMCS.MulticlusterV1beta1().ServiceImports("attacker").Create(ctx, si, metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a ServiceImport", allowed: true, do: func() error {
			si := sc.evil.DeepCopy()
			si.Name = "db"
			_, err := sc.ctrlMCS.MulticlusterV1beta1().ServiceImports("prod").Create(ctx, si, metav1.CreateOptions{})
			return err
		}},
	}
}

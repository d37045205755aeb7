package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/kindconfig"
)

// TestAdmissionPolicies checks kind-config/mcs-admission-policy.yaml and
// kind-config/mcs-controller-rbac.yaml against a real apiserver, as
// attacks: a namespace admin who tries to steer clusterset traffic, and
// the controller's own identity reaching beyond what it writes. Every
// refusal is paired with the legitimate write next to it, so that the
// policies are shown to stop exactly the attack.
func TestAdmissionPolicies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	m := startMember(t, etcd, dir, "cluster-a")
	createNamespace(t, m, "attacker")
	createNamespace(t, m, "prod")

	// A namespace admin of "attacker", with the rights to ServiceImports
	// and EndpointSlices a generous Role grants.
	if _, err := m.kube.RbacV1().Roles("attacker").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "edit-all"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports", "serviceexports"}, Verbs: []string{"*"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"services", "endpoints"}, Verbs: []string{"*"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.kube.RbacV1().RoleBindings("attacker").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "edit-all"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	aliceKube, aliceMCS := impersonate(t, m, "alice")
	// A user named as the controller once was, bare: an OIDC or webhook
	// authenticator may hand out such a name. With alice's rights in her
	// namespace, it is still not the controller.
	if _, err := m.kube.RbacV1().RoleBindings("attacker").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bare-mcs-controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "edit-all"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "mcs-controller"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, bareMCS := impersonate(t, m, "mcs-controller")
	ctrlKube, ctrlMCS := impersonate(t, m, controllerUser)

	// The scheduler's leader Lease, which the controller's Role in
	// kube-system would otherwise let it take.
	if _, err := m.kube.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("scheduler-1")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A user's Service, which the controller must never take.
	if _, err := m.kube.CoreV1().Services("prod").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "users"},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "users"}, Ports: []v1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// alice's own plain slice, for the update and delete attempts.
	if _, err := aliceKube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("plain", map[string]string{
		discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "alice",
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// What the controller wrote in alice's namespace for an export of
	// attacker/victim (written here as an administrator, before the
	// policies): the import, one of its slices, its derived Service.
	victimDerived := export.DerivedName("attacker", "victim")
	controllerLabel := map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}
	if _, err := m.mcs.MulticlusterV1beta1().ServiceImports("attacker").Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "victim", Labels: controllerLabel},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.7"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	victimSlice := map[string]string{mcsv1beta1.LabelServiceName: "victim", mcsv1beta1.LabelSourceCluster: "cluster-a", discoveryv1.LabelManagedBy: mcsproxy.DefaultManagedBy}
	if _, err := m.kube.DiscoveryV1().EndpointSlices("attacker").Create(ctx, slice("victim-cluster-a", victimSlice), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.kube.CoreV1().Services("attacker").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: victimDerived, Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy, mcsv1beta1.LabelServiceName: "victim"}},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Service range added after the member joined, overlapping the
	// clusterset's: the apiserver would give out its IPs.
	if _, err := m.kube.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "overlapping"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.250.0.0/24"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the apiserver to give out IPs of the new ServiceCIDR", func() (bool, string) {
		_, err := m.kube.CoreV1().Services("attacker").Create(ctx, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "range-probe"},
			Spec:       v1.ServiceSpec{ClusterIP: "10.250.0.7", Ports: []v1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, errString(err)
	})
	updateService := func(kube kubernetes.Interface, ns, name string, mutate func(*v1.Service)) error {
		svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(svc)
		_, err = kube.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{})
		return err
	}
	exportWith := func(name string, annotations map[string]string) func() error {
		return func() error {
			_, err := aliceMCS.MulticlusterV1beta1().ServiceExports("attacker").Create(ctx, &mcsv1beta1.ServiceExport{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       mcsv1beta1.ServiceExportSpec{ExportedAnnotations: annotations},
			}, metav1.CreateOptions{})
			return err
		}
	}

	installAdmissionPolicies(t, m)
	evil := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "evil", Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.10"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}

	mcsLabels := func(manager string) map[string]string {
		return map[string]string{mcsv1beta1.LabelServiceName: "db", mcsv1beta1.LabelSourceCluster: "cluster-a", discoveryv1.LabelManagedBy: manager}
	}
	localServiceSlice := func() error {
		l := mcsLabels(mcsproxy.DefaultManagedBy)
		l[discoveryv1.LabelServiceName] = "db"
		_, err := ctrlKube.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice(export.DerivedName("prod", "db")+"-local-cluster-a", l), metav1.CreateOptions{})
		return err
	}
	attempts := admissionAttempts(ctx, t, admissionScene{m: m, aliceKube: aliceKube, aliceMCS: aliceMCS, ctrlKube: ctrlKube, ctrlMCS: ctrlMCS, bareMCS: bareMCS, victimDerived: victimDerived, controllerLabel: controllerLabel, updateService: updateService, exportWith: exportWith, evil: evil, mcsLabels: mcsLabels, localServiceSlice: localServiceSlice})
	for _, a := range attempts {
		err := a.do()
		switch {
		case a.allowed && err != nil:
			t.Errorf("%s: refused, want allowed: %v", a.what, err)
		case !a.allowed && err == nil:
			t.Errorf("%s: allowed, want refused", a.what)
		case !a.allowed && a.byRBAC && !apierrors.IsForbidden(err):
			t.Errorf("%s: %v, want refused by RBAC", a.what, err)
		case !a.allowed && !a.byRBAC && !deniedByPolicy(err):
			t.Errorf("%s: %v, want refused by an admission policy", a.what, err)
		}
	}
	if l, _ := m.kube.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{}); ptr.Deref(l.Spec.HolderIdentity, "") != "scheduler-1" {
		t.Errorf("the scheduler's Lease is held by %q", ptr.Deref(l.Spec.HolderIdentity, ""))
	}
	// A derived member (deploy/overlays/derived-member) has no binding of
	// the native-member policy: there the controller writes native names
	// as slices of the local Service, for the stock proxies.
	if err := m.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "multicluster.x-k8s.io-controller-native-member", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a derived member's controller to write a slice of the local Service named as its import", func() (bool, string) {
		err := localServiceSlice()
		return err == nil, errString(err)
	})
	// The policy on exportedAnnotations and exportedLabels refuses exactly
	// the keys the controller refuses (export.ReservedKey).
	for i, key := range []string{
		"tier", "example.com/team", "app.kubernetes.io/name", "app.kubernetes.io/managed-by",
		mcsproxy.AnnotationNativeNames, mcsproxy.AnnotationLocalFirstMinimum, export.AnnotationConsumerClusters, export.AnnotationProviderClusters,
		mcsproxy.AnnotationClusterSetIPs, mcsproxy.AnnotationDerivedService, mcsv1beta1.LabelServiceName, discoveryv1.LabelManagedBy,
		"multiclusterservices.k8s.io/future", "catalog.multiclusterservices.k8s.io/x", "service.kubernetes.io/service-proxy-name",
		"kubernetes.io/x", "k8s.io/x", "multicluster.x-k8s.io/x", "x-k8s.io/x", "notk8s.io/x", "example.com/k8s.io",
	} {
		for _, labels := range []bool{false, true} {
			se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("keys-%d", i)}}
			if labels {
				se.Spec.ExportedLabels = map[string]string{key: "x"}
			} else {
				se.Spec.ExportedAnnotations = map[string]string{key: "x"}
			}
			_, err := aliceMCS.MulticlusterV1beta1().ServiceExports("attacker").Create(ctx, se, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if refused, reserved := err != nil, export.ReservedKey(key); refused != reserved || refused && !deniedByPolicy(err) {
				t.Errorf("exporting key %q (labels %v): %v; the controller's ReservedKey says %v", key, labels, err, reserved)
			}
		}
	}
}

// ingressService is a Service selecting pods, labelled as the
// controller's, of type typ, saying which export it serves if forExport.
func ingressService(name string, typ v1.ServiceType, forExport bool) *v1.Service {
	labels := map[string]string{"app.kubernetes.io/managed-by": mcsproxy.DefaultManagedBy}
	if forExport {
		labels[export.LabelIngressFor] = "db"
	}
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.ServiceSpec{Type: typ, Selector: map[string]string{"app": "db"}, Ports: []v1.ServicePort{{Port: 80}}},
	}
}

// installAdmissionPolicies applies kind-config/mcs-admission-policy.yaml
// to m and waits until its apiserver enforces every policy in it: an
// administrator's ServiceImport is refused (only the controller writes
// imports) and so is the controller's Lease of another name (the
// controller's scope). The apiserver loads each policy and binding on its
// own, so one being enforced says nothing of the other.
func installAdmissionPolicies(t *testing.T, m *testMember) {
	t.Helper()
	ctx := context.Background()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(m.kube.Discovery()))
	dyn := dynamic.NewForConfigOrDie(m.cluster.RESTConfig())
	objs, err := kindconfig.Objects(repoPath(t, "kind-config", "mcs-admission-policy.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if err := kindconfig.Apply(ctx, dyn, mapper, obj, false); err != nil {
			t.Fatalf("applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	probe := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Port: 80}}},
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	eventually(t, 30*time.Second, "the import policy to be enforced in "+m.id, func() (bool, string) {
		_, err := m.mcs.MulticlusterV1beta1().ServiceImports("default").Create(ctx, probe, dryRun)
		return deniedByPolicy(err), errString(err)
	})
	// The controller's RBAC lets it write Leases in kube-system; only the
	// scope policy keeps it to its own.
	ctrlKube, _ := impersonate(t, m, controllerUser)
	// And the native-member policy keeps it from local Services' slices:
	// asked in a namespace where nothing else refuses such a slice (the
	// scope policy refuses it in default and the system namespaces, and
	// would answer for a binding not loaded yet), and answered by that
	// policy by name.
	const nativeMember = "multicluster.x-k8s.io-controller-native-member"
	if _, err := m.kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	local := slice("policy-probe", map[string]string{mcsv1beta1.LabelServiceName: "probe", mcsv1beta1.LabelSourceCluster: "cluster-a",
		discoveryv1.LabelManagedBy: mcsproxy.DefaultManagedBy, discoveryv1.LabelServiceName: "probe"})
	eventually(t, 30*time.Second, "the native-member policy to be enforced in "+m.id, func() (bool, string) {
		_, err := ctrlKube.DiscoveryV1().EndpointSlices("policy-probe").Create(ctx, local, dryRun)
		return deniedByPolicy(err) && strings.Contains(err.Error(), nativeMember), errString(err)
	})
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe"}}
	eventually(t, 30*time.Second, "the controller's scope policy to be enforced in "+m.id, func() (bool, string) {
		_, err := ctrlKube.CoordinationV1().Leases("kube-system").Create(ctx, lease, dryRun)
		return deniedByPolicy(err), errString(err)
	})
}

// deniedByPolicy tells whether err is a ValidatingAdmissionPolicy denial.
func deniedByPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
}

func slice(name string, labels map[string]string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.2.0.66"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
}

// impersonate returns clients acting as user, an authenticated user in
// groups with only the rights RBAC gives that name and those groups.
func impersonate(t *testing.T, m *testMember, user string, groups ...string) (kubernetes.Interface, mcsclientset.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", impersonateConfig(t, m.cluster, user, groups...))
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg), mcsclientset.NewForConfigOrDie(cfg)
}

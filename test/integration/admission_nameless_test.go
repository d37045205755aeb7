package integration

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestAdmissionPoliciesNamelessRequests runs the requests that reach
// admission without a name through every policy of
// kind-config/mcs-admission-policy.yaml against a real apiserver: a
// DeleteCollection admits each object it deletes under a request with
// no name, and a create with generateName is named only by the
// apiserver. Kubernetes' conformance suite deletes a collection of
// Services ("Services should delete a collection of services"), and the
// namespace controller deletes a namespace's objects by collection. A
// user's own objects go as they would without the policies; the
// controller's stay, refused as a delete of each would be.
func TestAdmissionPoliciesNamelessRequests(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	m := startMember(t, etcd, dir, "cluster-a")
	kcm, err := framework.StartControllerManager(ctx, m.cluster, framework.ControllerManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kcm.Stop)
	const ns = "team"
	createNamespace(t, m, ns)
	if _, err := m.kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "mcs-all"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports", "serviceexports"}, Verbs: []string{"*"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"services", "endpoints"}, Verbs: []string{"*"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-mcs"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "mcs-all"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "bob"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bobKube, bobMCS := impersonate(t, m, "bob")
	bobConfig, err := clientcmd.BuildConfigFromFlags("", impersonateConfig(t, m.cluster, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	ctrlKube, ctrlMCS := impersonate(t, m, controllerUser)
	installAdmissionPolicies(t, m)

	// What the controller wrote for an import of team/shared: the import,
	// a slice of it and its derived Service, each labelled set=all so that
	// bob's collection deletes below select them with his own.
	set := map[string]string{"set": "all"}
	with := func(a, b map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range a {
			out[k] = v
		}
		for k, v := range b {
			out[k] = v
		}
		return out
	}
	if _, err := ctrlMCS.MulticlusterV1beta1().ServiceImports(ns).Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Labels: with(set, map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy})},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.9"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mcsSlice := with(set, map[string]string{mcsv1beta1.LabelServiceName: "shared", mcsv1beta1.LabelSourceCluster: "cluster-a", discoveryv1.LabelManagedBy: mcsproxy.DefaultManagedBy})
	if _, err := ctrlKube.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice("shared-cluster-a", mcsSlice), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	derived := export.DerivedName(ns, "shared")
	if _, err := ctrlKube.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: derived, Labels: with(set, map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy, mcsv1beta1.LabelServiceName: "shared"})},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// bob's own objects, some of them named by the apiserver.
	userService := func(name, generate string, labels map[string]string) *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: generate, Labels: labels},
			Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []v1.ServicePort{{Port: 80}}},
		}
	}
	mine := map[string]string{"set": "mine"}
	for _, svc := range []*v1.Service{userService("web-1", "", with(mine, set)), userService("web-2", "", with(mine, set)), userService("", "web-", with(mine, set))} {
		if _, err := bobKube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("bob creates Service %s%s: %v", svc.Name, svc.GenerateName, err)
		}
	}
	plainSlice := slice("", with(mine, map[string]string{discoveryv1.LabelServiceName: "web-1", discoveryv1.LabelManagedBy: "bob"}))
	plainSlice.GenerateName = "web-1-"
	for range 2 {
		if _, err := bobKube.DiscoveryV1().EndpointSlices(ns).Create(ctx, plainSlice, metav1.CreateOptions{}); err != nil {
			t.Fatalf("bob creates a plain EndpointSlice by generateName: %v", err)
		}
	}

	// Creates named by the apiserver are held to the same rules as named
	// ones.
	forged := slice("", with(mcsSlice, map[string]string{discoveryv1.LabelManagedBy: "bob"}))
	forged.GenerateName = "shared-"
	if _, err := bobKube.DiscoveryV1().EndpointSlices(ns).Create(ctx, forged, metav1.CreateOptions{}); !deniedByPolicy(err) {
		t.Errorf("bob creates an MCS EndpointSlice by generateName: %v, want refused by an admission policy", err)
	}
	ctrlSlice := slice("", mcsSlice)
	ctrlSlice.GenerateName = "shared-"
	if _, err := ctrlKube.DiscoveryV1().EndpointSlices(ns).Create(ctx, ctrlSlice, metav1.CreateOptions{}); err != nil {
		t.Errorf("the controller creates an MCS EndpointSlice by generateName: %v", err)
	}
	if _, err := ctrlKube.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: "kube-scheduler-"}}, metav1.CreateOptions{}); !deniedByPolicy(err) {
		t.Errorf("the controller creates a Lease named kube-scheduler-* by generateName: %v, want refused by an admission policy", err)
	}
	if _, err := ctrlKube.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: "mcs-source-"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("the controller creates a Lease named mcs-source-* by generateName: %v", err)
	}

	// The conformance case: a user deletes a collection of his Services.
	mineSelector := metav1.ListOptions{LabelSelector: "set=mine"}
	if err := deleteServices(ctx, bobConfig, ns, mineSelector); err != nil {
		t.Errorf("bob deletes a collection of his Services: %v", err)
	}
	if err := bobKube.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, mineSelector); err != nil {
		t.Errorf("bob deletes a collection of his EndpointSlices: %v", err)
	}
	if svcs, _ := m.kube.CoreV1().Services(ns).List(ctx, mineSelector); len(svcs.Items) != 0 {
		t.Errorf("%d of bob's Services left after his collection delete", len(svcs.Items))
	}
	if slices, _ := m.kube.DiscoveryV1().EndpointSlices(ns).List(ctx, mineSelector); len(slices.Items) != 0 {
		t.Errorf("%d of bob's EndpointSlices left after his collection delete", len(slices.Items))
	}

	// Upstream's conformance case as upstream runs it: a cluster
	// administrator deletes a collection of selector-less Services.
	for _, name := range []string{"e2e-svc-a", "e2e-svc-b"} {
		if _, err := m.kube.CoreV1().Services(ns).Create(ctx, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e-test-service": "delete"}},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, Ports: []v1.ServicePort{{Name: "http", Port: 8001}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e2eSelector := metav1.ListOptions{LabelSelector: "e2e-test-service=delete"}
	if err := deleteServices(ctx, m.cluster.RESTConfig(), ns, e2eSelector); err != nil {
		t.Errorf("an administrator deletes a collection of Services (upstream's conformance case): %v", err)
	}
	if svcs, _ := m.kube.CoreV1().Services(ns).List(ctx, e2eSelector); len(svcs.Items) != 0 {
		t.Errorf("%d Services left after the administrator's collection delete", len(svcs.Items))
	}

	// A collection that holds the controller's objects: each is refused
	// as its own delete would be, and stays.
	all := metav1.ListOptions{LabelSelector: "set=all"}
	if err := deleteServices(ctx, bobConfig, ns, all); !deniedByPolicy(err) {
		t.Errorf("bob deletes a collection of Services holding a derived Service: %v, want refused by an admission policy", err)
	}
	if err := bobKube.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all); !deniedByPolicy(err) {
		t.Errorf("bob deletes a collection of EndpointSlices holding an MCS slice: %v, want refused by an admission policy", err)
	}
	if err := bobMCS.MulticlusterV1beta1().ServiceImports(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); !deniedByPolicy(err) {
		t.Errorf("bob deletes the collection of ServiceImports: %v, want refused by an admission policy", err)
	}
	if _, err := m.kube.CoreV1().Services(ns).Get(ctx, derived, metav1.GetOptions{}); err != nil {
		t.Errorf("the derived Service after bob's collection delete: %v", err)
	}
	if _, err := m.kube.DiscoveryV1().EndpointSlices(ns).Get(ctx, "shared-cluster-a", metav1.GetOptions{}); err != nil {
		t.Errorf("the MCS slice after bob's collection delete: %v", err)
	}
	if _, err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Get(ctx, "shared", metav1.GetOptions{}); err != nil {
		t.Errorf("the ServiceImport after bob's collection delete: %v", err)
	}

	// The namespace controller deletes everything of a namespace that
	// goes, the controller's objects too, by collection.
	if err := m.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "namespace "+ns+" to be deleted with everything in it", func() (bool, string) {
		got, err := m.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, conditionsString(got.Status.Conditions)
	})
}

// conditionsString says what a namespace's conditions say of what is
// left in it.
func conditionsString(conds []v1.NamespaceCondition) string {
	s := ""
	for _, c := range conds {
		if c.Status == v1.ConditionTrue {
			s += string(c.Type) + ": " + c.Message + "; "
		}
	}
	return s
}

// deleteServices deletes the collection of Services of ns that opts
// selects, with cfg, through the dynamic client, as upstream's
// conformance suite does (client-go's typed Services client has no
// DeleteCollection).
func deleteServices(ctx context.Context, cfg *rest.Config, ns string, opts metav1.ListOptions) error {
	return dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Version: "v1", Resource: "services"}).
		Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, opts)
}

package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/multiclusterservices/crds"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	catalogclientset "k8s.io/multiclusterservices/client/catalog/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/kindconfig"
)

// TestCatalogAPI checks the service catalog's API in a real hub: the
// CRDs' validation and printer columns, and least privilege for federated
// teams with deploy/catalog's RBAC: a team writes its own catalog objects
// and nothing else (not another team's, not their status, not the
// namespace annotation that says what it owns), and the controller writes
// only status.
func TestCatalogAPI(t *testing.T) {
	ctx := context.Background()
	hub := framework.StartTestCluster(t, framework.StartTestEtcd(t), framework.ClusterOptions{Name: "hub"})
	kube := hub.Client()
	catalogCRDs, err := crds.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(hub.RESTConfig()), catalogCRDs...); err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	objs, err := kindconfig.Objects(repoPath(t, "deploy", "catalog", "catalog-rbac.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := kindconfig.Apply(ctx, dynamic.NewForConfigOrDie(hub.RESTConfig()), mapper, o, false); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	for _, team := range []string{"team-a", "team-b"} {
		createHubNamespace(t, kube, team, map[string]string{catalogv1alpha1.AnnotationMemberNamespaces: "frontend"})
		if _, err := kube.RbacV1().RoleBindings(team).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "catalog-team"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "multicluster:catalog-team"},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: team}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	teamB := impersonateCatalog(t, hub, "bob", "team-b").CatalogV1alpha1()
	teamBKube := impersonateKube(t, hub, "bob", "team-b")
	controller := impersonateCatalog(t, hub, controllerUser).CatalogV1alpha1()
	admin := catalogclientset.NewForConfigOrDie(hub.RESTConfig()).CatalogV1alpha1()

	global := func(ns, name string) *catalogv1alpha1.GlobalService {
		return &catalogv1alpha1.GlobalService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	binding := func(ns, name string) *catalogv1alpha1.ServiceBinding {
		return &catalogv1alpha1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: catalogv1alpha1.ServiceBindingSpec{GlobalService: "authz", Cluster: "cluster-a",
				Service: &catalogv1alpha1.LocalName{Namespace: "frontend", Name: "authz"}}}
	}
	condition := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: "x", LastTransitionTime: metav1.Now()}
	}
	if _, err := admin.GlobalServices("team-a").Create(ctx, global("team-a", "authz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ServiceBindings("team-a").Create(ctx, binding("team-a", "authz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	attempts := []struct {
		what    string
		allowed bool
		invalid bool
		do      func() error
	}{
		{what: "team-b writes a global service, a binding and an import in its namespace", allowed: true, do: func() error {
			if _, err := teamB.GlobalServices("team-b").Create(ctx, global("team-b", "authz"), metav1.CreateOptions{}); err != nil {
				return err
			}
			if _, err := teamB.ServiceBindings("team-b").Create(ctx, binding("team-b", "authz"), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := teamB.GlobalServiceImports("team-b").Create(ctx, &catalogv1alpha1.GlobalServiceImport{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "authz-a"},
				Spec: catalogv1alpha1.GlobalServiceImportSpec{GlobalService: catalogv1alpha1.GlobalServiceRef{Namespace: "team-a", Name: "authz"},
					Cluster: "cluster-c", LocalName: catalogv1alpha1.LocalName{Namespace: "shop", Name: "authz-a"}}}, metav1.CreateOptions{})
			return err
		}},
		{what: "team-b binds under team-a's global service", do: func() error {
			_, err := teamB.ServiceBindings("team-a").Create(ctx, binding("team-a", "inject"), metav1.CreateOptions{})
			return err
		}},
		{what: "team-b changes team-a's binding", do: func() error {
			b, err := admin.ServiceBindings("team-a").Get(ctx, "authz", metav1.GetOptions{})
			if err != nil {
				return err
			}
			b.Spec.Cluster = "cluster-b"
			_, err = teamB.ServiceBindings("team-a").Update(ctx, b, metav1.UpdateOptions{})
			return err
		}},
		{what: "team-b writes the status of its own binding", do: func() error {
			b, err := teamB.ServiceBindings("team-b").Get(ctx, "authz", metav1.GetOptions{})
			if err != nil {
				return err
			}
			b.Status.Conditions = []metav1.Condition{condition("Ready", "Forged")}
			_, err = teamB.ServiceBindings("team-b").UpdateStatus(ctx, b, metav1.UpdateOptions{})
			return err
		}},
		{what: "team-b claims more member namespaces on its hub namespace", do: func() error {
			ns, err := teamBKube.CoreV1().Namespaces().Get(ctx, "team-b", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ns.Annotations[catalogv1alpha1.AnnotationMemberNamespaces] = "*"
			_, err = teamBKube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
			return err
		}},
		{what: "the controller writes a binding", do: func() error {
			_, err := controller.ServiceBindings("team-a").Create(ctx, binding("team-a", "by-controller"), metav1.CreateOptions{})
			return err
		}},
		{what: "the controller writes a binding's status", allowed: true, do: func() error {
			b, err := controller.ServiceBindings("team-a").Get(ctx, "authz", metav1.GetOptions{})
			if err != nil {
				return err
			}
			b.Status.Conditions = []metav1.Condition{condition("Valid", "Valid")}
			_, err = controller.ServiceBindings("team-a").UpdateStatus(ctx, b, metav1.UpdateOptions{})
			return err
		}},
		{what: "a binding with both a Service and endpoints", invalid: true, do: func() error {
			b := binding("team-b", "both")
			b.Spec.Endpoints = []catalogv1alpha1.BoundEndpoint{{Address: "192.0.2.1"}}
			b.Spec.Ports = []catalogv1alpha1.BoundPort{{Name: "http", Port: 80}}
			_, err := teamB.ServiceBindings("team-b").Create(ctx, b, metav1.CreateOptions{})
			return err
		}},
		{what: "a binding of endpoints without ports", invalid: true, do: func() error {
			b := binding("team-b", "portless")
			b.Spec.Service, b.Spec.Endpoints = nil, []catalogv1alpha1.BoundEndpoint{{Address: "192.0.2.1"}}
			_, err := teamB.ServiceBindings("team-b").Create(ctx, b, metav1.CreateOptions{})
			return err
		}},
		{what: "a global service with an unknown import policy", invalid: true, do: func() error {
			g := global("team-b", "odd")
			g.Spec.ImportPolicy = "Some"
			_, err := teamB.GlobalServices("team-b").Create(ctx, g, metav1.CreateOptions{})
			return err
		}},
	}
	for _, a := range attempts {
		err := a.do()
		switch {
		case a.allowed && err != nil:
			t.Errorf("%s: refused, want allowed: %v", a.what, err)
		case a.invalid && !apierrors.IsInvalid(err):
			t.Errorf("%s: %v, want refused as invalid", a.what, err)
		case !a.allowed && !a.invalid && !apierrors.IsForbidden(err):
			t.Errorf("%s: %v, want forbidden", a.what, err)
		}
	}
	// The default import policy is Selected: a service is imported only
	// where asked.
	g, err := admin.GlobalServices("team-a").Get(ctx, "authz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := g.Spec.ImportPolicy; p != catalogv1alpha1.ImportSelected {
		t.Errorf("default importPolicy %q", p)
	}
	// kubectl get shows the columns that matter.
	table := map[string]any{}
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/apis", catalogv1alpha1.GroupName, "v1alpha1", "namespaces", "team-a", "servicebindings").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var columns []string
	for _, c := range table["columnDefinitions"].([]any) {
		columns = append(columns, c.(map[string]any)["name"].(string))
	}
	if got := strings.Join(columns, ","); got != "Name,Global-Service,Cluster,Service,Ready,Reason,Age" {
		t.Errorf("kubectl get servicebindings columns: %s", got)
	}
}

func createHubNamespace(t *testing.T, kube kubernetes.Interface, name string, annotations map[string]string) {
	t.Helper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func impersonateConfig(t *testing.T, hub *framework.Cluster, user string, groups ...string) string {
	t.Helper()
	path, err := hub.ImpersonatingKubeconfig(user, append([]string{"system:authenticated"}, groups...))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func impersonateCatalog(t *testing.T, hub *framework.Cluster, user string, groups ...string) catalogclientset.Interface {
	t.Helper()
	return catalogclientset.NewForConfigOrDie(impersonateRESTConfig(t, hub, user, groups...))
}

func impersonateKube(t *testing.T, hub *framework.Cluster, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(impersonateRESTConfig(t, hub, user, groups...))
}

func impersonateRESTConfig(t *testing.T, hub *framework.Cluster, user string, groups ...string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", impersonateConfig(t, hub, user, groups...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

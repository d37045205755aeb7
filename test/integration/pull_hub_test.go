package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/crds"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/kindconfig"
)

// TestPullHubConfinesEachMember, an attack on pull mode's hub
// (deploy/hub-pull and each member's part, pull.MemberObjects): cluster-a's
// agent identity, which cluster-a's administrator holds, publishes its own
// exports (MemberExports), endpoints and Lease in its own namespace and
// reads the plan;
// it tries to write for cluster-b, to write the plan, to read what
// cluster-b publishes, to rename or widen itself (a namespace, a binding,
// another ServiceAccount's token) and to read Secrets. RBAC refuses every
// one; nothing of cluster-b's or of the plan changes.
func TestPullHubConfinesEachMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hub := startPullHub(t, framework.StartTestEtcd(t), "cluster-a", "cluster-b")
	agentA := fmt.Sprintf("system:serviceaccount:cluster-a:%s", pull.AgentServiceAccount)
	kubeA, mcsA := impersonate(t, hub, agentA, "system:serviceaccounts", "system:serviceaccounts:cluster-a")
	dynA := dynamic.NewForConfigOrDie(impersonateRESTConfig(t, hub.cluster, agentA, "system:serviceaccounts", "system:serviceaccounts:cluster-a"))
	hubDyn := dynamic.NewForConfigOrDie(hub.cluster.RESTConfig())
	memberExports := func(d dynamic.Interface, ns string) dynamic.ResourceInterface {
		return d.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("memberexports")).Namespace(ns)
	}
	memberClusters := func(d dynamic.Interface, ns string) dynamic.ResourceInterface {
		return d.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("memberclusters")).Namespace(ns)
	}
	servicePlans := func(d dynamic.Interface) dynamic.ResourceInterface {
		return d.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("serviceplans")).Namespace(pull.PlanNamespace)
	}

	// What cluster-b has published, and the plan, as the planner and
	// cluster-b's agent left them.
	if _, err := memberExports(hubDyn, "cluster-b").Create(ctx, publishedExport(t, "demo", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := servicePlans(hubDyn).Create(ctx, plannedService(t, "demo", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"cluster-b", pull.PlanNamespace} {
		if _, err := hub.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, publishedSlice("demo.web-b", "10.2.0.1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Its own part: allowed.
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("cluster-a's agent %s: %v, want it allowed", what, err)
		}
	}
	_, err := memberExports(dynA, "cluster-a").Create(ctx, publishedExport(t, "demo", "web"), metav1.CreateOptions{})
	must("publishes its export", err)
	_, err = kubeA.DiscoveryV1().EndpointSlices("cluster-a").Create(ctx, publishedSlice("demo.web-a", "10.1.0.1"), metav1.CreateOptions{})
	must("publishes its endpoints", err)
	_, err = kubeA.CoordinationV1().Leases("cluster-a").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "cluster-a"}}, metav1.CreateOptions{})
	must("renews its Lease", err)
	_, err = memberClusters(dynA, "cluster-a").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": hubv1alpha1.SchemeGroupVersion.String(), "kind": "MemberCluster",
		"metadata": map[string]any{"name": hubv1alpha1.MemberClusterName}, "spec": map[string]any{},
	}}, metav1.CreateOptions{})
	must("publishes its MemberCluster", err)
	_, err = servicePlans(dynA).List(ctx, metav1.ListOptions{})
	must("reads the plan's ServicePlans", err)
	_, err = kubeA.DiscoveryV1().EndpointSlices(pull.PlanNamespace).List(ctx, metav1.ListOptions{})
	must("reads the plan's slices", err)
	_, err = kubeA.CoordinationV1().Leases(pull.PlanNamespace).List(ctx, metav1.ListOptions{})
	must("reads the plan's Leases", err)

	// Everything else: forbidden.
	for what, try := range map[string]func() error{
		"publishes an export for cluster-b": func() error {
			_, err := memberExports(dynA, "cluster-b").Create(ctx, publishedExport(t, "demo", "evil"), metav1.CreateOptions{})
			return err
		},
		"sets the conditions of its own export (the planner's, in the plan)": func() error {
			_, err := servicePlans(dynA).Patch(ctx, pull.PlanName("demo", "web"), types.MergePatchType,
				[]byte(`{"spec":{"exportConditions":[{"clusters":["cluster-a"],"conditions":[{"type":"Valid","status":"True","reason":"Forged"}]}]}}`), metav1.PatchOptions{})
			return err
		},
		"names the Services the catalog binds in its own MemberCluster (the planner's status), to publish Services nobody bound": func() error {
			_, err := memberClusters(dynA, "cluster-a").Patch(ctx, hubv1alpha1.MemberClusterName, types.MergePatchType,
				[]byte(`{"status":{"boundServices":[{"namespace":"kube-system","name":"kube-dns"}]}}`), metav1.PatchOptions{}, "status")
			return err
		},
		"rewrites cluster-b's export": func() error {
			_, err := memberExports(dynA, "cluster-b").Patch(ctx, "demo.web", types.MergePatchType, []byte(`{"spec":{"exportedLabels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		},
		"writes a ServiceExport on the hub, which a hub doubling as a member would serve": func() error {
			_, err := mcsA.MulticlusterV1beta1().ServiceExports("cluster-a").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
			return err
		},
		"writes a ServiceImport on the hub": func() error {
			_, err := mcsA.MulticlusterV1beta1().ServiceImports("cluster-a").Create(ctx, publishedImport("web"), metav1.CreateOptions{})
			return err
		},
		"publishes endpoints for cluster-b": func() error {
			_, err := kubeA.DiscoveryV1().EndpointSlices("cluster-b").Create(ctx, publishedSlice("demo.web-evil", "10.1.0.66"), metav1.CreateOptions{})
			return err
		},
		"deletes cluster-b's published export": func() error {
			return memberExports(dynA, "cluster-b").Delete(ctx, "demo.web", metav1.DeleteOptions{})
		},
		"renews cluster-b's Lease": func() error {
			_, err := kubeA.CoordinationV1().Leases("cluster-b").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "cluster-b"}}, metav1.CreateOptions{})
			return err
		},
		"reads what cluster-b publishes": func() error {
			_, err := kubeA.DiscoveryV1().EndpointSlices("cluster-b").List(ctx, metav1.ListOptions{})
			return err
		},
		"writes the plan's slices": func() error {
			_, err := kubeA.DiscoveryV1().EndpointSlices(pull.PlanNamespace).Create(ctx, publishedSlice("demo.web-evil", "10.1.0.66"), metav1.CreateOptions{})
			return err
		},
		"deletes the plan of a name": func() error {
			return servicePlans(dynA).Delete(ctx, "demo.web", metav1.DeleteOptions{})
		},
		"rewrites the plan of a name": func() error {
			_, err := servicePlans(dynA).Patch(ctx, "demo.web", types.MergePatchType, []byte(`{"spec":{"import":{"spec":{"ips":["10.250.0.66"]}}}}`), metav1.PatchOptions{})
			return err
		},
		"writes a ServiceImport into the plan's namespace": func() error {
			_, err := mcsA.MulticlusterV1beta1().ServiceImports(pull.PlanNamespace).Create(ctx, publishedImport("demo.evil"), metav1.CreateOptions{})
			return err
		},
		"creates the namespace of a cluster ID it would take": func() error {
			_, err := kubeA.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-c"}}, metav1.CreateOptions{})
			return err
		},
		"relabels its namespace as another cluster's": func() error {
			_, err := kubeA.CoreV1().Namespaces().Patch(ctx, "cluster-a", "application/merge-patch+json",
				[]byte(`{"metadata":{"labels":{"`+pull.LabelMemberCluster+`":"cluster-b"}}}`), metav1.PatchOptions{})
			return err
		},
		"binds itself into cluster-b's namespace": func() error {
			_, err := kubeA.RbacV1().RoleBindings("cluster-a").Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "widen"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: pull.AgentServiceAccount, Namespace: "cluster-a"}},
			}, metav1.CreateOptions{})
			return err
		},
		"mints a token for cluster-b's agent": func() error {
			_, err := kubeA.CoreV1().ServiceAccounts("cluster-b").CreateToken(ctx, pull.AgentServiceAccount, nil, metav1.CreateOptions{})
			return err
		},
		"creates a ServiceAccount of its own choosing": func() error {
			_, err := kubeA.CoreV1().ServiceAccounts("cluster-a").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
			return err
		},
		"reads Secrets in its own namespace": func() error {
			_, err := kubeA.CoreV1().Secrets("cluster-a").List(ctx, metav1.ListOptions{})
			return err
		},
		"runs a pod in its own namespace": func() error {
			_, err := kubeA.CoreV1().Pods("cluster-a").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("cluster-a's agent %s: %v, want Forbidden", what, err)
		}
	}

	// Nothing of cluster-b's or of the plan changed.
	if me, err := memberExports(hubDyn, "cluster-b").Get(ctx, "demo.web", metav1.GetOptions{}); err != nil {
		t.Errorf("cluster-b's export: %v", err)
	} else if labels, _, _ := unstructured.NestedStringMap(me.Object, "spec", "exportedLabels"); len(labels) > 0 {
		t.Errorf("cluster-b's export has exportedLabels %v, want none", labels)
	}
	if sp, err := servicePlans(hubDyn).Get(ctx, "demo.web", metav1.GetOptions{}); err != nil {
		t.Errorf("the plan of demo/web: %v", err)
	} else if ips, _, _ := unstructured.NestedStringSlice(sp.Object, "spec", "import", "spec", "ips"); !slices.Equal(ips, []string{"10.250.0.7"}) {
		t.Errorf("the plan of demo/web has clusterset IPs %v, want 10.250.0.7", ips)
	}
	for _, ns := range []string{"cluster-b", pull.PlanNamespace} {
		slices, err := hub.kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(slices.Items) != 1 || slices.Items[0].Name != "demo.web-b" {
			t.Errorf("%s's slices: %v %v, want demo.web-b alone", ns, slices, err)
		}
	}
	if ns, err := hub.kube.CoreV1().Namespaces().Get(ctx, "cluster-a", metav1.GetOptions{}); err != nil || ns.Labels[pull.LabelMemberCluster] != "cluster-a" {
		t.Errorf("cluster-a's namespace: %v %v", ns.Labels, err)
	}

	// A flood: cluster-a's agent publishes exports and slices until its
	// namespace's quota refuses; cluster-b publishes on as before.
	flood := func(what string, limit int64, create func(i int) error) {
		t.Helper()
		var refused error
		for i := 0; i <= int(limit) && refused == nil; i++ {
			refused = create(i)
		}
		if !apierrors.IsForbidden(refused) || !strings.Contains(refused.Error(), "exceeded quota") {
			t.Errorf("cluster-a's agent publishing %s without end: %v, want refused by its quota of %d", what, refused, limit)
		}
	}
	flood("exports", testMemberLimits.Exports, func(i int) error {
		_, err := memberExports(dynA, "cluster-a").Create(ctx, publishedExport(t, "flood", fmt.Sprintf("svc-%d", i)), metav1.CreateOptions{})
		return err
	})
	flood("EndpointSlices", testMemberLimits.EndpointSlices, func(i int) error {
		_, err := kubeA.DiscoveryV1().EndpointSlices("cluster-a").Create(ctx, publishedSlice(fmt.Sprintf("flood.svc-%d", i), "10.1.0.1"), metav1.CreateOptions{})
		return err
	})
	if list, err := memberExports(hubDyn, "cluster-a").List(ctx, metav1.ListOptions{}); err != nil || int64(len(list.Items)) != testMemberLimits.Exports {
		t.Errorf("cluster-a's exports after the flood: %v, want its quota of %d", err, testMemberLimits.Exports)
	}
	agentB := fmt.Sprintf("system:serviceaccount:cluster-b:%s", pull.AgentServiceAccount)
	dynB := dynamic.NewForConfigOrDie(impersonateRESTConfig(t, hub.cluster, agentB, "system:serviceaccounts", "system:serviceaccounts:cluster-b"))
	if _, err := memberExports(dynB, "cluster-b").Create(ctx, publishedExport(t, "demo", "after-the-flood"), metav1.CreateOptions{}); err != nil {
		t.Errorf("cluster-b's agent publishing after cluster-a's flood: %v", err)
	}
}

// startPullHub starts pull mode's hub as its operator sets it up: the
// MemberExport CRD and deploy/hub-pull's namespace and roles, then each
// member's part (pull.MemberObjects) applied as the operator applies what
// kubectl mcs hub member prints.
func startPullHub(t *testing.T, etcd *framework.Etcd, ids ...string) *testMember {
	t.Helper()
	ctx := context.Background()
	hub := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "hub"}), "hub")
	hubCRDs, err := crds.Hub()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(hub.cluster.RESTConfig()), hubCRDs...); err != nil {
		t.Fatal(err)
	}
	applyRBAC(t, hub.kube, repoPath(t, "deploy", "hub-pull", "hub.yaml"))
	dyn := dynamic.NewForConfigOrDie(hub.cluster.RESTConfig())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(hub.kube.Discovery()))
	for _, id := range ids {
		objs, err := pull.MemberObjects(id, testMemberLimits)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := kindconfig.Apply(ctx, dyn, mapper, &unstructured.Unstructured{Object: u}, false); err != nil {
				t.Fatal(err)
			}
			// No kube-controller-manager runs here: its quota
			// controller's first sync (the limits, nothing used yet),
			// done by hand. From then on the apiserver's admission
			// counts every object created.
			if q, ok := o.(*v1.ResourceQuota); ok {
				got, err := hub.kube.CoreV1().ResourceQuotas(id).Get(ctx, q.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got.Status.Hard = q.Spec.Hard
				got.Status.Used = v1.ResourceList{}
				for name := range q.Spec.Hard {
					got.Status.Used[name] = resource.MustParse("0")
				}
				if _, err := hub.kube.CoreV1().ResourceQuotas(id).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return hub
}

// testMemberLimits bound each member of a test hub: more than any test
// publishes, few enough to exceed.
var testMemberLimits = pull.MemberLimits{Exports: 8, EndpointSlices: 16}

// TestPullMemberObjects: a member's part names its namespace after its
// cluster ID, and a cluster ID that is not a namespace of its own is
// refused.
func TestPullMemberObjects(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "Cluster-A", "a.b", "default", "mcs-plan", "mcs-system", "kube-system", "kube-anything", strings.Repeat("a", 64)} {
		if _, err := pull.MemberObjects(bad, pull.DefaultMemberLimits); err == nil {
			t.Errorf("MemberObjects(%q) is accepted, want refused", bad)
		}
	}
	if _, err := pull.MemberObjects("cluster-a", pull.MemberLimits{Exports: 10}); err == nil {
		t.Error("a member allowed no EndpointSlices is accepted, want refused")
	}
	objs, err := pull.MemberObjects("cluster-a", pull.DefaultMemberLimits)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		meta := m["metadata"].(map[string]any)
		kinds = append(kinds, fmt.Sprintf("%s %v/%v", o.GetObjectKind().GroupVersionKind().Kind, meta["namespace"], meta["name"]))
	}
	if got, want := strings.Join(kinds, ", "), "Namespace <nil>/cluster-a, ServiceAccount cluster-a/mcs-member-agent, RoleBinding cluster-a/mcs-member-agent, RoleBinding mcs-plan/mcs-member-agent-cluster-a, ResourceQuota cluster-a/mcs-member-agent"; got != want {
		t.Errorf("cluster-a's part: %s, want %s", got, want)
	}
}

// publishedExport is a MemberExport of namespace/name, as an agent
// publishes it.
func publishedExport(t *testing.T, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	me := pull.PublishExport(pull.Source{
		Export:  &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: metav1.Now()}},
		Service: &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}}},
	})
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(me)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: u}
}

// plannedService is the plan of namespace/name as the planner writes it.
func plannedService(t *testing.T, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	sp := &hubv1alpha1.ServicePlan{
		TypeMeta:   metav1.TypeMeta{APIVersion: hubv1alpha1.SchemeGroupVersion.String(), Kind: "ServicePlan"},
		ObjectMeta: metav1.ObjectMeta{Name: pull.MemberExportName(namespace, name)},
		Spec: hubv1alpha1.ServicePlanSpec{
			Service: hubv1alpha1.ServiceName{Namespace: namespace, Name: name},
			Import:  &hubv1alpha1.PlannedImport{Spec: publishedImport(name).Spec},
		},
	}
	sp.Spec.Import.Spec.IPs = []string{"10.250.0.7"}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sp)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: u}
}

func publishedImport(name string) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
}

func publishedSlice(name, addr string) *discoveryv1.EndpointSlice {
	port, proto := int32(8080), v1.ProtocolTCP
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelManagedBy: "mcs-member-agent"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
	}
}

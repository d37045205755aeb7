package e2e

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crds"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/kindconfig"
)

// TestKindProviderAgainstAPIServer runs what the kind provider does
// through the API against a real kube-apiserver holding what
// hack/kind-e2e.sh installs (kind-config/ filled in as the script fills
// it, plus the Nodes and kube-dns Service kind makes): Docker cannot run
// here, so the parts that need it (docker exec, pod exec) are the only
// ones left for a machine with Docker.
func TestKindProviderAgainstAPIServer(t *testing.T) {
	runBeside(t)
	requireBuilt(t, "etcd", "kube-apiserver")
	ctx := t.Context()
	cluster := framework.StartTestCluster(t, framework.StartTestEtcd(t), framework.ClusterOptions{Name: "mcs-b"})
	client := cluster.Client()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(cluster.RESTConfig()), all...); err != nil {
		t.Fatal(err)
	}
	// What kubeadm and kind make before the script runs.
	_, _ = client.CoreV1().ServiceAccounts("kube-system").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy"}}, metav1.CreateOptions{})
	dns, err := client.CoreV1().Services("kube-system").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns"},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"k8s-app": "kube-dns"}, Ports: []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct {
		name  string
		cp    bool
		ready bool
	}{{"mcs-b-control-plane", true, true}, {"mcs-b-worker", false, true}, {"mcs-b-worker2", false, false}} {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"kubernetes.io/hostname": n.name}}}
		if n.cp {
			node.Labels["node-role.kubernetes.io/control-plane"] = ""
		}
		created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status := v1.ConditionFalse
		if n.ready {
			status = v1.ConditionTrue
		}
		created.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What the script applies, filled in as it fills it for mcs-b.
	dyn := dynamic.NewForConfigOrDie(cluster.RESTConfig())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	values := map[string]string{"CLUSTER": "mcs-b", "POD_SUBNET": "10.102.0.0/16", "KUBECONFIG_B64": "e30K"}
	for _, manifest := range []string{"clusterproperty.yaml", "kube-proxy.yaml", "kube-proxy-daemonset.yaml", "mcs-controller-deployment.yaml", "mcs-controller.yaml"} {
		// go test runs in the package's directory.
		objs, err := kindconfig.Objects(filepath.Join("..", "..", "kind-config", manifest), values)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			if err := kindconfig.Apply(ctx, dyn, mapper, obj, false); err != nil {
				t.Fatalf("%s: %s %s: %v", manifest, obj.GetKind(), obj.GetName(), err)
			}
		}
	}

	m, controlPlane, err := kindMember(ctx, cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := member{Name: "mcs-b", DNSIP: dns.Spec.ClusterIP, PodCIDR: "10.102.0.0/16", Node: "mcs-b-worker"}
	if got := (member{Name: m.Name, DNSIP: m.DNSIP, PodCIDR: m.PodCIDR, Node: m.Node}); got != want {
		t.Errorf("member read from the cluster: %+v, want %+v", got, want)
	}
	if controlPlane != "mcs-b-control-plane" {
		t.Errorf("control-plane node %q, want mcs-b-control-plane", controlPlane)
	}
	if ttl, ok, err := deploymentTTL(ctx, client, "mcs-controller"); err != nil || !ok || ttl != 40*time.Second {
		t.Errorf("the controller Deployment's endpoint TTL: %v %v %v, want 40s", ttl, ok, err)
	}

	t.Run("kube-proxy hold and release", func(t *testing.T) {
		ds := client.AppsV1().DaemonSets("kube-system")
		before, err := ds.Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		held, err := ds.Patch(ctx, "kube-proxy", types.StrategicMergePatchType, holdKubeProxyPatch(m.Node), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		terms := held.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		wantTerm := v1.NodeSelectorRequirement{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpNotIn, Values: []string{m.Node}}
		if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || !reflect.DeepEqual(terms[0].MatchExpressions[0], wantTerm) {
			t.Errorf("held DaemonSet's affinity: %+v, want only %+v", terms, wantTerm)
		}
		released, err := ds.Patch(ctx, "kube-proxy", types.StrategicMergePatchType, releaseKubeProxyPatch, metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(released.Spec.Template, before.Spec.Template) {
			t.Errorf("the released DaemonSet's template differs from the original:\n%+v\n%+v", released.Spec.Template.Spec, before.Spec.Template.Spec)
		}
	})

	t.Run("gate-off pods and their permissions", func(t *testing.T) {
		ns := "e2e-gateoff"
		if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		upstream, err := upstreamKubeProxyImage()
		if err != nil {
			t.Fatal(err)
		}
		sa, crb, pods := gateOffObjects(ns, m, "e2e-extra-node", "mcs-kube-proxy:dev", upstream)
		if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if got := pods[1].Spec.Containers[0].Image; got != "registry.k8s.io/kube-proxy:v1.37.2" {
			t.Errorf("upstream kube-proxy image %q, want the pinned version's", got)
		}
		// What kube-proxy reads, the way it reads it.
		user := "system:serviceaccount:" + ns + ":" + sa.Name
		for _, attr := range []authorizationv1.ResourceAttributes{
			{Verb: "list", Resource: "services"}, {Verb: "watch", Resource: "services"},
			{Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}, {Verb: "watch", Group: "discovery.k8s.io", Resource: "endpointslices"},
			{Verb: "get", Resource: "nodes", Name: "e2e-extra-node"}, {Verb: "list", Resource: "nodes"}, {Verb: "watch", Resource: "nodes"},
			{Verb: "create", Group: "events.k8s.io", Resource: "events"},
		} {
			review, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts"}, ResourceAttributes: &attr},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !review.Status.Allowed {
				t.Errorf("%s may not %s %s.%s: %s", user, attr.Verb, attr.Resource, attr.Group, review.Status.Reason)
			}
		}
	})

	t.Run("case pods", func(t *testing.T) {
		if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*v1.Pod{echoPod("web-1", "web"), clientPod("client"), statefulPod("db-0", "db-0", "db")} {
			if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Errorf("pod %s: %v", p.Name, err)
			}
		}
	})

	// The cluster ID comes from the ClusterProperty, not the context name.
	cp := &unstructured.Unstructured{}
	cp.SetAPIVersion(aboutv1alpha1.SchemeGroupVersion.String())
	cp.SetKind("ClusterProperty")
	cp.SetName(aboutv1alpha1.ClusterIDProperty)
	if err := unstructured.SetNestedField(cp.Object, "renamed", "spec", "value"); err != nil {
		t.Fatal(err)
	}
	if err := kindconfig.Apply(ctx, dyn, mapper, cp, false); err != nil {
		t.Fatal(err)
	}
	if m, _, err := kindMember(ctx, cluster.RESTConfig()); err != nil || m.Name != "renamed" {
		t.Errorf("after the ClusterProperty changed: %v %v, want the name renamed", m, err)
	}
}

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// holdKubeProxyPatch keeps the kube-proxy DaemonSet off node (a required
// node affinity); releaseKubeProxyPatch lets it back.
func holdKubeProxyPatch(node string) []byte {
	return fmt.Appendf(nil, `{"spec":{"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":`+
		`{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/hostname","operator":"NotIn","values":[%q]}]}]}}}}}}}`, node)
}

var releaseKubeProxyPatch = []byte(`{"spec":{"template":{"spec":{"affinity":null}}}}`)

// stopKubeProxy keeps the DaemonSet's pod off the node: the kubelet stops
// it (kube-proxy leaves its rules on exit, as after a crash) and nothing
// restarts it until the affinity goes. The template change also rolls the
// other nodes' kube-proxy, which the cases do not look at.
func (k *kind) stopKubeProxy(t *testing.T, m *member, node string) func(*testing.T) {
	t.Helper()
	ds := m.Client.AppsV1().DaemonSets("kube-system")
	if _, err := ds.Patch(t.Context(), "kube-proxy", types.StrategicMergePatchType, holdKubeProxyPatch(node), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, the node gets its kube-proxy back.
	t.Cleanup(func() {
		_, _ = ds.Patch(context.Background(), "kube-proxy", types.StrategicMergePatchType, releaseKubeProxyPatch, metav1.PatchOptions{})
	})
	k.waitKubeProxy(t, m, node, false)
	return func(t *testing.T) {
		if _, err := ds.Patch(t.Context(), "kube-proxy", types.StrategicMergePatchType, releaseKubeProxyPatch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		k.waitKubeProxy(t, m, node, true)
	}
}

// waitKubeProxy waits until node has a Ready kube-proxy pod (running) or
// none at all.
func (k *kind) waitKubeProxy(t *testing.T, m *member, node string, running bool) {
	t.Helper()
	eventually(t, 120*time.Second, fmt.Sprintf("kube-proxy on %s running=%v", node, running), func() (bool, string) {
		pods, err := m.Client.CoreV1().Pods("kube-system").List(t.Context(), metav1.ListOptions{
			LabelSelector: "k8s-app=kube-proxy", FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err.Error()
		}
		if !running {
			return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodReady && c.Status == v1.ConditionTrue && p.DeletionTimestamp == nil {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d pods, none Ready", len(pods.Items))
	})
}

// stopAPIServer moves the static pod's manifest away: the kubelet stops
// kube-apiserver, and starts it again when the manifest comes back.
func (k *kind) stopAPIServer(t *testing.T, m *member) func(*testing.T) {
	t.Helper()
	node := k.controlPlane[m]
	const manifest, parked = "/etc/kubernetes/manifests/kube-apiserver.yaml", "/etc/kubernetes/kube-apiserver.yaml.e2e-stopped"
	if out, err := k.nodeExec(t.Context(), m, node, "mv", manifest, parked); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	restore := func() ([]byte, error) {
		return k.nodeExec(context.Background(), m, node, "sh", "-c", fmt.Sprintf("test -e %[1]s || mv %[2]s %[1]s", manifest, parked))
	}
	t.Cleanup(func() { _, _ = restore() })
	waitAPI(t, m, false, 120*time.Second)
	return func(t *testing.T) {
		if out, err := restore(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		waitAPI(t, m, true, 180*time.Second)
	}
}

// gateOffObjects are what the gate-off case runs on kind: both
// kube-proxies as privileged pods with a network namespace of their own
// (not hostNetwork), as the Node node, with a ServiceAccount bound to
// system:node-proxier as kubeadm binds kube-proxy's.
func gateOffObjects(ns string, m *member, node, image, upstreamImage string) (*v1.ServiceAccount, *rbacv1.ClusterRoleBinding, []*v1.Pod) {
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: ns}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-kube-proxy", Labels: map[string]string{caseLabel: "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	privileged := true
	pod := func(name, image string, extra ...string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1.PodSpec{
				ServiceAccountName: sa.Name,
				Containers: []v1.Container{{
					Name: "kube-proxy", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
					Command:         append(append([]string{"/usr/local/bin/kube-proxy"}, gateOffArgs(m, node)...), extra...),
					SecurityContext: &v1.SecurityContext{Privileged: &privileged},
				}},
			},
		}
	}
	return sa, crb, []*v1.Pod{
		pod("kube-proxy-gate-off", image, "--feature-gates=MultiClusterServices=false"),
		pod("kube-proxy-upstream", upstreamImage),
	}
}

func (k *kind) startGateOff(t *testing.T, m *member, ns, node string) (gateOff, upstream func(context.Context) (string, error)) {
	t.Helper()
	sa, crb, pods := gateOffObjects(ns, m, node, k.kubeProxyImage, k.upstreamImage)
	if _, err := m.Client.CoreV1().ServiceAccounts(ns).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Client.RbacV1().ClusterRoleBindings().Create(t.Context(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	var names []string
	for _, p := range pods {
		if _, err := m.Client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	if _, err := clusterset.WaitPodsReady(t.Context(), m.Client, m.Name, 180*time.Second, ns, names...); err != nil {
		t.Fatal(err)
	}
	reader := func(name string) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			out, err := podExec(ctx, m, ns, name, "kube-proxy", "nft", "list", "ruleset")
			return string(out), err
		}
	}
	return reader(pods[0].Name), reader(pods[1].Name)
}

// stopController scales the mcs-controller Deployment (mcs-system, in the
// member that runs it) to zero until its pods are gone, and returns what
// scales it back and waits until it is available. In pull mode it stops
// what writes into the members: the planner in the hub and every member's
// agent.
func (k *kind) stopController(t *testing.T) func(*testing.T) {
	t.Helper()
	if k.hub == nil {
		m, _, _ := k.controllerDeployment(t)
		return scaleToZero(t, m, "mcs-controller")
	}
	starts := []func(*testing.T){scaleToZero(t, k.hub, "mcs-planner")}
	for _, m := range k.ms {
		starts = append(starts, scaleToZero(t, m, "mcs-member-agent"))
	}
	return func(t *testing.T) {
		for _, start := range starts {
			start(t)
		}
	}
}

// scaleToZero scales the Deployment mcs-system/name of m to zero until its
// pods (labelled app=name) are gone, and returns what scales it back and
// waits until a replica is ready. The clean-up scales it back whatever
// happens.
func scaleToZero(t *testing.T, m *member, name string) func(*testing.T) {
	t.Helper()
	deployments := m.Client.AppsV1().Deployments("mcs-system")
	d, err := deployments.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: %v", m.Name, err)
	}
	replicas := *d.Spec.Replicas
	scale := func(ctx context.Context, n int32) error {
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		_, err := deployments.Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	if err := scale(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = scale(context.Background(), replicas) })
	eventually(t, 120*time.Second, fmt.Sprintf("%s's %s pods to go", m.Name, name), func() (bool, string) {
		pods, err := m.Client.CoreV1().Pods("mcs-system").List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
		return err == nil && len(pods.Items) == 0, errString(err)
	})
	return func(t *testing.T) {
		if err := scale(t.Context(), replicas); err != nil {
			t.Fatal(err)
		}
		// The cases need a leader serving: a ready replica. Whether
		// every replica becomes available is
		// TestKindClusterControllerDeploymentAvailable's question.
		eventually(t, 120*time.Second, fmt.Sprintf("a replica of %s's %s to be ready", m.Name, name), func() (bool, string) {
			d, err := deployments.Get(t.Context(), name, metav1.GetOptions{})
			return err == nil && d.Status.ReadyReplicas >= 1, errString(err)
		})
	}
}

// controllerDeployment finds the member that runs the mcs-controller
// Deployment mcs-system/mcs-controller, and returns it with its
// Deployments client and the Deployment as it is now.
func (k *kind) controllerDeployment(t *testing.T) (*member, appsv1client.DeploymentInterface, *appsv1.Deployment) {
	t.Helper()
	for _, m := range k.ms {
		deployments := m.Client.AppsV1().Deployments("mcs-system")
		if d, err := deployments.Get(t.Context(), "mcs-controller", metav1.GetOptions{}); err == nil {
			return m, deployments, d
		}
	}
	t.Fatal("no member runs the mcs-controller Deployment mcs-system/mcs-controller")
	return nil, nil, nil
}

func (k *kind) kubeconfig() (string, []string) {
	return os.Getenv("MCS_E2E_KUBECONFIG"), slices.Clone(k.contexts)
}

// diagnoseFlags are, in pull mode, the hub's context (where the sources'
// agent Leases are) and the planner's endpoint TTL; none in push mode.
func (k *kind) diagnoseFlags() []string {
	if k.hub == nil {
		return nil
	}
	return []string{"--hub-context=" + k.hubContext, "--endpoint-ttl=" + k.ttl.String()}
}

// configureController adds extra to the arguments of the mcs-controller
// Deployment (in pull mode the planner's, which takes the controller's
// planning flags) and waits until its pods run them; the clean-up puts the
// arguments back.
func (k *kind) configureController(t *testing.T, extra ...string) {
	t.Helper()
	name := "mcs-controller"
	var deployments appsv1client.DeploymentInterface
	var d *appsv1.Deployment
	if k.hub == nil {
		_, deployments, d = k.controllerDeployment(t)
	} else {
		name, deployments = "mcs-planner", k.hub.Client.AppsV1().Deployments("mcs-system")
		var err error
		if d, err = deployments.Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := slices.Clone(d.Spec.Template.Spec.Containers[0].Args)
	setArgs := func(ctx context.Context, args []string) {
		eventually(t, 30*time.Second, "the "+name+" Deployment's arguments set", func() (bool, string) {
			d, err := deployments.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			d.Spec.Template.Spec.Containers[0].Args = args
			_, err = deployments.Update(ctx, d, metav1.UpdateOptions{})
			return err == nil, errString(err)
		})
		eventually(t, 180*time.Second, "the "+name+" Deployment rolled out", func() (bool, string) {
			d, err := deployments.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			want := *d.Spec.Replicas
			s := d.Status
			return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.ReadyReplicas >= 1, fmt.Sprintf("%+v", s)
		})
	}
	setArgs(t.Context(), append(slices.Clone(before), extra...))
	t.Cleanup(func() { setArgs(context.Background(), before) })
}

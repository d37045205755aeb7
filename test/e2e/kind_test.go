package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	controllerapp "github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// kind is a clusterset of kind clusters set up by hack/kind-e2e.sh: the
// kube-proxy DaemonSet of kind-config/kube-proxy.yaml, CoreDNS, the
// mcs-controller Deployment, and the echoserver image loaded in every
// node. Pods are containers: the client runs in them by exec; nodes are
// Docker containers: commands run there with docker exec.
//
//	MCS_E2E_PROVIDER=kind
//	MCS_E2E_CONTEXTS=kind-mcs-b,kind-mcs-a   cluster a, cluster b (a must not hold the controller's Lease)
//	                                          [,kind-mcs-c: the derived member of TestDerivedMember]
//	MCS_E2E_KUBECONFIG=...                    default: $KUBECONFIG or ~/.kube/config
//	MCS_E2E_KUBE_PROXY_IMAGE=mcs-kube-proxy:dev
type kind struct {
	ms []*member
	// controlPlane is each member's control-plane node (its container).
	controlPlane map[*member]string
	ttl          time.Duration
	// kubeProxyImage is this project's image; upstreamImage upstream's of
	// the pinned version, the base it is built on.
	kubeProxyImage, upstreamImage string
	// contexts are the members' kubeconfig contexts, in their order.
	contexts []string
}

func connectKind(t *testing.T) *kind {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("MCS_E2E_PROVIDER=kind needs docker: %v", err)
	}
	contexts := strings.Split(os.Getenv("MCS_E2E_CONTEXTS"), ",")
	if len(contexts) < 2 || len(contexts) > 3 || slices.Contains(contexts, "") {
		t.Fatalf("MCS_E2E_CONTEXTS=%q: want two or three kubeconfig contexts, cluster a, cluster b, and the derived member", os.Getenv("MCS_E2E_CONTEXTS"))
	}
	k := &kind{
		controlPlane:   map[*member]string{},
		kubeProxyImage: envOr("MCS_E2E_KUBE_PROXY_IMAGE", "mcs-kube-proxy:dev"),
		contexts:       contexts,
		ttl:            controllerapp.NewOptions().EndpointTTL,
	}
	var err error
	if k.upstreamImage, err = upstreamKubeProxyImage(); err != nil {
		t.Fatal(err)
	}
	for _, name := range contexts {
		config, err := contextConfig(os.Getenv("MCS_E2E_KUBECONFIG"), name)
		if err != nil {
			t.Fatal(err)
		}
		m, controlPlane, err := kindMember(t.Context(), config)
		if err != nil {
			t.Fatalf("context %s: %v", name, err)
		}
		k.ms = append(k.ms, m)
		k.controlPlane[m] = controlPlane
		if ttl, ok, err := controllerTTL(t.Context(), m.Client); err != nil {
			t.Fatalf("context %s: %v", name, err)
		} else if ok {
			k.ttl = ttl
		}
	}
	// Namespaces of an earlier run would hold old exports and imports.
	for _, m := range k.ms {
		deleteCaseNamespaces(t, m, true)
		t.Cleanup(func() { deleteCaseNamespaces(t, m, false) })
	}
	return k
}

// connectKindDerived connects to the clusters of TestDerivedMember: a and
// b run this project's kube-proxy, the third keeps kubeadm's kube-proxy
// DaemonSet with the stock upstream image and no MultiClusterServices gate
// (hack/kind-e2e.sh's mcs-c), and the controller serves it in derived
// mode.
func connectKindDerived(t *testing.T) *kind {
	t.Helper()
	k := connectKind(t)
	if len(k.ms) != 3 {
		t.Fatalf("MCS_E2E_CONTEXTS=%q: the derived suite wants three contexts, the third the derived member", os.Getenv("MCS_E2E_CONTEXTS"))
	}
	for i, m := range k.ms {
		image, gate, err := kubeProxyOf(t.Context(), m)
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if derived := i == 2; derived != (image == k.upstreamImage && !gate) {
			t.Fatalf("%s runs kube-proxy image %s with the MultiClusterServices gate %v; want the stock %s without it only in the derived member (the third context)",
				m.Name, image, gate, k.upstreamImage)
		}
		t.Logf("%s: kube-proxy %s, MultiClusterServices gate %v", m.Name, image, gate)
	}
	return k
}

// connectKindDualStack connects to kind clusters whose nodes have a pod
// range of each family (hack/kind-e2e.sh's mcs-a and mcs-b are
// dual-stack).
func connectKindDualStack(t *testing.T) *kind {
	t.Helper()
	k := connectKind(t)
	for _, m := range k.ms {
		node, err := m.Client.CoreV1().Nodes().Get(t.Context(), m.Node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(node.Spec.PodCIDRs) != 2 {
			t.Fatalf("%s: node %s has pod ranges %v, want one per family (a dual-stack kind cluster)", m.Name, m.Node, node.Spec.PodCIDRs)
		}
	}
	return k
}

// kubeProxyOf reads the image of m's kube-proxy DaemonSet and whether its
// configuration turns the MultiClusterServices gate on.
func kubeProxyOf(ctx context.Context, m *member) (image string, gate bool, err error) {
	ds, err := m.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	cm, err := m.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	gate = regexp.MustCompile(`(?m)^\s*MultiClusterServices:\s*true\b`).MatchString(cm.Data["config.conf"])
	return ds.Spec.Template.Spec.Containers[0].Image, gate, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// upstreamKubeProxyImage is upstream's kube-proxy image of the pinned
// version: the base kind-config/Dockerfile builds this project's image on.
func upstreamKubeProxyImage() (string, error) {
	if image := os.Getenv("MCS_E2E_UPSTREAM_KUBE_PROXY_IMAGE"); image != "" {
		return image, nil
	}
	// go test runs in the package's directory (and -trimpath leaves no
	// source paths to go by).
	dockerfile := filepath.Join("..", "..", "kind-config", "Dockerfile")
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		return "", err
	}
	found := regexp.MustCompile(`(?m)^ARG KUBE_PROXY_BASE=(\S+)$`).FindSubmatch(data)
	if found == nil {
		return "", fmt.Errorf("%s has no ARG KUBE_PROXY_BASE", dockerfile)
	}
	return string(found[1]), nil
}

func contextConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
}

// kindMember reads a kind cluster: the member, and its control-plane
// node. The node pods run on is the first Ready worker, or in a
// single-node cluster (hack/kind-e2e.sh's) the control-plane node, which
// kind leaves untainted there.
func kindMember(ctx context.Context, config *rest.Config) (*member, string, error) {
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, "", err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	var worker, controlPlane string
	controlPlaneReady := false
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || c.Type == v1.NodeReady && c.Status == v1.ConditionTrue
		}
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
			controlPlane, controlPlaneReady = n.Name, ready
			continue
		}
		if ready && worker == "" {
			worker = n.Name
		}
	}
	if worker == "" && len(nodes.Items) == 1 && controlPlaneReady {
		worker = controlPlane
	}
	if worker == "" || controlPlane == "" {
		return nil, "", fmt.Errorf("want a control-plane node and a Ready worker, found control plane %q, worker %q", controlPlane, worker)
	}
	// kube-proxy's own --cluster-cidr, from its configuration.
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("kube-proxy's ConfigMap: %w", err)
	}
	found := regexp.MustCompile(`(?m)^clusterCIDR:\s*"?([^"\s]+)"?`).FindStringSubmatch(cm.Data["config.conf"])
	if found == nil {
		return nil, "", fmt.Errorf("kube-system/kube-proxy config.conf has no clusterCIDR")
	}
	m, err := newMember(ctx, config, found[1], worker)
	return m, controlPlane, err
}

// controllerTTL reads --endpoint-ttl of the mcs-controller Deployment, if
// this member runs it.
func controllerTTL(ctx context.Context, client kubernetes.Interface) (time.Duration, bool, error) {
	d, err := client.AppsV1().Deployments("mcs-system").Get(ctx, "mcs-controller", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, arg := range c.Args {
			if v, ok := strings.CutPrefix(arg, "--endpoint-ttl="); ok {
				ttl, err := time.ParseDuration(v)
				return ttl, err == nil, err
			}
		}
	}
	return 0, false, nil
}

// deleteCaseNamespaces deletes the namespaces the suite made in m; with
// wait, until they are gone.
func deleteCaseNamespaces(t *testing.T, m *member, wait bool) {
	ctx := context.Background()
	list, err := m.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: caseLabel})
	if err != nil {
		t.Logf("%s: listing the suite's namespaces: %v", m.Name, err)
		return
	}
	for _, ns := range list.Items {
		_ = m.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	}
	if wait && len(list.Items) > 0 {
		eventually(t, 180*time.Second, m.Name+": namespaces of an earlier run to go", func() (bool, string) {
			left, err := m.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: caseLabel})
			return err == nil && len(left.Items) == 0, errString(err)
		})
	}
}

func (k *kind) members() []*member         { return k.ms }
func (k *kind) endpointTTL() time.Duration { return k.ttl }

func (k *kind) client(ctx context.Context, m *member, ns, name string, args ...string) ([]byte, error) {
	return podExec(ctx, m, ns, name, "echo", append([]string{"/echoserver"}, args...)...)
}

// podExec runs argv in a container, as kubectl exec does: WebSocket, or
// SPDY where the server does not upgrade to it.
func podExec(ctx context.Context, m *member, ns, name, container string, argv ...string) ([]byte, error) {
	req := m.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&v1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	websocket, err := remotecommand.NewWebSocketExecutor(m.Config, "GET", req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(m.Config, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	executor, err := remotecommand.NewFallbackExecutor(websocket, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	if err := executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return stdout.Bytes(), fmt.Errorf("exec %v in %s/%s/%s: %w: %s", argv, m.Name, ns, name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func (k *kind) nodeExec(ctx context.Context, _ *member, node string, argv ...string) ([]byte, error) {
	return output(exec.CommandContext(ctx, "docker", append([]string{"exec", node}, argv...)...))
}

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
// scales it back and waits until it is available.
func (k *kind) stopController(t *testing.T) func(*testing.T) {
	t.Helper()
	m, deployments, d := k.controllerDeployment(t)
	replicas := *d.Spec.Replicas
	scale := func(ctx context.Context, n int32) error {
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		_, err := deployments.Patch(ctx, "mcs-controller", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	if err := scale(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = scale(context.Background(), replicas) })
	eventually(t, 120*time.Second, "the mcs-controller's pods to go", func() (bool, string) {
		pods, err := m.Client.CoreV1().Pods("mcs-system").List(t.Context(), metav1.ListOptions{LabelSelector: "app=mcs-controller"})
		return err == nil && len(pods.Items) == 0, errString(err)
	})
	return func(t *testing.T) {
		if err := scale(t.Context(), replicas); err != nil {
			t.Fatal(err)
		}
		// The cases need a leader serving: a ready replica. Whether
		// every replica becomes available is
		// TestKindClusterControllerDeploymentAvailable's question.
		eventually(t, 120*time.Second, "an mcs-controller replica to be ready", func() (bool, string) {
			d, err := deployments.Get(t.Context(), "mcs-controller", metav1.GetOptions{})
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

// configureController adds extra to the arguments of the mcs-controller
// Deployment and waits until its pods run them; the clean-up puts the
// arguments back.
func (k *kind) configureController(t *testing.T, extra ...string) {
	t.Helper()
	_, deployments, d := k.controllerDeployment(t)
	before := slices.Clone(d.Spec.Template.Spec.Containers[0].Args)
	setArgs := func(ctx context.Context, args []string) {
		eventually(t, 30*time.Second, "the mcs-controller Deployment's arguments set", func() (bool, string) {
			d, err := deployments.Get(ctx, "mcs-controller", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			d.Spec.Template.Spec.Containers[0].Args = args
			_, err = deployments.Update(ctx, d, metav1.UpdateOptions{})
			return err == nil, errString(err)
		})
		eventually(t, 180*time.Second, "the mcs-controller Deployment rolled out", func() (bool, string) {
			d, err := deployments.Get(ctx, "mcs-controller", metav1.GetOptions{})
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

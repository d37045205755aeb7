package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	controllerapp "github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
)

// kind is a clusterset of kind clusters set up by hack/kind-e2e.sh: the
// kube-proxy DaemonSet of kind-config/kube-proxy.yaml, CoreDNS, the
// mcs-controller Deployment, and the echoserver image loaded in every
// node. Pods are containers: the client runs in them, asked through the
// apiserver's pod proxy; nodes are Docker containers: commands run there
// with docker exec.
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
	// hub is, in pull mode (connectKindPull), the member doubling as the
	// hub, which runs the planner (mcs-system/mcs-planner), and its
	// context; nil in push mode.
	hub        *member
	hubContext string
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
		if ttl, ok, err := deploymentTTL(t.Context(), m.Client, "mcs-controller"); err != nil {
			t.Fatalf("context %s: %v", name, err)
		} else if ok {
			k.ttl = ttl
		}
	}
	for _, m := range k.ms {
		deleteEarlierRuns(t, m)
		t.Cleanup(func() { deleteCaseNamespaces(t, m, caseLabel+"="+caseOf(t)) })
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
	requireKindDerived(t, k)
	return k
}

// requireKindDerived fails unless the third of three members, and only it,
// runs kubeadm's kube-proxy with the stock image and without the gate.
func requireKindDerived(t *testing.T, k *kind) {
	t.Helper()
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
}

// connectKindPull connects to kind clusters run in pull mode
// (hack/kind-e2e.sh's pull stage): one member doubles as the hub and runs
// the planner (the Deployment mcs-system/mcs-planner), every member runs
// its agent (mcs-system/mcs-member-agent), and no member runs the
// mcs-controller, which would be a second writer. The endpoint TTL is the
// planner's.
func connectKindPull(t *testing.T) *kind {
	t.Helper()
	k := connectKind(t)
	for i, m := range k.ms {
		deployments := m.Client.AppsV1().Deployments("mcs-system")
		if _, err := deployments.Get(t.Context(), "mcs-controller", metav1.GetOptions{}); err == nil {
			t.Fatalf("%s runs the mcs-controller: pull mode's members are written by their agents alone", m.Name)
		}
		if _, err := deployments.Get(t.Context(), "mcs-member-agent", metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: its member agent mcs-system/mcs-member-agent: %v", m.Name, err)
		}
		ttl, ok, err := deploymentTTL(t.Context(), m.Client, "mcs-planner")
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if !ok {
			continue
		}
		if k.hub != nil {
			t.Fatalf("both %s and %s run the planner", k.hub.Name, m.Name)
		}
		k.hub, k.hubContext, k.ttl = m, k.contexts[i], ttl
	}
	if k.hub == nil {
		t.Fatalf("no member of %v runs pull mode's planner mcs-system/mcs-planner with an --endpoint-ttl", k.contexts)
	}
	if k.hub == k.ms[0] {
		t.Fatalf("cluster a (%s) is the hub: the outage case stops its apiserver, which would take the planner's hub away", k.hub.Name)
	}
	return k
}

// connectKindDualStack connects to kind clusters whose nodes have a pod
// range of each family (hack/kind-e2e.sh's mcs-a and mcs-b are
// dual-stack).
func connectKindDualStack(t *testing.T) *kind {
	t.Helper()
	k := connectKind(t)
	requireKindDualStack(t, k)
	return k
}

// requireKindDualStack fails unless every member's node has a pod range of
// each family.
func requireKindDualStack(t *testing.T, k *kind) {
	t.Helper()
	for _, m := range k.ms {
		node, err := m.Client.CoreV1().Nodes().Get(t.Context(), m.Node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(node.Spec.PodCIDRs) != 2 {
			t.Fatalf("%s: node %s has pod ranges %v, want one per family (a dual-stack kind cluster)", m.Name, m.Node, node.Spec.PodCIDRs)
		}
	}
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

// deploymentTTL reads --endpoint-ttl of the Deployment mcs-system/name
// (the mcs-controller, or pull mode's planner), if this member runs it.
func deploymentTTL(ctx context.Context, client kubernetes.Interface, name string) (time.Duration, bool, error) {
	d, err := client.AppsV1().Deployments("mcs-system").Get(ctx, name, metav1.GetOptions{})
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

// deleteCaseNamespaces deletes the namespaces of m that selector picks
// (of the suite's caseLabel), without waiting for them to go.
func deleteCaseNamespaces(t *testing.T, m *member, selector string) {
	ctx := context.Background()
	list, err := m.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Logf("%s: listing the suite's namespaces: %v", m.Name, err)
		return
	}
	for _, ns := range list.Items {
		_ = m.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	}
}

// earlierRuns deletes, once per member and test process, the namespaces
// an earlier run left (they would hold old exports and imports), without
// waiting for them to go: a case waits only for a namespace of a name it
// creates (createCaseNamespace). Each test deletes its own when it ends
// (caseOf), without waiting either.
var earlierRuns struct {
	sync.Mutex
	once map[string]*sync.Once
}

func deleteEarlierRuns(t *testing.T, m *member) {
	earlierRuns.Lock()
	if earlierRuns.once == nil {
		earlierRuns.once = map[string]*sync.Once{}
	}
	once := earlierRuns.once[m.Name]
	if once == nil {
		once = new(sync.Once)
		earlierRuns.once[m.Name] = once
	}
	earlierRuns.Unlock()
	once.Do(func() { deleteCaseNamespaces(t, m, caseLabel) })
}

func (k *kind) members() []*member         { return k.ms }
func (k *kind) endpointTTL() time.Duration { return k.ttl }

// client runs the image's client in pod name through the apiserver's
// pod proxy (runPort) rather than by exec: on kind's busy nodes an exec,
// which most of the suite's checks are, cost the kubelet, the container
// runtime and its shim a process each.
func (k *kind) client(ctx context.Context, m *member, ns, name string, args ...string) ([]byte, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	var raw []byte
	// The pod proxy answers 503 while the apiserver cannot reach the
	// pod's port (a pod just reported Running, a node's route still
	// settling): nothing ran yet, so asking again a few times is safe.
	for attempt := 1; ; attempt++ {
		raw, err = m.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(fmt.Sprintf("%s:%d", name, runPort)).
			SubResource("proxy").Suffix(echoserver.RunPath).SetHeader("Content-Type", "application/json").Body(body).DoRaw(ctx)
		if !apierrors.IsServiceUnavailable(err) || attempt == 5 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return nil, fmt.Errorf("%v in %s/%s/%s: %w", args, m.Name, ns, name, err)
	}
	var result echoserver.RunResult
	if err := json.Unmarshal(raw, &result); err != nil {
		return nil, fmt.Errorf("%v in %s/%s/%s: %w: %q", args, m.Name, ns, name, err, raw)
	}
	if result.Error != "" {
		return []byte(result.Output), fmt.Errorf("%v in %s/%s/%s: %s", args, m.Name, ns, name, result.Error)
	}
	return []byte(result.Output), nil
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

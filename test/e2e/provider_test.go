package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

// provider is where the suite's clusterset runs: the local clusterset of
// test/clusterset (the default, and what CI runs), or kind clusters on a
// machine with Docker (MCS_E2E_PROVIDER=kind, see kind_test.go). The cases
// are the same; a provider only knows how to act inside a pod, on a node,
// and on the components the cases stop and start.
type provider interface {
	// members are the clusters in the suite's order: a, the exporter whose
	// API the outage case stops (it must not hold the controller's leader
	// election Lease), then b, the importer the clients run in.
	members() []*member
	// client runs the echoserver image's client (test/echoserver.Main:
	// "ask ...", "dig ...") inside pod ns/name of m and returns its output.
	client(ctx context.Context, m *member, ns, name string, args ...string) ([]byte, error)
	// nodeExec runs argv on node of m, in the node's network namespace.
	nodeExec(ctx context.Context, m *member, node string, argv ...string) ([]byte, error)
	// stopKubeProxy stops kube-proxy on node of m, leaving its rules in
	// place as a crash does, and returns what starts it again.
	stopKubeProxy(t *testing.T, m *member, node string) (start func(*testing.T))
	// stopAPIServer stops m's kube-apiserver, returns once it no longer
	// answers, and returns what starts it again.
	stopAPIServer(t *testing.T, m *member) (start func(*testing.T))
	// startGateOff starts, each in a network namespace of its own and as
	// the Node node, this project's kube-proxy with the gate off and
	// upstream kube-proxy of the pinned version, both nftables, against m.
	// It returns what reads each one's ruleset.
	startGateOff(t *testing.T, m *member, ns, node string) (gateOff, upstream func(context.Context) (string, error))
	// stopController stops the mcs-controller, every replica, and returns
	// what starts it again.
	stopController(t *testing.T) (start func(*testing.T))
	// endpointTTL is the controller's --endpoint-ttl: how long a source
	// cluster's endpoints outlive its unreachable apiserver.
	endpointTTL() time.Duration
	// configureController restarts the mcs-controller with the flags
	// extra beside the suite's, as an operator changing its
	// configuration would, and waits until it runs; the case's clean-up
	// restarts it with the suite's flags again.
	configureController(t *testing.T, extra ...string)
	// kubeconfig is a kubeconfig holding a context per member, and those
	// contexts in the order of members(), for kubectl mcs.
	kubeconfig() (path string, contexts []string)
	// diagnoseFlags are what kubectl mcs diagnose needs besides the
	// members' contexts: in pull mode, the hub (where the sources'
	// Leases are) and the planner's endpoint TTL.
	diagnoseFlags() []string
}

// member is one cluster of the clusterset, as the cases see it.
type member struct {
	// Name is the cluster ID (ClusterProperty cluster.clusterset.k8s.io):
	// what per-endpoint DNS names carry.
	Name   string
	Config *rest.Config
	Client kubernetes.Interface
	MCS    mcsclientset.Interface
	// DNSIP is the ClusterIP of kube-system/kube-dns.
	DNSIP string
	// PodCIDR is the cluster's pod range (kube-proxy's --cluster-cidr).
	PodCIDR string
	// Node is where the suite reads kube-proxy's rules: a node pods run on.
	Node string
}

// newMember reads what the cases need to know of a cluster from its API.
func newMember(ctx context.Context, config *rest.Config, podCIDR, node string) (*member, error) {
	m := &member{Config: config, PodCIDR: podCIDR, Node: node}
	var err error
	if m.Client, err = kubernetes.NewForConfig(config); err != nil {
		return nil, err
	}
	if m.MCS, err = mcsclientset.NewForConfig(config); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	cp, err := dyn.Resource(aboutv1alpha1.Resource).Get(ctx, aboutv1alpha1.ClusterIDProperty, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: the cluster ID (ClusterProperty %s): %w", config.Host, aboutv1alpha1.ClusterIDProperty, err)
	}
	if m.Name, _, _ = unstructured.NestedString(cp.Object, "spec", "value"); m.Name == "" {
		return nil, fmt.Errorf("%s: ClusterProperty %s has no spec.value", config.Host, aboutv1alpha1.ClusterIDProperty)
	}
	dns, err := m.Client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: the kube-dns Service: %w", m.Name, err)
	}
	m.DNSIP = dns.Spec.ClusterIP
	return m, nil
}

// newProvider picks the provider from MCS_E2E_PROVIDER ("" or "local",
// "local-exec": the local clusterset with the clients run through the
// pods/exec API as on kind,
// or "kind").
func newProvider(t *testing.T) provider {
	switch name := os.Getenv("MCS_E2E_PROVIDER"); name {
	case "", "local":
		return upLocal(t, false)
	case "local-exec":
		return upLocal(t, true)
	case "kind":
		return connectKind(t)
	default:
		t.Fatalf("MCS_E2E_PROVIDER=%q: want local, local-exec or kind", name)
		return nil
	}
}

// waitAPI waits until m's apiserver answers (up) or stops answering.
func waitAPI(t *testing.T, m *member, up bool, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%s's apiserver to answer=%v", m.Name, up), func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := m.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return (err == nil) == up, errString(err)
	})
}

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// Tests of the kind clusterset itself (hack/kind-e2e.sh runs them with the
// suite): what only a real cluster on Docker can show.

func requireKind(t *testing.T) *kind {
	t.Helper()
	if os.Getenv("MCS_E2E_PROVIDER") != "kind" {
		t.Skip("needs the kind clusterset of hack/kind-e2e.sh (MCS_E2E_PROVIDER=kind)")
	}
	return connectKind(t)
}

// The host rule of hack/kind-docker.sh: what the kind network sends beyond
// the machine is dropped and counted here.
const (
	egressTable   = "mcs-kind"
	egressCounter = "beyond_machine"
	// TEST-NET-2 (RFC 5737): beyond this machine, by its default route,
	// and nobody's if a packet ever escaped.
	outsideAddress = "198.51.100.1:80"
)

// TestKindClusterEgressDropped: a pod's attempt to reach an address beyond
// the machine gets no answer, and the host's rule counts each attempt as
// it drops it (so the silence is the rule's doing, not a missing route).
func TestKindClusterEgressDropped(t *testing.T) {
	k := requireKind(t)
	m := k.ms[len(k.ms)-1]
	ns := "e2e-egress"
	createCaseNamespace(t, m, ns)
	if _, err := m.Client.CoreV1().Pods(ns).Create(t.Context(), onNode(clientPod("client"), m.Node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clusterset.WaitPodsReady(t.Context(), m.Client, m.Name, 120*time.Second, ns, "client"); err != nil {
		t.Fatal(err)
	}

	const attempts = 3
	before := egressDropped(t)
	out, err := k.client(t.Context(), m, ns, "client", "ask", "--count", fmt.Sprint(attempts), outsideAddress)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); len(got) != attempts || strings.Trim(strings.Join(got, ""), "-") != "" {
		t.Errorf("answers from %s: %q, want none (%d times -)", outsideAddress, got, attempts)
	}
	// Each attempt sends at least its SYN before the client gives up.
	eventually(t, 10*time.Second, "the host rule to count the attempts", func() (bool, string) {
		dropped := egressDropped(t) - before
		return dropped >= attempts, fmt.Sprintf("%d packets dropped", dropped)
	})
	t.Logf("%d attempts to %s from %s/%s: dropped and counted by table inet %s", attempts, outsideAddress, m.Name, ns, egressTable)
}

// egressDropped reads the host rule's packet counter.
func egressDropped(t *testing.T) uint64 {
	t.Helper()
	out, err := output(exec.Command("nft", "-j", "list", "counter", "inet", egressTable, egressCounter))
	if err != nil {
		t.Fatalf("the host rule of hack/kind-docker.sh: %v", err)
	}
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Packets uint64 `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	for _, o := range doc.Nftables {
		if o.Counter != nil {
			return o.Counter.Packets
		}
	}
	t.Fatalf("no counter %s in %s", egressCounter, out)
	return 0
}

// TestKindClusterControllerDeploymentAvailable: the mcs-controller
// Deployment (two replicas, leader election, readiness on /readyz) becomes
// Available with every replica, as `kubectl rollout status` and rolling
// updates (maxUnavailable 0) need. A standby replica is healthy: readiness
// must not mean leadership.
func TestKindClusterControllerDeploymentAvailable(t *testing.T) {
	k := requireKind(t)
	for _, m := range k.ms {
		d, err := m.Client.AppsV1().Deployments("mcs-system").Get(t.Context(), "mcs-controller", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		want := *d.Spec.Replicas
		eventually(t, 90*time.Second, fmt.Sprintf("%s: mcs-system/mcs-controller to have %d available replicas", m.Name, want), func() (bool, string) {
			d, err := m.Client.AppsV1().Deployments("mcs-system").Get(t.Context(), "mcs-controller", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return d.Status.AvailableReplicas == want, fmt.Sprintf("%d available, %d ready; %s", d.Status.AvailableReplicas, d.Status.ReadyReplicas, unreadyReasons(t, m))
		})
		return
	}
	t.Fatal("no member runs the mcs-controller Deployment mcs-system/mcs-controller")
}

// unreadyReasons tells why the controller's pods are not ready: their
// readiness probes' last failures.
func unreadyReasons(t *testing.T, m *member) string {
	events, err := m.Client.CoreV1().Events("mcs-system").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=Unhealthy"})
	if err != nil {
		return err.Error()
	}
	seen := map[string]bool{}
	var reasons []string
	for _, e := range events.Items {
		line := e.InvolvedObject.Name + ": " + strings.TrimSpace(e.Message)
		if !seen[line] {
			seen[line] = true
			reasons = append(reasons, line)
		}
	}
	return strings.Join(reasons, "; ")
}

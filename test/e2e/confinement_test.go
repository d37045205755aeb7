package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/kubectlmcs"
)

// testMemberConfinement: the operator confines cluster A, run by another
// team, to exporting from its own namespace and publishing endpoints of
// its own pod range (--export-namespaces, --member-pod-cidrs). A's
// administrator, who may do anything in A but nothing in the hub or in B,
// tries to undo both, as an attacker would:
//
//   - Nodes: a Node object whose pod CIDRs are 0.0.0.0/1 and 128.0.0.0/1,
//     then an export (from A's own namespace) of a selector-less Service
//     whose Endpoints name the victim's pod in B. The victim's pod must
//     not become an endpoint anywhere: the operator's range replaces what
//     A's Nodes say, and A's export says so in its Ready condition.
//   - Renaming: A exports the victim's name from the victim's namespace
//     with its own pod (refused: not A's namespace), then renames itself
//     in its ClusterProperty, an ID the confinement does not name. A is
//     refused, never served under the new ID: the victim's clients keep
//     reaching the victim's pods only, and A is told why in its export's
//     condition, in an event on its ClusterProperty and in kubectl mcs
//     status. Given its ID back, A is served again.
func (s *suite) testMemberConfinement(t *testing.T) {
	a, b := s.a, s.b
	team := s.space(t, "e2e-team-a")
	prod := s.space(t, "e2e-confined-prod")
	// The rename is seen when A's cluster ID is read again: every 5 s
	// here rather than the default 30, so that the case waits for the
	// refusal and the return, not for the period.
	s.p.configureController(t,
		"--export-namespaces="+a.Name+"="+team.name,
		"--export-namespaces="+b.Name+"=*",
		"--member-pod-cidrs="+a.Name+"="+a.PodCIDR,
		// The IDs the confinement names are the operator's to state:
		// a member listed without a statement never joins as one.
		"--member-cluster-ids="+statedIDs(a, b),
		"--member-recheck-period=5s")

	// The victim: prod/db exported from B, reached from B.
	prod.service(b, "db", nil)
	victim := prod.echoPods(b, "db", "db-b-1")
	victimIP := victim["db-b-1"]
	client := prod.client(b, "client")
	prod.export(b, "db")
	vip := prod.vip(b, "db")
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 10, []string{"db-b-1"})

	t.Run("A's Nodes claim 0.0.0.0/1 and 128.0.0.0/1", func(t *testing.T) {
		// One range per family and Node: two Nodes cover every IPv4
		// address.
		for i, cidr := range []string{"0.0.0.0/1", "128.0.0.0/1"} {
			evilNode := &v1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e2e-evil-node-%d", i), Labels: map[string]string{caseLabel: "true"}},
				Spec: v1.NodeSpec{PodCIDRs: []string{cidr}, Unschedulable: true,
					Taints: []v1.Taint{{Key: "e2e.mcs-kube-proxy.io/attacker", Effect: v1.TaintEffectNoSchedule}}},
			}
			if _, err := a.Client.CoreV1().Nodes().Create(t.Context(), evilNode, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = a.Client.CoreV1().Nodes().Delete(context.Background(), evilNode.Name, metav1.DeleteOptions{})
			})
		}

		// api: A's own pod, and the victim's pod in B, as Endpoints of
		// a selector-less Service in A's own namespace.
		own := team.echoPods(a, "api-own", "api-a-1")["api-a-1"]
		if !inRange(a.PodCIDR, own) || inRange(a.PodCIDR, victimIP) {
			t.Fatalf("A's pod %s must lie in A's pod range %s and the victim's %s outside it", own, a.PodCIDR, victimIP)
		}
		team.service(a, "api", func(spec *v1.ServiceSpec) { spec.Selector = nil })
		writeEndpoints(t, a, team.name, "api", own, victimIP)
		team.export(a, "api")
		apiVIP := team.vip(b, "api")
		// Whatever A's Nodes say, only A's own pod is an endpoint.
		eventually(t, 60*time.Second, "A's export to say the victim's address is withheld", func() (bool, string) {
			se, err := a.MCS.MulticlusterV1beta1().ServiceExports(team.name).Get(t.Context(), "api", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			msg := readyMessage(se)
			return strings.Contains(msg, "1 endpoint address(es) withheld") && strings.Contains(msg, "--member-pod-cidrs"), msg
		})
		waitAnswers(t, client, "tcp", hostPort(apiVIP, 80), 20, []string{"api-a-1"})
		for _, m := range []*member{a, b} {
			if addrs := importedAddresses(t, m, team.name, "api"); slices.Contains(addrs, victimIP) || !slices.Contains(addrs, own) {
				t.Errorf("%s imports team-a/api with endpoints %v: want %s and never the victim's %s", m.Name, addrs, own, victimIP)
			}
		}
		waitEventReason(t, a, team.name, "ServiceExport", "api", "EndpointsOutsidePodRanges")
	})

	t.Run("A renames itself to escape its namespaces", func(t *testing.T) {
		prod.service(a, "db", nil)
		prod.echoPods(a, "db", "db-a-evil")
		prod.export(a, "db")
		eventually(t, 30*time.Second, "A's export of the victim's name refused", func() (bool, string) {
			got := prod.exportConditions(a, "db")
			return strings.Contains(got, "Valid=False/NamespaceNotAllowed"), got
		})

		original := a.Name
		setProperty(t, a, aboutv1alpha1.ClusterIDProperty, "e2e-renamed")
		t.Cleanup(func() { setProperty(t, a, aboutv1alpha1.ClusterIDProperty, original) })
		// Refused: A's export says why, in A.
		eventually(t, 60*time.Second, "A's export to say A is refused", func() (bool, string) {
			se, err := a.MCS.MulticlusterV1beta1().ServiceExports(prod.name).Get(t.Context(), "db", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			msg := readyMessage(se)
			return strings.Contains(msg, "never joins under an ID of its own choosing") && strings.Contains(msg, `"e2e-renamed"`), msg
		})
		waitEventReason(t, a, metav1.NamespaceDefault, "ClusterProperty", aboutv1alpha1.ClusterIDProperty, "MemberRefused")
		// Nothing of A is served, under any ID: the victim's import
		// lists B only, and its clients reach the victim's pod only.
		prod.waitImport(b, "db", "served by B only", func(si *mcsv1beta1.ServiceImport) bool {
			return len(si.Status.Clusters) == 1 && si.Status.Clusters[0].Cluster == b.Name
		})
		if got := client.countAnswers(hostPort(vip, 80), 30); len(got) != 1 || got["db-b-1"] != 30 {
			t.Errorf("the victim's clients were answered by %v, want db-b-1 only", got)
		}
		// kubectl mcs status tells the operator and A's administrator.
		status := kubectlMCSStatus(t, s.p)
		if !strings.Contains(status, "refused by the mcs-controller") || !strings.Contains(status, "e2e-renamed") {
			t.Errorf("kubectl mcs status does not say A is refused:\n%s", status)
		}

		// Its own ID back: served again (the operator states it), and
		// still confined.
		setProperty(t, a, aboutv1alpha1.ClusterIDProperty, original)
		eventually(t, 60*time.Second, "A served again, its export of the victim's name still refused", func() (bool, string) {
			se, err := a.MCS.MulticlusterV1beta1().ServiceExports(prod.name).Get(t.Context(), "db", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			msg := readyMessage(se)
			got := prod.exportConditions(a, "db")
			return strings.Contains(got, "Valid=False/NamespaceNotAllowed") && !strings.Contains(msg, "no longer a member"), got + ": " + msg
		})
	})
}

// writeEndpoints writes the Endpoints of selector-less Service ns/name, on
// the echo port, as an administrator of m may; the EndpointSlice
// mirroring controller turns them into a slice.
func writeEndpoints(t *testing.T, m *member, ns, name string, addrs ...string) {
	t.Helper()
	var subset v1.EndpointSubset
	for _, a := range addrs {
		subset.Addresses = append(subset.Addresses, v1.EndpointAddress{IP: a})
	}
	subset.Ports = []v1.EndpointPort{{Name: "tcp", Port: 8080, Protocol: v1.ProtocolTCP}}
	//nolint:staticcheck // Endpoints are what an administrator of a selector-less Service writes.
	eps := &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name}, Subsets: []v1.EndpointSubset{subset}}
	//nolint:staticcheck
	if _, err := m.Client.CoreV1().Endpoints(ns).Create(t.Context(), eps, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func readyMessage(se *mcsv1beta1.ServiceExport) string {
	for _, c := range se.Status.Conditions {
		if c.Type == string(mcsv1beta1.ServiceExportConditionReady) {
			return c.Message
		}
	}
	return ""
}

// importedAddresses are the endpoint addresses of the MCS slices of
// ns/name in m.
func importedAddresses(t *testing.T, m *member, ns, name string) []string {
	t.Helper()
	list, err := m.Client.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			out = append(out, e.Addresses...)
		}
	}
	slices.Sort(out)
	return out
}

// waitEventReason waits for an event of reason on kind ns/name in m.
func waitEventReason(t *testing.T, m *member, ns, kind, name, reason string) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("a %s event on %s %s/%s in %s", reason, kind, ns, name, m.Name), func() (bool, string) {
		events, err := m.Client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, e := range events.Items {
			if e.Reason == reason {
				return true, ""
			}
			got = append(got, e.Reason)
		}
		return false, strings.Join(got, ",")
	})
}

// statedIDs is --member-cluster-ids for members ms as the operator
// would state them. The controller's context of a member is named after
// its cluster ID on both providers (the local clusterset's kubeconfig,
// and member_kubeconfig of hack/kind-e2e.sh).
func statedIDs(ms ...*member) string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.Name+"="+m.Name)
	}
	return strings.Join(ids, ",")
}

// kubectlMCSStatus runs kubectl mcs status over every member.
func kubectlMCSStatus(t *testing.T, p provider) string {
	t.Helper()
	kubeconfig, contexts := p.kubeconfig()
	return kubectlMCS(t, "--kubeconfig="+kubeconfig, "--contexts="+strings.Join(contexts, ","), "status")
}

// kubectlMCS runs kubectl mcs with args and returns what it printed; a
// run whose checks fail is a result, any other error fails t.
func kubectlMCS(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runKubectlMCS(t, args...)
	if err != nil && !errors.Is(err, kubectlmcs.ErrChecksFailed) {
		t.Fatalf("kubectl mcs %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// runKubectlMCS runs kubectl mcs with args and returns what it printed,
// its errors, and how it ended (kubectlmcs.ErrChecksFailed: exit 1,
// ErrNotConverged: exit 2).
func runKubectlMCS(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := kubectlmcs.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// inRange says whether addr lies in one of cidrs (comma separated, as
// kube-proxy's --cluster-cidr).
func inRange(cidrs, addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	for _, c := range strings.Split(cidrs, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil && p.Contains(a) {
			return true
		}
	}
	return false
}

package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/kubectlmcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// inventoryRounds is how many times the figures case deletes cluster-a's
// profile and writes it again.
const inventoryRounds = 20

// TestClusterInventory runs the clusterset with its members given only as
// ClusterProfiles (KEP-4322) of an inventory in cluster-a, the hub, each
// reached with the credential plugin test/cmd/credential-plugin (KEP-5339)
// whose tokens expire every 20 s: the controller has no context or Secret
// of any member. On a local clusterset of its own (prefix e2einv, two
// clusters of one node), the profiles written before the controller
// starts: an export of A and B reaches B's client by name and clusterset
// IP; A's profile deleted takes A's endpoints out of B's rules and
// answers, and written again brings them back; then the time from a
// profile deleted to its endpoints gone everywhere, and from a profile
// written to its imports written, over several rounds; and, with cluster
// selection on, the region a profile states choosing where B's client
// goes, moved when the cluster manager changes it.
func TestClusterInventory(t *testing.T) {
	runBeside(t)
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" {
		t.Skipf("the inventory cases run on a local clusterset, not on MCS_E2E_PROVIDER=%s", p)
	}
	requireBuilt(t, "credential-plugin")
	started := time.Now()
	// Cluster selection on, for the profiles' regions.
	l := upLocalOpts(t, clusterset.Options{Clusters: 2, Prefix: "e2einv",
		KubeProxyArgs: []string{"--feature-gates=MultiClusterServices=true,MultiClusterServiceClusterSelection=true"}}, false)
	ms := l.members()
	s := &suite{p: l, a: ms[0], b: ms[1], top: t}
	ca, cb := l.cluster(s.a), l.cluster(s.b)
	plugin, err := framework.Binary("credential-plugin")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := l.cs.NewInventory(t.Context(), ca, plugin, "20s")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*clusterset.Cluster{ca, cb} {
		if err := inv.PutProfile(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	// From here on the controller knows the members from the profiles
	// only; its leader election Lease is in the hub.
	l.baseControllerArgs = []string{"--endpoint-ttl=" + localEndpointTTL.String()}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", port)
	l.restartController(t, append(inv.ControllerArgs(), "--metrics-bind-address="+metrics, "--feature-gates=MultiClusterServiceClusterSelection=true")...)

	sp := s.space(t, "e2e-inv")
	var ips map[string]string
	var client *pod
	var vip string
	t.Run("an export of A and B reaches B's client by name and clusterset IP", func(t *testing.T) {
		sp.t = t
		ips, client, vip = sp.webInBoth()
		s.waitDNS(t, client, "web."+sp.name+".svc.clusterset.local", []string{vip})
		// The plugin ran once per cluster when the controller started
		// (its tokens last 20 s), and each run is counted.
		if got := pluginRuns(t, metrics, "no_error"); got < 2 {
			t.Errorf("%v credential plugin runs counted; it ran for both clusters at start-up", got)
		}
		// And under its access provider's name (KEP-5339), timed.
		if got := metricValue(t, metrics, `mcs_controller_access_provider_plugin_runs_total{provider="`+clusterset.InventoryAccessProvider+`",result="success"}`); got < 2 {
			t.Errorf("%v runs of access provider %s's plugin counted; it ran for both clusters at start-up", got, clusterset.InventoryAccessProvider)
		}
		if got := metricValue(t, metrics, `mcs_controller_access_provider_plugin_duration_seconds_count{provider="`+clusterset.InventoryAccessProvider+`"}`); got < 2 {
			t.Errorf("%v runs of access provider %s's plugin timed, want one per cluster at least", got, clusterset.InventoryAccessProvider)
		}
	})
	if t.Failed() {
		return
	}

	// kubectl mcs, pointed at the hub, shows whom the controller serves:
	// the profiles, each joined, and --wait returns at once.
	hubStatus := func(t *testing.T, extra ...string) (string, string, error) {
		return runKubectlMCS(t, append([]string{"--kubeconfig=" + l.cs.Kubeconfig(), "--contexts=cluster-a,cluster-b", "status", "--hub-context=" + ca.Name,
			"--member-secrets-namespace=", "--inventory-namespace=" + clusterset.InventoryNamespace}, extra...)...)
	}
	t.Run("kubectl mcs status --hub-context: the profiles as the controller sees them", func(t *testing.T) {
		out, errOut, err := hubStatus(t, "--wait", "--wait-timeout=60s")
		if err != nil {
			t.Fatalf("status --wait: %v\n%s%s", err, out, errOut)
		}
		for _, c := range []*clusterset.Cluster{ca, cb} {
			// The profiles state no cluster ID (they are bound to the
			// one their servers answer with): "-".
			if !containsFields(out, "profile", clusterset.InventoryNamespace+"/"+c.Name, "-", "joined") {
				t.Errorf("status --hub-context does not show %s's profile joined:\n%s", c.Name, out)
			}
		}
	})

	t.Run("A's profile deleted: A's endpoints leave B's rules and answers", func(t *testing.T) {
		sp.t = t
		if err := inv.DeleteProfile(t.Context(), ca); err != nil {
			t.Fatal(err)
		}
		s.waitRules(t, s.b, 30*time.Second, []string{vip, ips["web-b-1"]}, []string{ips["web-a-1"]})
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, []string{"web-b-1"})
		eventually(t, 30*time.Second, "A's export to say it is not served", func() (bool, string) {
			got := sp.exportConditions(s.a, "web")
			return strings.Contains(got, "Ready=False"), got
		})
	})

	t.Run("A's profile written again: A's endpoints are back", func(t *testing.T) {
		sp.t = t
		if err := inv.PutProfile(t.Context(), ca); err != nil {
			t.Fatal(err)
		}
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, []string{"web-a-1", "web-b-1"})
		if got := sp.vip(s.b, "web"); got != vip {
			t.Errorf("the clusterset IP moved from %s to %s when A left and came back", vip, got)
		}
	})

	t.Run("figures: profile written to imports written, profile deleted to endpoints gone everywhere", func(t *testing.T) {
		sp.t = t
		// Everywhere: B holds no slice of A, and A (drained) no import.
		gone := func() (bool, string) {
			bFromA, errB := importedFrom(sp, s.b, "cluster-a")
			_, errA := s.a.MCS.MulticlusterV1beta1().ServiceImports(sp.name).Get(t.Context(), "web", metav1.GetOptions{})
			return bFromA == 0 && errA != nil, fmt.Sprintf("B holds %d slices of A (%v); A's import: %v", bFromA, errB, errString(errA))
		}
		// Written: B holds A's slices again, and A its import with
		// both clusters' slices.
		written := func() (bool, string) {
			bFromA, _ := importedFrom(sp, s.b, "cluster-a")
			aFromB, _ := importedFrom(sp, s.a, "cluster-b")
			aFromA, _ := importedFrom(sp, s.a, "cluster-a")
			return bFromA > 0 && aFromB > 0 && aFromA > 0, fmt.Sprintf("B has %d slices of A, A %d of B and %d of its own", bFromA, aFromB, aFromA)
		}
		var leave, join latencies
		for range inventoryRounds {
			start := time.Now()
			if err := inv.DeleteProfile(t.Context(), ca); err != nil {
				t.Fatal(err)
			}
			eventuallyFast(t, 30*time.Second, "A's endpoints gone everywhere", gone)
			leave = append(leave, time.Since(start))
			start = time.Now()
			if err := inv.PutProfile(t.Context(), ca); err != nil {
				t.Fatal(err)
			}
			eventuallyFast(t, 30*time.Second, "A's imports written", written)
			join = append(join, time.Since(start))
		}
		t.Log(join.line("profile written -> imports written in every member"))
		t.Log(leave.line("profile deleted -> its endpoints gone everywhere"))
		// The last round left A a member: traffic reaches both.
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, []string{"web-a-1", "web-b-1"})
	})

	t.Run("the region a profile states drives @SameAsImporter@, and moves traffic when the cluster manager changes it", func(t *testing.T) {
		sp.t = t
		region := func(r string) inventoryv1alpha1.Property {
			return inventoryv1alpha1.Property{Name: regionProperty, Value: r}
		}
		for c, r := range map[*clusterset.Cluster]string{ca: "eu", cb: "us"} {
			if err := inv.PutProfile(t.Context(), c, region(r)); err != nil {
				t.Fatal(err)
			}
		}
		sameRegion := []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{MatchProperties: map[string]string{regionProperty: csv1beta1.SameAsImporter}}}}
		for _, m := range []*member{s.a, s.b} {
			sp.service(m, "api", nil)
			sp.echoPods(m, "api", "api-"+strings.TrimPrefix(m.Name, "cluster-")+"-1")
			exportSelected(t, sp, m, "api", sameRegion)
		}
		waitSelectorResults(t, sp, s.b, "api", "[cluster-b]")
		addr := hostPort(sp.vip(s.b, "api"), 80)
		waitAnswers(t, client, "tcp", addr, 10, []string{"api-b-1"})
		if err := inv.PutProfile(t.Context(), ca, region("us")); err != nil {
			t.Fatal(err)
		}
		waitSelectorResults(t, sp, s.b, "api", "[cluster-a cluster-b]")
		waitAnswers(t, client, "tcp", addr, 30, []string{"api-a-1", "api-b-1"})
	})

	// Last, as it takes b out: b's profile now claims another cluster ID
	// than b's server holds, and the controller refuses it; status shows
	// it refused and why, and --wait gives up on it.
	t.Run("kubectl mcs status --hub-context: a refused profile and why", func(t *testing.T) {
		if err := inv.PutProfile(t.Context(), cb, inventoryv1alpha1.Property{Name: aboutv1alpha1.ClusterIDProperty, Value: "cluster-z"}); err != nil {
			t.Fatal(err)
		}
		var out string
		eventually(t, 30*time.Second, "status to show b's profile refused", func() (bool, string) {
			out, _, _ = hubStatus(t)
			return containsFields(out, "profile", clusterset.InventoryNamespace+"/"+cb.Name, "cluster-z", "refused") && strings.Contains(out, "cluster-b"), out
		})
		_, errOut, err := hubStatus(t, "--wait", "--wait-timeout=3s")
		if !errors.Is(err, kubectlmcs.ErrNotConverged) || !strings.Contains(errOut, "profile "+clusterset.InventoryNamespace+"/"+cb.Name+": refused") {
			t.Errorf("status --wait on a refused profile: %v, want not converged, naming it:\n%s", err, errOut)
		}
	})
	t.Logf("TestClusterInventory wall=%v", time.Since(started).Round(100*time.Millisecond))
}

// containsFields says whether a line of out has exactly these fields.
func containsFields(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if slices.Equal(strings.Fields(line), fields) {
			return true
		}
	}
	return false
}

// importedFrom counts the EndpointSlices of sp's web that m holds from
// source cluster.
func importedFrom(sp *space, m *member, source string) (int, error) {
	list, err := m.Client.DiscoveryV1().EndpointSlices(sp.name).List(sp.t.Context(), metav1.ListOptions{
		LabelSelector: mcsv1beta1.LabelServiceName + "=web," + mcsv1beta1.LabelSourceCluster + "=" + source,
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list.Items {
		if s.AddressType == discoveryv1.AddressTypeIPv4 {
			n++
		}
	}
	return n, nil
}

// eventuallyFast is eventually polled every 20 ms, for the figures.
func eventuallyFast(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, last)
}

// pluginRuns reads the controller's count of credential plugin runs of
// call status status.
func pluginRuns(t *testing.T, addr, status string) float64 {
	return metricValue(t, addr, `mcs_controller_credential_plugin_runs_total{call_status="`+status+`"`)
}

// metricValue sums the samples of the controller's metrics at addr whose
// line starts with prefix (a name and the first labels).
func metricValue(t *testing.T, addr, prefix string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64); err == nil {
			total += v
		}
	}
	return total
}

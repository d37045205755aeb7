package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/kubectlmcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

const regionProperty = "region.topology.k8s.io"

// regionFirst is story 1 of KEP-5939: my cluster, then my region.
var regionFirst = []csv1beta1.ClusterSelector{
	{PropertySelector: &csv1beta1.PropertySelector{MatchExpressions: []csv1beta1.PropertySelectorRequirement{
		{Key: aboutv1alpha1.ClusterIDProperty, Operator: csv1beta1.PropertySelectorOpIn, Values: []string{csv1beta1.SameAsImporter}},
	}}},
	{PropertySelector: &csv1beta1.PropertySelector{MatchProperties: map[string]string{regionProperty: csv1beta1.SameAsImporter}}},
}

// TestClusterSelection is story 1 of KEP-5939 on a local clusterset of
// three clusters in two regions (a and b in eu, c in us, given by
// --cluster-property), with the MultiClusterServiceClusterSelection gate
// on in kube-proxy and the mcs-controller: a client in b reaches b's pods
// only; when they go, a's (its region); when those go too, c's; when b's
// come back, b's only again, each change an event on b's import; when c
// joins the region (its ClusterProperty changed), b's failover reaches c
// through the region's result. A kube-proxy of b with the gate off serves
// every cluster; selectors on a headless export are refused.
func TestClusterSelection(t *testing.T) {
	runBeside(t)
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" {
		t.Skipf("cluster selection runs on a local clusterset of its own, not on MCS_E2E_PROVIDER=%s", p)
	}
	started := time.Now()
	l := upLocalOpts(t, selectionClusterset(t, "e2esel"), false, selectionGate)
	testClusterSelection(t, l)
	t.Logf("TestClusterSelection took %v", time.Since(started).Round(10*time.Millisecond))
}

// TestClusterSelectionPullMode is TestClusterSelection in pull mode: each
// member's agent publishes its ClusterProperties with its MemberCluster,
// the planner resolves every importer's results from them (the cluster
// ID being the member's hub namespace), and each agent writes its own
// cluster's results. The same story, the same checks.
func TestClusterSelectionPullMode(t *testing.T) {
	runBeside(t)
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" {
		t.Skipf("cluster selection runs on a local clusterset of its own, not on MCS_E2E_PROVIDER=%s", p)
	}
	started := time.Now()
	l := upLocalPull(t, selectionClusterset(t, "e2eselp"), selectionGate)
	testClusterSelection(t, l)
	t.Logf("TestClusterSelectionPullMode took %v", time.Since(started).Round(10*time.Millisecond))
}

// selectionGate is the gate of cluster selection in the mcs-controller,
// the planner and the member agents.
const selectionGate = "--feature-gates=MultiClusterServiceClusterSelection=true"

// selectionClusterset is the clusterset of the cluster selection story:
// three clusters, a and b in eu and c in us, their kube-proxies with the
// gate on.
func selectionClusterset(t *testing.T, prefix string) clusterset.Options {
	t.Helper()
	opts := clusterset.Options{Clusters: 3, Prefix: prefix,
		KubeProxyArgs: []string{"--feature-gates=MultiClusterServices=true,MultiClusterServiceClusterSelection=true"}}
	for _, p := range []string{"cluster-a=" + regionProperty + "=eu", "cluster-b=" + regionProperty + "=eu", "cluster-c=" + regionProperty + "=us"} {
		if err := opts.AddClusterProperty(p); err != nil {
			t.Fatal(err)
		}
	}
	return opts
}

// testClusterSelection is the story on l, whichever mode writes it.
func testClusterSelection(t *testing.T, l *local) {
	ms := l.members()
	a, b, c := ms[0], ms[1], ms[2]
	s := &suite{p: l, a: a, b: b, top: t}
	sp := s.space(t, "e2e-selection")

	ips := map[string]string{}
	for _, m := range ms {
		sp.service(m, "api", nil)
		for name, ip := range sp.echoPods(m, "api", "api-"+strings.TrimPrefix(m.Name, "cluster-")+"-1") {
			ips[name] = ip
		}
	}
	client := sp.client(b, "client")
	for _, m := range ms {
		exportSelected(t, sp, m, "api", regionFirst)
	}
	waitSelectorResults(t, sp, b, "api", "[cluster-b] [cluster-a cluster-b]")
	waitSelectorResults(t, sp, c, "api", "[cluster-c] [cluster-c]")
	vip := sp.vip(b, "api")
	addr := hostPort(vip, 80)
	waitAnswers(t, client, "tcp", addr, 10, []string{"api-b-1"})

	t.Run("a kube-proxy with the gate off serves every cluster", func(t *testing.T) {
		rules := startSelectionGateOff(t, l, b)
		eventually(t, 30*time.Second, "the gate-off kube-proxy to program every cluster's endpoint for "+vip, func() (bool, string) {
			text, err := rules(t.Context())
			if err != nil {
				return false, err.Error()
			}
			ok := hasIP(text, vip)
			for _, ip := range ips {
				ok = ok && hasIP(text, ip)
			}
			return ok, fmt.Sprintf("vip %v, endpoints %v", hasIP(text, vip), ips)
		})
		text, err := s.ruleset(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		if !hasIP(text, ips["api-b-1"]) || hasIP(text, ips["api-a-1"]) || hasIP(text, ips["api-c-1"]) {
			t.Errorf("b's node with the gate on programs %s: b %v, a %v, c %v; want b's only", vip,
				hasIP(text, ips["api-b-1"]), hasIP(text, ips["api-a-1"]), hasIP(text, ips["api-c-1"]))
		}
	})

	t.Run("failover to the region, then anywhere, and back", func(t *testing.T) {
		deletePod(t, sp, b, "api-b-1")
		waitAnswers(t, client, "tcp", addr, 10, []string{"api-a-1"})
		// What a user asks next: kubectl mcs says which result b uses and
		// why result 0 was skipped, and what b's node reported.
		eventually(t, 30*time.Second, "kubectl mcs diagnose to explain b's failover", func() (bool, string) {
			checks := diagnoseFrom(t, l, sp.name+"/api", b.Name)
			ok := slices.Contains(checks, "cluster selection: result 0 (cluster-b) skipped: no ready or serving endpoint; using result 1 (cluster-a,cluster-b)")
			node := slices.ContainsFunc(checks, func(c string) bool {
				return strings.HasPrefix(c, "kube-proxy on ") && strings.Contains(c, "cluster selection changed: result 0 (cluster-b) has no ready or serving endpoint")
			})
			return ok && node, strings.Join(checks, " | ")
		})
		deletePod(t, sp, a, "api-a-1")
		waitAnswers(t, client, "tcp", addr, 10, []string{"api-c-1"})
		sp.echoPods(b, "api", "api-b-2")
		waitAnswers(t, client, "tcp", addr, 10, []string{"api-b-2"})
		want := []string{
			"result 0 (cluster-b) has no ready or serving endpoint for IPv4; using result 1 (cluster-a,cluster-b)",
			"no result has a ready or serving endpoint for IPv4; using every source cluster instead of result 1 (cluster-a,cluster-b)",
			"result 0 (cluster-b) has a ready or serving endpoint for IPv4; using it instead of every source cluster",
		}
		// Others may tell of the import's first results; a change made
		// twice is one event (a series), so each is looked for, not
		// their order.
		eventually(t, 30*time.Second, "b's import to have an event per change", func() (bool, string) {
			got := selectionEvents(t, sp, b, "api")
			ok := true
			for _, w := range want {
				ok = ok && slices.Contains(got, w)
			}
			return ok, strings.Join(got, " | ")
		})
	})

	t.Run("a property change moves the choice", func(t *testing.T) {
		// c joins the eu region: b's second result now holds c, whose
		// pod serves when b's own go, where every cluster served before.
		setProperty(t, c, regionProperty, "eu")
		waitSelectorResults(t, sp, b, "api", "[cluster-b] [cluster-a cluster-b cluster-c]")
		deletePod(t, sp, b, "api-b-2")
		waitAnswers(t, client, "tcp", addr, 10, []string{"api-c-1"})
		// The event of this change folds into the series of the first
		// Result0ToResult1 (one action, one note): diagnose says it.
		eventually(t, 30*time.Second, "kubectl mcs diagnose to say b uses the region, c now in it", func() (bool, string) {
			checks := diagnoseFrom(t, l, sp.name+"/api", b.Name)
			return slices.Contains(checks, "cluster selection: result 0 (cluster-b) skipped: no ready or serving endpoint; using result 1 (cluster-a,cluster-b,cluster-c)"), strings.Join(checks, " | ")
		})
	})

	t.Run("selectors on a headless export are refused", func(t *testing.T) {
		sp.service(a, "db", func(spec *v1.ServiceSpec) { spec.ClusterIP = v1.ClusterIPNone })
		exportSelected(t, sp, a, "db", regionFirst)
		eventually(t, 30*time.Second, "a's export of db to be refused", func() (bool, string) {
			got := sp.exportConditions(a, "db")
			return strings.Contains(got, "Valid=False/InvalidServiceType"), got
		})
	})
}

// setProperty sets m's ClusterProperty key to value, as its admin would.
func setProperty(t *testing.T, m *member, key, value string) {
	t.Helper()
	api := dynamic.NewForConfigOrDie(m.Config).Resource(aboutv1alpha1.Resource)
	// Not t's context: a clean-up puts properties back after it ends.
	ctx := context.Background()
	eventually(t, 10*time.Second, "ClusterProperty "+key+" of "+m.Name+" to be "+value, func() (bool, string) {
		u, err := api.Get(ctx, key, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if err := unstructured.SetNestedField(u.Object, value, "spec", "value"); err != nil {
			return false, err.Error()
		}
		_, err = api.Update(ctx, u, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// diagnoseFrom runs kubectl mcs diagnose of ref from importer and returns
// its checks as "subject: detail".
func diagnoseFrom(t *testing.T, l *local, ref, importer string) []string {
	t.Helper()
	args := append([]string{"--kubeconfig=" + l.cs.Kubeconfig(), "diagnose", "service", ref, "--from=" + importer, "-o", "json"}, l.diagnoseFlags()...)
	out := kubectlMCS(t, args...)
	var checks []kubectlmcs.Check
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("kubectl mcs diagnose %s -o json: %v\n%s", ref, err, out)
	}
	var lines []string
	for _, c := range checks {
		if c.Cluster == importer {
			lines = append(lines, c.Subject+": "+c.Detail)
		}
	}
	return lines
}

// exportSelected exports name from m with the KEP's clusterSelectors,
// which mcs-api's typed client does not have.
func exportSelected(t *testing.T, sp *space, m *member, name string, sels []csv1beta1.ClusterSelector) {
	t.Helper()
	se := &csv1beta1.ServiceExport{
		TypeMeta:   metav1.TypeMeta{APIVersion: csv1beta1.SchemeGroupVersion.String(), Kind: "ServiceExport"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sp.name},
		Spec:       csv1beta1.ServiceExportSpec{ClusterSelectors: sels},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(se)
	if err != nil {
		t.Fatal(err)
	}
	api := dynamic.NewForConfigOrDie(m.Config).Resource(csv1beta1.SchemeGroupVersion.WithResource("serviceexports")).Namespace(sp.name)
	if _, err := api.Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitSelectorResults waits until m's import name has, as results, want
// (each result's clusters, space separated).
func waitSelectorResults(t *testing.T, sp *space, m *member, name, want string) {
	t.Helper()
	api := dynamic.NewForConfigOrDie(m.Config).Resource(csv1beta1.SchemeGroupVersion.WithResource("serviceimports")).Namespace(sp.name)
	eventually(t, 60*time.Second, fmt.Sprintf("cluster selector results of %s in %s", name, m.Name), func() (bool, string) {
		u, err := api.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		si := &csv1beta1.ServiceImport{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, si); err != nil {
			return false, err.Error()
		}
		var got []string
		for _, r := range si.Status.ClusterSelectorResults {
			got = append(got, fmt.Sprint(r.Clusters))
		}
		return strings.Join(got, " ") == want, strings.Join(got, " ")
	})
}

// deletePod deletes a pod at once: a pod terminating gracefully still
// serves, and a serving endpoint keeps its result chosen.
func deletePod(t *testing.T, sp *space, m *member, name string) {
	t.Helper()
	if err := m.Client.CoreV1().Pods(sp.name).Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
}

// selectionEvents are the notes of the ClusterSelectionChanged events on
// m's import name.
func selectionEvents(t *testing.T, sp *space, m *member, name string) []string {
	list, err := m.Client.EventsV1().Events(sp.name).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	var notes []string
	for _, e := range list.Items {
		if e.Reason == "ClusterSelectionChanged" && e.Regarding.Kind == "ServiceImport" && e.Regarding.Name == name {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// startSelectionGateOff runs the project's kube-proxy as m's node with
// MultiClusterServices on and cluster selection off, in a network
// namespace of its own reaching the apiserver through a forwarded port,
// and returns what reads its ruleset.
func startSelectionGateOff(t *testing.T, l *local, m *member) func(context.Context) (string, error) {
	t.Helper()
	c := l.cluster(m)
	kubeconfig, err := c.API.KubeconfigFor("system:kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	ns := l.cs.Prefix() + "-seloff"
	if out, err := netns.Output("ip", "netns", "add", ns); err != nil {
		t.Fatalf("ip netns add %s: %v %s", ns, err, out)
	}
	t.Cleanup(func() { _, _ = netns.Output("ip", "netns", "del", ns) })
	if out, err := netns.Output("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr := strings.TrimPrefix(c.API.URL(), "https://")
	if err := netns.Forward(ctx, ns, addr, addr); err != nil {
		t.Fatal(err)
	}
	binary, err := framework.Binary("kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{binary, "--kubeconfig=" + kubeconfig}, gateOffArgs(m, m.Node)...)
	argv = append(argv, "--feature-gates=MultiClusterServices=true,MultiClusterServiceClusterSelection=false")
	proxy, err := process.Start(process.Options{Name: "kube-proxy in " + ns, Argv: argv, Netns: ns, Log: filepath.Join(l.cs.Dir(), ns+".log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", proxy.LogFile(), process.Tail(proxy.LogFile(), 20))
		}
	})
	return func(ctx context.Context) (string, error) {
		out, err := output(exec.CommandContext(ctx, "ip", "netns", "exec", ns, "nft", "list", "ruleset"))
		return string(out), err
	}
}

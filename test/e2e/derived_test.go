package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// derivedGrace is the controller's --derived-grace in the derived suite.
const derivedGrace = 10 * time.Second

// TestDerivedMember runs a clusterset of three clusters in which
// cluster-c's nodes run the unmodified upstream kube-proxy and the
// mcs-controller serves cluster-c in derived mode: c reaches what a and b
// export by the clusterset.local name and by its derived Service's IP,
// headless imports answer in both DNS zones. It runs on a local
// clusterset of its own (three clusters of two nodes), or on kind
// (MCS_E2E_PROVIDER=kind, three contexts: hack/kind-e2e.sh's mcs-b, mcs-a
// and mcs-c, whose kube-proxy is kubeadm's with the stock image), which
// make test runs (TestDerivedMemberMigration is local only).
func TestDerivedMember(t *testing.T) {
	runBeside(t)
	var d *derivedSuite
	switch p := os.Getenv("MCS_E2E_PROVIDER"); p {
	case "", "local":
		d = upLocalDerived(t, "e2eder")
	case "kind":
		k := connectKindDerived(t)
		ms := k.members()
		d = &derivedSuite{suite: &suite{p: k, a: ms[0], b: ms[2], top: t}, nativeB: ms[1]}
	default:
		t.Skipf("the derived-mode cases run on a local clusterset or on kind, not on MCS_E2E_PROVIDER=%s", p)
	}
	derivedCases(t, d)
}

// TestDerivedMemberPullMode runs the derived-mode cases in pull mode:
// cluster-c's agent runs with --derived (its own operator's word that its
// proxies do not program imports) and writes the plan into it as derived
// Services, as push mode's controller does for a member in
// --derived-members. On a local clusterset of its own (the derived member
// doubles as the hub), or on kind once hack/kind-e2e.sh has switched
// mcs-b, mcs-a (the hub) and mcs-c to pull mode.
func TestDerivedMemberPullMode(t *testing.T) {
	runBeside(t)
	var d *derivedSuite
	switch p := os.Getenv("MCS_E2E_PROVIDER"); p {
	case "", "local":
		l := upLocalPullWith(t, clusterset.Options{Clusters: 3, NodesPerCluster: 2, Prefix: "e2ederp", UpstreamKubeProxy: []string{"cluster-c"}},
			pullFlags{agentsOf: map[string][]string{"cluster-c": {"--derived", "--derived-grace=" + derivedGrace.String()}}})
		ms := l.members()
		d = &derivedSuite{suite: &suite{p: l, a: ms[0], b: ms[2], top: t}, l: l, nativeB: ms[1]}
	case "kind":
		k := connectKindPull(t)
		requireKindDerived(t, k)
		ms := k.members()
		d = &derivedSuite{suite: &suite{p: k, a: ms[0], b: ms[2], top: t}, nativeB: ms[1]}
	default:
		t.Skipf("the derived-mode cases run on a local clusterset or on kind, not on MCS_E2E_PROVIDER=%s", p)
	}
	derivedCases(t, d)
}

// derivedCases are the derived-mode cases both modes share.
func derivedCases(t *testing.T, d *derivedSuite) {
	sideBySide(t, "namespaced cases side by side",
		namedCase{"c reaches the exports of a and b by clusterset name and by its derived Service", d.testReach},
		namedCase{"a headless export answers in both DNS zones of c", d.testHeadless},
		namedCase{"session affinity ClientIP holds through the derived Service", d.testAffinity},
		namedCase{"unexport removes the derived Service", d.testUnexport},
		namedCase{"RemoteAndLocal: c's own Service of the name serves its pods and the other clusters'", d.testRemoteAndLocal},
		namedCase{"native names: a Service only a has, by its short names from a native and a derived member", d.testNativeNamesByShortName},
		namedCase{"consumption and provision clusters, changed at run time", d.testConsumersAndProviders},
		namedCase{"conflicting ports: each port of the derived Service reaches the clusters that serve it", d.testConflict},
	)
	// Alone: it takes a's apiserver away.
	t.Run("a's outage: its endpoints leave the derived Service after the endpoint TTL and come back", d.testOutage)
}

// TestDerivedMemberMigration migrates TestDerivedMember's cluster-c to our
// kube-proxy and native mode and back under traffic, on a local
// clusterset of its own: it restarts the controller with other flags and
// rolls kube-proxy node by node through the local clusterset's harness,
// which kind has not.
func TestDerivedMemberMigration(t *testing.T) {
	runBeside(t)
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" {
		t.Skipf("the migration restarts the controller with other flags and rolls kube-proxy node by node through the local clusterset's harness, not on MCS_E2E_PROVIDER=%s", p)
	}
	upLocalDerived(t, "e2emig").testMigration(t)
}

// upLocalDerived brings up the derived suite's local clusterset (its
// names prefixed with prefix): three clusters of two nodes, cluster-c's
// with upstream kube-proxy and served in derived mode.
func upLocalDerived(t *testing.T, prefix string) *derivedSuite {
	l := upLocalOpts(t, clusterset.Options{Clusters: 3, NodesPerCluster: 2, Prefix: prefix, UpstreamKubeProxy: []string{"cluster-c"}}, false,
		"--derived-members=cluster-c", "--derived-grace="+derivedGrace.String())
	ms := l.members()
	// The suite's b, where clients run and DNS is asked, is the
	// derived member.
	return &derivedSuite{suite: &suite{p: l, a: ms[0], b: ms[2], top: t}, l: l, nativeB: ms[1]}
}

type derivedSuite struct {
	*suite
	// l is the local clusterset, nil on kind.
	l       *local
	nativeB *member
}

func (d *derivedSuite) c() *member { return d.b }

// webFromAAndB creates the Service web in a and in b (b's changed by
// mutateB), with one echo pod each (web-a-1, web-b-1), and returns the
// pods' names: a's, b's, and both sorted.
func (d *derivedSuite) webFromAAndB(sp *space, mutateB func(*v1.ServiceSpec)) (podsA, podsB, both []string) {
	sp.service(d.a, "web", nil)
	sp.service(d.nativeB, "web", mutateB)
	podsA = podNames(sp.echoPods(d.a, "web", "web-a-1"))
	podsB = podNames(sp.echoPods(d.nativeB, "web", "web-b-1"))
	both = append(slices.Clone(podsA), podsB...)
	slices.Sort(both)
	return podsA, podsB, both
}

// derivedIP waits until c's import of name is served by its derived
// Service and returns that Service's cluster IP, checking that it is not
// the clusterset IP the native members got.
func (d *derivedSuite) derivedIP(t *testing.T, sp *space, name string) string {
	t.Helper()
	derived := export.DerivedName(sp.name, name)
	si := sp.waitImport(d.c(), name, "served by "+derived, func(si *mcsv1beta1.ServiceImport) bool {
		return si.Annotations[export.AnnotationDerivedService] == derived && len(si.Spec.IPs) == 1
	})
	svc, err := d.c().Client.CoreV1().Services(sp.name).Get(t.Context(), derived, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(svc.Spec.ClusterIPs, si.Spec.IPs) {
		t.Errorf("c's import names %v, its derived Service has %v", si.Spec.IPs, svc.Spec.ClusterIPs)
	}
	if vip := sp.vip(d.a, name); vip == si.Spec.IPs[0] {
		t.Errorf("c's import carries the clusterset IP %s", vip)
	}
	return si.Spec.IPs[0]
}

func (d *derivedSuite) testReach(t *testing.T) {
	sp := d.space(t, "e2e-der-reach")
	sp.service(d.a, "web", nil)
	sp.service(d.nativeB, "web", nil)
	want := append(podNames(sp.echoPods(d.a, "web", "web-a-1")), podNames(sp.echoPods(d.nativeB, "web", "web-b-1"))...)
	slices.Sort(want)
	client := sp.client(d.c(), "client")
	sp.export(d.a, "web")
	sp.export(d.nativeB, "web")
	ip := d.derivedIP(t, sp, "web")
	name := "web." + sp.name + ".svc.clusterset.local"
	d.waitDNS(t, client, name, []string{ip})
	waitAnswers(t, client, "tcp", hostPort(ip, 80), 30, want)
	// By name, resolved for every request as the pod's resolver does.
	waitAnswers(t, client, "tcp", hostPort(name, 80), 30, want)
	// The native members still reach it by the clusterset IP.
	nativeClient := sp.client(d.a, "client")
	waitAnswers(t, nativeClient, "tcp", hostPort(sp.vip(d.a, "web"), 80), 30, want)
	// Upstream kube-proxy knows nothing of the clusterset IP in c.
	if got := client.answers("tcp", hostPort(sp.vip(d.a, "web"), 80), 3); len(got) > 0 {
		t.Errorf("the clusterset IP answered in c, whose kube-proxy is upstream's: %v", got)
	}
}

func (d *derivedSuite) testHeadless(t *testing.T) {
	sp := d.space(t, "e2e-der-headless")
	sp.service(d.a, "db", func(spec *v1.ServiceSpec) {
		spec.ClusterIP = v1.ClusterIPNone
		spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolTCP}}
	})
	sp.createPod(d.a, statefulPod("db-0", "db-0", "db"))
	ips := sp.waitReady(d.a, "db-0")
	client := sp.client(d.c(), "client")
	sp.export(d.a, "db")
	sp.waitImport(d.c(), "db", "headless, served by its derived Service", func(si *mcsv1beta1.ServiceImport) bool {
		return si.Spec.Type == mcsv1beta1.Headless && si.Annotations[export.AnnotationDerivedService] != "" && len(si.Spec.IPs) == 0
	})
	want := []string{ips["db-0"]}
	d.waitDNS(t, client, "db."+sp.name+".svc.clusterset.local", want)
	d.waitDNS(t, client, export.DerivedName(sp.name, "db")+"."+sp.name+".svc.cluster.local", want)
	got, err := client.query(d.c().DNSIP, "db-0."+d.a.Name+".db."+sp.name+".svc.clusterset.local", dnsmessage.TypeA)
	if err != nil || !slices.Equal(got.A, want) {
		t.Errorf("per-endpoint name of db-0 in c: %s %v, want %v", got, err, want)
	}
	waitAnswers(t, client, "tcp", hostPort(ips["db-0"], 8080), 10, []string{"db-0"})
}

func (d *derivedSuite) testAffinity(t *testing.T) {
	sp := d.space(t, "e2e-der-affinity")
	sticky := clientIPAffinity(300)
	sp.service(d.a, "web", sticky)
	sp.service(d.nativeB, "web", sticky)
	sp.echoPods(d.a, "web", "web-a-1", "web-a-2")
	sp.echoPods(d.nativeB, "web", "web-b-1")
	client := sp.client(d.c(), "client")
	sp.export(d.a, "web")
	sp.export(d.nativeB, "web")
	ip := d.derivedIP(t, sp, "web")
	svc, err := d.c().Client.CoreV1().Services(sp.name).Get(t.Context(), export.DerivedName(sp.name, "web"), metav1.GetOptions{})
	if err != nil || svc.Spec.SessionAffinity != v1.ServiceAffinityClientIP {
		t.Fatalf("derived Service affinity: %v %v", svc, err)
	}
	eventually(t, 30*time.Second, "every exporting cluster's slices behind the derived Service", func() (bool, string) {
		got := client.answers("tcp", hostPort(ip, 80), 1)
		return len(got) == 1, fmt.Sprint(got)
	})
	got := client.answers("tcp", hostPort(ip, 80), 30)
	if len(got) != 1 {
		t.Errorf("30 requests from one client reached %v, want one pod (ClientIP affinity)", got)
	}
}

func (d *derivedSuite) testUnexport(t *testing.T) {
	sp := d.space(t, "e2e-der-unexport")
	sp.service(d.a, "web", nil)
	sp.echoPods(d.a, "web", "web-a-1")
	sp.export(d.a, "web")
	d.derivedIP(t, sp, "web")
	sp.unexport(d.a, "web")
	sp.waitNoImport(d.c(), "web")
	eventually(t, 30*time.Second, "the derived Service gone from c", func() (bool, string) {
		_, err := d.c().Client.CoreV1().Services(sp.name).Get(t.Context(), export.DerivedName(sp.name, "web"), metav1.GetOptions{})
		return err != nil, errString(err)
	})
}

// testMigration keeps a client on each of c's nodes asking web by its
// clusterset.local name (resolved for every request) every 50 ms while c
// goes, in the README's order, from upstream kube-proxy in derived mode to
// our kube-proxy (node by node), to native mode, back to derived mode and
// back to upstream kube-proxy (node by node), and reports the failed
// requests and when they happened.
func (d *derivedSuite) testMigration(t *testing.T) {
	sp := d.space(t, "e2e-der-migrate")
	sp.service(d.a, "web", nil)
	want := podNames(sp.echoPods(d.a, "web", "web-a-1"))
	// A client on each of c's nodes: mid-rollout, one node runs our
	// kube-proxy and the other upstream's.
	nodes := d.l.cluster(d.c()).Nodes
	var clients []*pod
	for i, n := range nodes {
		name := fmt.Sprintf("client-%d", i)
		sp.createPod(d.c(), onNode(clientPod(name), n.Name))
		sp.waitReady(d.c(), name)
		clients = append(clients, &pod{p: d.p, m: d.c(), ns: sp.name, name: name})
	}
	sp.export(d.a, "web")
	d.derivedIP(t, sp, "web")
	name := hostPort("web."+sp.name+".svc.clusterset.local", 80)
	for _, client := range clients {
		waitAnswers(t, client, "tcp", name, 10, want)
	}

	ctx, stop := context.WithCancel(t.Context())
	traffic := make(chan string, len(clients))
	start := time.Now()
	for _, client := range clients {
		go func() {
			out, _ := d.l.client(ctx, d.c(), sp.name, client.name, "ask", "--for=10m", "--interval=50ms", name)
			traffic <- string(out)
		}()
	}
	var marks []string
	mark := func(what string) {
		marks = append(marks, fmt.Sprintf("%6dms %s", time.Since(start).Milliseconds(), what))
	}
	settle := func() { time.Sleep(3 * time.Second) }
	roll := func(upstream bool) {
		for _, n := range nodes {
			mark(map[bool]string{false: "our", true: "upstream"}[upstream] + " kube-proxy rolled onto " + n.Name)
			if err := d.l.cs.SwapKubeProxy(t.Context(), n, upstream); err != nil {
				t.Fatal(err)
			}
			settle()
		}
	}
	settle()
	roll(false)
	mark("controller restarted with c native")
	d.l.restartController(t, "--derived-grace="+derivedGrace.String())
	vip := sp.vip(d.a, "web")
	sp.waitImport(d.c(), "web", "native, with the clusterset IP", func(si *mcsv1beta1.ServiceImport) bool {
		return si.Annotations[export.AnnotationDerivedService] == "" && slices.Equal(si.Spec.IPs, []string{vip})
	})
	mark("c's import native")
	eventually(t, derivedGrace+30*time.Second, "c's derived Service retired after the grace period", func() (bool, string) {
		_, err := d.c().Client.CoreV1().Services(sp.name).Get(t.Context(), export.DerivedName(sp.name, "web"), metav1.GetOptions{})
		return err != nil, errString(err)
	})
	mark("derived Service retired")
	settle()
	mark("controller restarted with c derived")
	d.l.restartController(t, "--derived-members=cluster-c", "--derived-grace="+derivedGrace.String())
	d.derivedIP(t, sp, "web")
	mark("c's import derived")
	settle()
	roll(true)
	stop()
	var out string
	for range clients {
		out += <-traffic + "\n"
	}

	var failed []string
	total := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		ms, who, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		total++
		if !slices.Contains(want, who) {
			at, _ := strconv.Atoi(ms)
			failed = append(failed, fmt.Sprintf("%dms", at))
		}
	}
	t.Logf("migration steps:\n%s", strings.Join(marks, "\n"))
	t.Logf("%d requests by name every 50ms during the migration, %d failed %v", total, len(failed), failed)
	if total < 100 {
		t.Errorf("only %d requests were made during the migration", total)
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d requests by name failed during the migration (at %v); steps:\n%s", len(failed), total, failed, strings.Join(marks, "\n"))
	}
}

// testConflict: a and b export web with different ports. The import has
// both (the oldest export's type and affinity, every export says
// PortConflict); c's derived Service has both, and each port reaches only
// the clusters that serve it, as in a native member.
func (d *derivedSuite) testConflict(t *testing.T) {
	sp := d.space(t, "e2e-der-conflict")
	_, podsB, both := d.webFromAAndB(sp, func(spec *v1.ServiceSpec) {
		spec.Ports = append(spec.Ports, v1.ServicePort{Name: "alt", Port: 81, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolTCP})
	})
	client := sp.client(d.c(), "client")
	sp.export(d.a, "web")
	sp.export(d.nativeB, "web")
	sp.waitImport(d.c(), "web", "with both ports", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.Ports) == 2 })
	ip := d.derivedIP(t, sp, "web")
	for _, m := range []*member{d.a, d.nativeB} {
		eventually(t, 30*time.Second, m.Name+"'s export to report the port conflict", func() (bool, string) {
			got := sp.exportConditions(m, "web")
			return strings.Contains(got, "Conflict=True/PortConflict"), got
		})
	}
	waitAnswers(t, client, "tcp", hostPort(ip, 80), 30, both)
	waitAnswers(t, client, "tcp", hostPort(ip, 81), 20, podsB)
}

// testOutage: a's apiserver goes away; after the endpoint TTL its
// endpoints leave c's derived slices (b still serves), and come back with
// it.
func (d *derivedSuite) testOutage(t *testing.T) {
	sp := d.space(t, "e2e-der-outage")
	_, podsB, both := d.webFromAAndB(sp, nil)
	client := sp.client(d.c(), "client")
	sp.export(d.a, "web")
	sp.export(d.nativeB, "web")
	ip := d.derivedIP(t, sp, "web")
	waitAnswers(t, client, "tcp", hostPort(ip, 80), 30, both)

	ttl := d.p.endpointTTL()
	start := d.p.stopAPIServer(t, d.a)
	down := time.Now()
	eventually(t, ttl+60*time.Second, "a's endpoints out of c's derived slices", func() (bool, string) {
		got := d.derivedSlices(t, sp, "web")
		return !strings.Contains(got, d.a.Name+"="), got
	})
	if elapsed := time.Since(down); elapsed < ttl/2 {
		t.Errorf("a's endpoints left after %v, before the endpoint TTL %v", elapsed, ttl)
	}
	t.Logf("OUTAGE a's endpoints left c's derived Service %v after a's apiserver stopped (endpoint TTL %v)", time.Since(down).Round(100*time.Millisecond), ttl)
	waitAnswers(t, client, "tcp", hostPort(ip, 80), 20, podsB)
	start(t)
	waitAnswers(t, client, "tcp", hostPort(ip, 80), 30, both)
}

// derivedSlices describes the EndpointSlices of name's derived Service in
// c: "<source cluster>=<addresses>" per slice, sorted.
func (d *derivedSuite) derivedSlices(t *testing.T, sp *space, name string) string {
	t.Helper()
	list, err := d.c().Client.DiscoveryV1().EndpointSlices(sp.name).List(t.Context(), metav1.ListOptions{
		LabelSelector: "kubernetes.io/service-name=" + export.DerivedName(sp.name, name)})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, s := range list.Items {
		var addrs []string
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
		out = append(out, s.Labels[mcsv1beta1.LabelSourceCluster]+"="+strings.Join(addrs, ","))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// testRemoteAndLocal: native names on a derived member. c has its own
// Service web with a pod; a exports web asking for RemoteAndLocal. c's
// upstream kube-proxy then balances c's web ClusterIP over c's pod and
// a's, from the slices the controller writes for c's Service.
func (d *derivedSuite) testRemoteAndLocal(t *testing.T) {
	sp := d.space(t, "e2e-der-native")
	sp.service(d.a, "web", nil)
	local := sp.service(d.c(), "web", nil)
	// c's Service is its owner's: joined only with consent.
	sp.acceptNativeNames(d.c(), "web", true)
	podsA := podNames(sp.echoPods(d.a, "web", "web-a-1"))
	podsC := podNames(sp.echoPods(d.c(), "web", "web-c-1"))
	client := sp.client(d.c(), "client")
	sp.exportWith(d.a, "web", mcsv1beta1.ServiceExportSpec{
		ExportedAnnotations: map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)},
	})
	d.derivedIP(t, sp, "web")
	want := append(slices.Clone(podsA), podsC...)
	slices.Sort(want)
	d.waitDNS(t, client, "web."+sp.name+".svc.cluster.local", []string{local.Spec.ClusterIP})
	waitAnswers(t, client, "tcp", hostPort(local.Spec.ClusterIP, 80), 40, want)
	// Turned off, c's Service is c's alone again.
	si, err := d.a.MCS.MulticlusterV1beta1().ServiceExports(sp.name).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	si.Spec.ExportedAnnotations = nil
	if _, err := d.a.MCS.MulticlusterV1beta1().ServiceExports(sp.name).Update(t.Context(), si, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswers(t, client, "tcp", hostPort(local.Spec.ClusterIP, 80), 30, podsC)
}

// testNativeNamesByShortName: an application calls a Service by its short
// cluster.local name and reaches it in another cluster. Only a has web; its
// exporter asks for RemoteAndLocal. A pod in b (native: our kube-proxy
// joins the endpoints) and a pod in c (derived: the controller writes
// them as slices of the Service it creates) call it as applications do,
// by web, web.<ns> and web.<ns>.svc.cluster.local, through their
// resolv.conf search path.
func (d *derivedSuite) testNativeNamesByShortName(t *testing.T) {
	sp := d.space(t, "e2e-der-story1")
	sp.service(d.a, "web", nil)
	podsA := podNames(sp.echoPods(d.a, "web", "web-a-1"))
	clients := []*pod{sp.client(d.nativeB, "client"), sp.client(d.c(), "client")}
	sp.exportWith(d.a, "web", mcsv1beta1.ServiceExportSpec{
		ExportedAnnotations: map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)},
	})
	for _, client := range clients {
		for _, name := range []string{"web", "web." + sp.name, "web." + sp.name + ".svc.cluster.local"} {
			waitAnswers(t, client, "tcp", hostPort(name, 80), 5, podsA)
		}
	}
}

// testConsumersAndProviders: the exporters name the consumer clusters and
// the provider clusters (in the oldest export's exportedAnnotations); the
// others get no import, or serve nothing, and changing either list
// converges at run time, in native and derived members alike.
func (d *derivedSuite) testConsumersAndProviders(t *testing.T) {
	sp := d.space(t, "e2e-der-sets")
	_, podsB, both := d.webFromAAndB(sp, nil)
	clientB, clientC := sp.client(d.nativeB, "client"), sp.client(d.c(), "client")
	name := hostPort("web."+sp.name+".svc.clusterset.local", 80)
	setAnnotations := func(annotations map[string]string) {
		t.Helper()
		se, err := d.a.MCS.MulticlusterV1beta1().ServiceExports(sp.name).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		se.Spec.ExportedAnnotations = annotations
		if _, err := d.a.MCS.MulticlusterV1beta1().ServiceExports(sp.name).Update(t.Context(), se, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// a's export is the oldest: its annotations are the import's.
	sp.exportWith(d.a, "web", mcsv1beta1.ServiceExportSpec{ExportedAnnotations: map[string]string{
		"multiclusterservices.k8s.io/consumer-clusters": d.a.Name + "," + d.nativeB.Name,
	}})
	sp.waitImport(d.a, "web", "exported by a", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Status.Clusters) == 1 })
	// Creation timestamps have a one-second resolution, and a tie goes to
	// the lower cluster ID (on kind, b's mcs-a).
	time.Sleep(1100 * time.Millisecond)
	sp.export(d.nativeB, "web")
	waitAnswers(t, clientB, "tcp", name, 20, both)
	sp.waitNoImport(d.c(), "web")
	if _, err := d.c().Client.CoreV1().Services(sp.name).Get(t.Context(), export.DerivedName(sp.name, "web"), metav1.GetOptions{}); err == nil {
		t.Errorf("%s, no consumer, got a derived Service", d.c().Name)
	}

	setAnnotations(map[string]string{"multiclusterservices.k8s.io/consumer-clusters": d.a.Name + "," + d.nativeB.Name + "," + d.c().Name})
	d.derivedIP(t, sp, "web")
	waitAnswers(t, clientC, "tcp", name, 20, both)

	setAnnotations(map[string]string{"multiclusterservices.k8s.io/provider-clusters": d.nativeB.Name})
	waitAnswers(t, clientC, "tcp", name, 20, podsB)
	waitAnswers(t, clientB, "tcp", name, 20, podsB)
	eventually(t, 30*time.Second, "a's export to say it is not a provider", func() (bool, string) {
		got := sp.exportConditions(d.a, "web")
		return strings.Contains(got, "Ready=False/NotAProvider"), got
	})
}

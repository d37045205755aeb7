package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// TestIngressMember runs a clusterset of three clusters in which
// cluster-c's pods have cluster-a's pod CIDR (the same pod IPs) and are
// routed nowhere outside c's own nodes: a and b cannot reach c's pods, nor
// c theirs. The mcs-controller serves c with --ingress-members: between
// c and the others, exports are reached through NodePort ingress
// Services, while a and b still reach each other's pods directly.
func TestIngressMember(t *testing.T) {
	runBeside(t)
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" {
		t.Skipf("the ingress cases run on a local clusterset with an overlapping pod network, not on MCS_E2E_PROVIDER=%s", p)
	}
	ingressCases(t, upLocalOpts(t, ingressClusterset("e2eing"), false, "--ingress-members=cluster-c"))
}

// TestIngressMemberPullMode runs TestIngressMember's cases in pull mode:
// the planner takes --ingress-members, c's agent publishes its nodes'
// entry points and its exports' ingress Services and makes those the plan
// asks of it, and each agent imports c's entry points or pods as the plan
// says it reaches c. c doubles as the hub.
func TestIngressMemberPullMode(t *testing.T) {
	runBeside(t)
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" {
		t.Skipf("the ingress cases run on a local clusterset with an overlapping pod network, not on MCS_E2E_PROVIDER=%s", p)
	}
	ingressCases(t, upLocalPullWith(t, ingressClusterset("e2eingp"), pullFlags{planner: []string{"--ingress-members=cluster-c"}}))
}

// ingressClusterset is the ingress cases' clusterset: three clusters of
// two nodes, c's pods with a's pod CIDR, routed only among c's nodes.
func ingressClusterset(prefix string) clusterset.Options {
	return clusterset.Options{Clusters: 3, NodesPerCluster: 2, Prefix: prefix, PrivatePods: map[string]string{"cluster-c": "cluster-a"}}
}

// ingressCases are the ingress cases both modes share, on l.
func ingressCases(t *testing.T, l *local) {
	ms := l.members()
	s := &ingressSuite{suite: &suite{p: l, a: ms[0], b: ms[1], top: t}, l: l, c: ms[2]}
	if l.cluster(s.a).PodCIDR != l.cluster(s.c).PodCIDR {
		t.Fatalf("c's pod CIDR %s does not overlap a's %s", l.cluster(s.c).PodCIDR, l.cluster(s.a).PodCIDR)
	}
	t.Run("an export of a and c is reached from every cluster, every pod answers, shares by endpoints and entry points", s.testReach)
	t.Run("c's pods scaled to zero take c out", s.testScaleToZero)
	t.Run("a LoadBalancer Service exported from c is entered at its load-balancer address", s.testLoadBalancer)
	t.Run("figure: requests through c's ingress against a's pods", s.testFigure)
	// Last: c's second node stays off the network.
	t.Run("a node of c taken off the network leaves c's entry points", s.testNodeFails)
}

type ingressSuite struct {
	*suite
	l *local
	c *member
}

// webInAAndC creates Service web in a (pods web-a-1, web-a-2) and in c
// (web-c-1..web-c-4, on c's first node unless spread), exports both and
// returns the pods' IPs by name.
func (s *ingressSuite) webInAAndC(sp *space, spread bool) map[string]string {
	sp.t.Helper()
	sp.service(s.a, "web", nil)
	sp.service(s.c, "web", nil)
	ips := sp.echoPods(s.a, "web", "web-a-1", "web-a-2")
	for i := 1; i <= 4; i++ {
		p := echoPod(fmt.Sprintf("web-c-%d", i), "web")
		if !spread {
			p = onNode(p, s.c.Node)
		}
		sp.createPod(s.c, p)
	}
	maps.Copy(ips, sp.waitReady(s.c, "web-c-1", "web-c-2", "web-c-3", "web-c-4"))
	sp.export(s.a, "web")
	sp.export(s.c, "web")
	return ips
}

// entryPoints returns the addresses of m's imported slices of name from
// source cluster source, sorted, and whether they are all ready.
func entryPoints(t *testing.T, sp *space, m *member, name, source string) ([]string, bool) {
	t.Helper()
	list, err := m.Client.DiscoveryV1().EndpointSlices(sp.name).List(t.Context(), metav1.ListOptions{
		LabelSelector: mcsv1beta1.LabelServiceName + "=" + name + "," + mcsv1beta1.LabelSourceCluster + "=" + source,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ready := true
	for _, sl := range list.Items {
		for _, ep := range sl.Endpoints {
			out = append(out, ep.Addresses...)
			ready = ready && (ep.Conditions.Ready == nil || *ep.Conditions.Ready)
		}
	}
	slices.Sort(out)
	return out, ready
}

func (s *ingressSuite) nodeIPs(m *member) []string {
	var out []string
	for _, n := range s.l.cluster(m).Nodes {
		out = append(out, n.IP)
	}
	slices.Sort(out)
	return out
}

func (s *ingressSuite) testReach(t *testing.T) {
	sp := s.space(t, "e2e-ing-reach")
	ips := s.webInAAndC(sp, true)
	all := podNames(ips)
	fromB := sp.client(s.b, "client")
	vip := sp.vip(s.b, "web")

	// What b holds for c: c's node addresses on the ingress's node port,
	// never c's pod IPs (which are a's too).
	ingress, err := s.c.Client.CoreV1().Services(sp.name).Get(t.Context(), export.IngressName(sp.name, "web"), metav1.GetOptions{})
	eventually(t, 30*time.Second, "c's ingress Service with a node port", func() (bool, string) {
		ingress, err = s.c.Client.CoreV1().Services(sp.name).Get(t.Context(), export.IngressName(sp.name, "web"), metav1.GetOptions{})
		return err == nil && ingress.Spec.Ports[0].NodePort != 0, errString(err)
	})
	if ingress.Spec.Type != v1.ServiceTypeNodePort || ingress.Spec.Selector["app"] != "web" {
		t.Errorf("c's ingress Service: %+v", ingress.Spec)
	}
	eventually(t, 30*time.Second, "b's slices for c to hold c's nodes", func() (bool, string) {
		got, ready := entryPoints(t, sp, s.b, "web", s.c.Name)
		return slices.Equal(got, s.nodeIPs(s.c)) && ready, fmt.Sprint(got, ready)
	})
	list, _ := s.b.Client.DiscoveryV1().EndpointSlices(sp.name).List(t.Context(), metav1.ListOptions{LabelSelector: mcsv1beta1.LabelSourceCluster + "=" + s.c.Name})
	for _, sl := range list.Items {
		for _, p := range sl.Ports {
			if *p.Port != ingress.Spec.Ports[0].NodePort {
				t.Errorf("b's slice %s for c has port %d, want c's node port %d", sl.Name, *p.Port, ingress.Spec.Ports[0].NodePort)
			}
		}
	}
	sp.waitExportCondition(s.c, "web", "IngressReady", "True/EntryPointsReady")

	// c's pods are out of b's reach: their IPs are a's pod network, where
	// b's requests go.
	shared := 0
	for name, ip := range ips {
		if !strings.HasPrefix(name, "web-c-") {
			continue
		}
		if got := fromB.ask("tcp", hostPort(ip, 8080)); strings.HasPrefix(got, "web-c-") {
			t.Errorf("b reached c's pod %s at %s directly", got, ip)
		} else if got != "" {
			shared++
		}
	}
	t.Logf("%d of c's 4 pod IPs answered from b by a pod of a with the same IP", shared)

	// Every pod of both clusters answers b, by clusterset IP and name.
	waitAnswers(t, fromB, "tcp", hostPort(vip, 80), 60, all)
	waitAnswers(t, fromB, "tcp", hostPort("web."+sp.name+".svc.clusterset.local", 80), 60, all)
	// c reaches a's pods through a's ingress and its own directly; a
	// reaches c's through c's.
	fromC := sp.client(s.c, "client")
	waitAnswers(t, fromC, "tcp", hostPort(sp.vip(s.c, "web"), 80), 60, all)
	fromA := sp.client(s.a, "client")
	waitAnswers(t, fromA, "tcp", hostPort(sp.vip(s.a, "web"), 80), 60, all)

	// Shares: b's proxy weighs its endpoints equally, a's 2 pods and c's
	// 2 entry points, so c takes half of b's requests, whatever the
	// number of c's pods (4), and spreads them over its pods.
	const n = 400
	counts := fromB.countAnswers(hostPort(vip, 80), n)
	toC := 0
	for name, k := range counts {
		if strings.HasPrefix(name, "web-c-") {
			toC += k
		}
	}
	t.Logf("b's %d requests: %v (c: %d)", n, counts, toC)
	if counts[""] > 0 {
		t.Errorf("%d of %d requests from b failed", counts[""], n)
	}
	// Half, within 5 standard deviations (10 requests at n=400).
	if toC < n/2-50 || toC > n/2+50 {
		t.Errorf("c answered %d of %d requests from b, want about half (2 entry points of 4 endpoints)", toC, n)
	}
}

func (s *ingressSuite) testScaleToZero(t *testing.T) {
	sp := s.space(t, "e2e-ing-zero")
	ips := s.webInAAndC(sp, false)
	fromB := sp.client(s.b, "client")
	vip := sp.vip(s.b, "web")
	waitAnswers(t, fromB, "tcp", hostPort(vip, 80), 60, podNames(ips))
	for i := 1; i <= 4; i++ {
		if err := s.c.Client.CoreV1().Pods(sp.name).Delete(t.Context(), fmt.Sprintf("web-c-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "b's entry points of c to be not ready", func() (bool, string) {
		got, ready := entryPoints(t, sp, s.b, "web", s.c.Name)
		return len(got) > 0 && !ready, fmt.Sprint(got, ready)
	})
	eventually(t, 30*time.Second, "every request from b to be answered by a", func() (bool, string) {
		counts := fromB.countAnswers(hostPort(vip, 80), 40)
		return counts["web-a-1"]+counts["web-a-2"] == 40, fmt.Sprint(counts)
	})
	// Its entry points stay, not ready: the ingress still serves.
	sp.waitExportCondition(s.c, "web", "IngressReady", "True/EntryPointsReady")
}

func (s *ingressSuite) testNodeFails(t *testing.T) {
	sp := s.space(t, "e2e-ing-node")
	// c's pods all on its first node: the second is only an entry point.
	ips := s.webInAAndC(sp, false)
	fromB := sp.client(s.b, "client")
	vip := sp.vip(s.b, "web")
	waitAnswers(t, fromB, "tcp", hostPort(vip, 80), 60, podNames(ips))
	eventually(t, 30*time.Second, "b's slices for c to hold both of c's nodes", func() (bool, string) {
		got, _ := entryPoints(t, sp, s.b, "web", s.c.Name)
		return slices.Equal(got, s.nodeIPs(s.c)), fmt.Sprint(got)
	})
	second := s.l.cluster(s.c).Nodes[1]
	if err := second.Fail(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "b's slices for c to leave "+second.Name, func() (bool, string) {
		got, _ := entryPoints(t, sp, s.b, "web", s.c.Name)
		return slices.Equal(got, []string{s.l.cluster(s.c).Nodes[0].IP}), fmt.Sprint(got)
	})
	// Once b's proxy has the change, no request goes to the lost node.
	eventually(t, 30*time.Second, "every request from b to be answered", func() (bool, string) {
		counts := fromB.countAnswers(hostPort(vip, 80), 60)
		return counts[""] == 0, fmt.Sprint(counts)
	})
	// Every pod still answers, c's through its first node, and no request
	// fails. c takes a third of b's requests (one entry point beside a's
	// two pods) and spreads it over its 4 pods: asked until each has
	// answered (60 requests leave one of them out about once in 80 runs).
	want := podNames(ips)
	seen, failed := map[string]bool{}, 0
	for round := 0; round < 5 && len(seen) < len(want); round++ {
		for _, name := range fromB.askEach("tcp", hostPort(vip, 80), 60) {
			if name == "" {
				failed++
			} else {
				seen[name] = true
			}
		}
	}
	if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, want) || failed > 0 {
		t.Errorf("answers from b after c's second node failed: %v and %d failed requests, want every pod %v and none failed", got, failed, want)
	}
}

func (s *ingressSuite) testLoadBalancer(t *testing.T) {
	sp := s.space(t, "e2e-ing-lb")
	svc := sp.service(s.c, "lb", func(spec *v1.ServiceSpec) { spec.Type = v1.ServiceTypeLoadBalancer })
	ips := sp.echoPods(s.c, "lb", "lb-c-1", "lb-c-2")
	sp.export(s.c, "lb")
	var lbIP string
	eventually(t, 30*time.Second, "a load-balancer address for c's Service lb", func() (bool, string) {
		got, err := s.c.Client.CoreV1().Services(sp.name).Get(t.Context(), svc.Name, metav1.GetOptions{})
		if err != nil || len(got.Status.LoadBalancer.Ingress) == 0 {
			return false, errString(err)
		}
		lbIP = got.Status.LoadBalancer.Ingress[0].IP
		return true, ""
	})
	// No ingress Service of the controller's: the export is its own.
	if _, err := s.c.Client.CoreV1().Services(sp.name).Get(t.Context(), export.IngressName(sp.name, "lb"), metav1.GetOptions{}); err == nil {
		t.Error("the controller made an ingress Service for a LoadBalancer export")
	}
	eventually(t, 30*time.Second, "b's slices for c to hold the load-balancer address", func() (bool, string) {
		got, ready := entryPoints(t, sp, s.b, "lb", s.c.Name)
		return slices.Equal(got, []string{lbIP}) && ready, fmt.Sprint(got, ready)
	})
	fromB := sp.client(s.b, "client")
	waitAnswers(t, fromB, "tcp", hostPort(sp.vip(s.b, "lb"), 80), 30, podNames(ips))
	sp.waitExportCondition(s.c, "lb", "IngressReady", "True/EntryPointsReady")
}

// testFigure measures sequential requests from b (a new TCP connection
// each) to a Service whose pods are in a (flat: b's proxy DNATs to the
// pod) and to one whose pods are in c (through c's node port: a second
// DNAT and a masquerade on c's node), alternating, and logs the ratio.
// It never fails on timing.
func (s *ingressSuite) testFigure(t *testing.T) {
	sp := s.space(t, "e2e-ing-figure")
	sp.service(s.a, "flat", nil)
	sp.service(s.c, "priv", nil)
	sp.echoPods(s.a, "flat", "flat-a-1")
	sp.createPod(s.c, onNode(echoPod("priv-c-1", "priv"), s.c.Node))
	sp.waitReady(s.c, "priv-c-1")
	sp.export(s.a, "flat")
	sp.export(s.c, "priv")
	fromB := sp.client(s.b, "client")
	flat, priv := hostPort(sp.vip(s.b, "flat"), 80), hostPort(sp.vip(s.b, "priv"), 80)
	waitAnswers(t, fromB, "tcp", flat, 5, []string{"flat-a-1"})
	waitAnswers(t, fromB, "tcp", priv, 5, []string{"priv-c-1"})
	const round = 3 * time.Second
	var flatN, privN int
	for range 3 {
		flatN += askFor(t, fromB, flat, round)
		privN += askFor(t, fromB, priv, round)
	}
	total := 3 * round
	flatRate, privRate := float64(flatN)/total.Seconds(), float64(privN)/total.Seconds()
	t.Logf("FIGURE ingress: sequential TCP requests from b, %v each, alternating: flat (a's pod) %.0f/s (mean %.3f ms), ingress (c's node port) %.0f/s (mean %.3f ms); ingress/flat latency ratio %.2f",
		total, flatRate, 1000/flatRate, privRate, 1000/privRate, flatRate/privRate)
}

// askFor sends requests to addr one after the other for d and returns how
// many were answered.
func askFor(t *testing.T, c *pod, addr string, d time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d+20*time.Second)
	defer cancel()
	out, err := c.p.client(ctx, c.m, c.ns, c.name, "ask", "--for="+d.String(), addr)
	if err != nil {
		t.Fatalf("asking %s: %v", addr, err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if _, name, ok := strings.Cut(line, " "); ok && name != "-" {
			if _, err := strconv.Atoi(strings.Fields(line)[0]); err == nil {
				n++
			}
		}
	}
	return n
}

// waitExportCondition waits for one condition of m's export of name to
// be want ("Status/Reason"). m's own controller writes it (in pull mode
// m's agent, from the plan), in no set order with the slices other
// members' controllers write from the same plan.
func (sp *space) waitExportCondition(m *member, name, typ, want string) {
	sp.t.Helper()
	eventually(sp.t, 30*time.Second, fmt.Sprintf("%s's export of %s: %s %s", m.Name, name, typ, want), func() (bool, string) {
		got := sp.exportCondition(m, name, typ)
		return got == want, got
	})
}

// exportCondition renders one condition of m's export of name as
// "Status/Reason", or "" when it has none.
func (sp *space) exportCondition(m *member, name, typ string) string {
	se, err := m.MCS.MulticlusterV1beta1().ServiceExports(sp.name).Get(sp.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	for _, c := range se.Status.Conditions {
		if c.Type == typ {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}

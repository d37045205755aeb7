package kubectlmcs

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// serveTCP answers every connection with the next of answers (in turn);
// "" closes it without a word.
func serveTCP(t *testing.T, answers ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			a := answers[int(n.Add(1)-1)%len(answers)]
			if a != "" {
				fmt.Fprintln(c, a)
			}
			c.Close()
		}
	}()
	return l.Addr().String()
}

// serveUDP answers every datagram with answer.
func serveUDP(t *testing.T, answer string) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteTo([]byte(answer+"\n"), from)
		}
	}()
	return c.LocalAddr().String()
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T, network string) string {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := c.LocalAddr().String()
		c.Close()
		return addr
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestProbeTellsWhichSourceAnswered runs the probe against real sockets:
// a clusterset IP that spreads its connections over two sources' pods
// (what kube-proxy's rules do), each source's pods reached directly, one
// pod of a third source that does not answer, a UDP port, and a server
// that sends nothing; then checks the verdicts diagnose prints.
func TestProbeTellsWhichSourceAnswered(t *testing.T) {
	vip := serveTCP(t, "web-a-1", "web-b-1", "web-a-1", "web-b-1")
	silentVIP := serveTCP(t, "")
	spec := ProbeSpec{
		Name: "web.demo.svc.clusterset.local", Family: "ip4", Attempts: 4, TimeoutMillis: 500,
		Targets: []ProbeTarget{
			{Address: vip, Protocol: v1.ProtocolTCP},
			{Address: silentVIP, Protocol: v1.ProtocolTCP},
			{Address: serveUDP(t, "web-a-1"), Protocol: v1.ProtocolUDP},
			{Cluster: "cluster-a", Address: serveTCP(t, "web-a-1"), Protocol: v1.ProtocolTCP},
			{Cluster: "cluster-a", Address: serveUDP(t, "web-a-1"), Protocol: v1.ProtocolUDP},
			{Cluster: "cluster-b", Address: serveTCP(t, "web-b-1"), Protocol: v1.ProtocolTCP},
			{Cluster: "cluster-c", Address: closedPort(t, "tcp"), Protocol: v1.ProtocolTCP},
			{Cluster: "cluster-c", Address: closedPort(t, "udp"), Protocol: v1.ProtocolUDP},
		},
	}
	var asked string
	lookup := func(_ context.Context, family, name string) ([]net.IP, error) {
		asked = family + " " + name
		return []net.IP{net.ParseIP("10.96.0.10")}, nil
	}
	r := Probe(t.Context(), spec, lookup)
	if asked != "ip4 web.demo.svc.clusterset.local" {
		t.Errorf("asked DNS %q", asked)
	}
	reached := map[string]string{}
	for _, h := range r.Hops {
		reached[h.Cluster+" "+h.Address+"/"+string(h.Protocol)] = fmt.Sprintf("%d/%d %v", h.Reached, h.Attempts, h.Answers)
	}
	want := map[string]string{
		" " + vip + "/TCP":                              "4/4 map[web-a-1:2 web-b-1:2]",
		" " + silentVIP + "/TCP":                        "4/4 map[:4]",
		" " + spec.Targets[2].Address + "/UDP":          "4/4 map[web-a-1:4]",
		"cluster-a " + spec.Targets[3].Address + "/TCP": "1/1 map[web-a-1:1]",
		"cluster-a " + spec.Targets[4].Address + "/UDP": "1/1 map[web-a-1:1]",
		"cluster-b " + spec.Targets[5].Address + "/TCP": "1/1 map[web-b-1:1]",
		"cluster-c " + spec.Targets[6].Address + "/TCP": "0/1 map[]",
		"cluster-c " + spec.Targets[7].Address + "/UDP": "0/1 map[]",
	}
	if diff := cmp.Diff(want, reached); diff != "" {
		t.Errorf("hops (-want +got):\n%s", diff)
	}

	m := MemberState{Context: "cluster-b", Probe: &ProbeOutcome{Pod: "mcs-probe-x", Node: "node-1", Spec: spec, Result: &r}}
	checks := probeChecks(m)
	byCluster := map[string]Check{}
	for _, c := range checks {
		byCluster[c.Subject] = c
	}
	if c := byCluster["probe: clusterset IP "+vip+"/TCP"]; !c.Passed || !strings.HasSuffix(c.Detail, "answered by cluster-a (2), cluster-b (2)") {
		t.Errorf("the clusterset IP's verdict does not name both sources: %+v", c)
	}
	if c := byCluster["probe: clusterset IP "+silentVIP+"/TCP"]; !c.Passed || !strings.Contains(c.Detail, "sent nothing to tell its source by (4)") {
		t.Errorf("a silent server's verdict: %+v", c)
	}
	if c := byCluster["probe: cluster-a's endpoints"]; !c.Passed || c.Detail != "2 of 2 reached from probe pod mcs-probe-x on node-1" {
		t.Errorf("cluster-a's endpoints: %+v", c)
	}
	c := byCluster["probe: cluster-c's endpoints"]
	if c.Passed || !strings.HasPrefix(c.Detail, "2 of 2 not reached") || !strings.Contains(c.Detail, "connection refused") || c.Fix == "" {
		t.Errorf("cluster-c's endpoints do not answer, the verdict: %+v", c)
	}
	if Failed(checks) != 1 {
		t.Errorf("%d failed checks, want 1 (cluster-c): %+v", Failed(checks), checks)
	}
}

// TestProbeVerdicts covers what the probe pod itself cannot say: a
// clusterset IP that answered some connections only, and a pod that never
// ran.
func TestProbeVerdicts(t *testing.T) {
	partial := &ProbeResult{Hops: []ProbeHop{{ProbeTarget: ProbeTarget{Address: "10.250.0.1:80", Protocol: v1.ProtocolTCP},
		Attempts: 4, Reached: 3, Answers: map[string]int{"x": 3}, Err: "connection refused"}}}
	got := probeChecks(MemberState{Context: "b", Probe: &ProbeOutcome{Pod: "p", Node: "n", Result: partial}})
	if len(got) != 1 || got[0].Passed || got[0].Detail != "3 of 4 connections from probe pod p on n answered; last error: connection refused" {
		t.Errorf("a clusterset IP that refused one connection in four: %+v", got)
	}
	got = probeChecks(MemberState{Context: "b", Probe: &ProbeOutcome{Pod: "p", Err: "the probe pod cannot start: ErrImageNeverPull: no image"}})
	if len(got) != 1 || got[0].Passed || !strings.Contains(got[0].Detail, "ErrImageNeverPull") || !strings.Contains(got[0].Fix, "--probe-image") {
		t.Errorf("a probe pod that never ran: %+v", got)
	}
	got = probeChecks(MemberState{Context: "b", Probe: &ProbeOutcome{Err: `creating the probe pod in namespace demo: pods is forbidden: User "dev" cannot create resource "pods"`}})
	if len(got) != 1 || got[0].Passed || !strings.HasPrefix(got[0].Detail, "creating the probe pod") || !strings.Contains(got[0].Fix, "permissions") {
		t.Errorf("a probe pod that could not be created: %+v", got)
	}
	dns := probeDNS(ProbeOutcome{Pod: "p", Result: &ProbeResult{DNS: ProbeDNS{Err: "lookup web.demo.svc.clusterset.local: no such host"}}})
	if !dns.Queried || dns.From != "probe pod p" || !strings.Contains(dns.Err, "no such host") {
		t.Errorf("the probe's DNS answer as diagnose's: %+v", dns)
	}
}

// TestProbeSpecFor checks what a probe is told for an import: every
// clusterset IP on every port, each source's ready endpoints on the port
// its slice gives the import's port (by name), the question's family.
func TestProbeSpecFor(t *testing.T) {
	ready := func(b bool, ips ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: ips, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(b)}}
	}
	slice := func(cluster string, port int32, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mcsv1beta1.LabelSourceCluster: cluster}},
			Ports:      []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(v1.ProtocolTCP)}},
			Endpoints:  eps,
		}
	}
	si := &mcsv1beta1.ServiceImport{
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"fd00:250::5", "10.250.0.5"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}, {Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}}},
		Status: mcsv1beta1.ServiceImportStatus{Clusters: []mcsv1beta1.ClusterStatus{{Cluster: "cluster-a"}, {Cluster: "cluster-b"}}},
	}
	m := MemberState{Import: si, Slices: []discoveryv1.EndpointSlice{
		slice("cluster-a", 8080, ready(true, "fd00:a::1"), ready(false, "fd00:a::2")),
		slice("cluster-b", 9090, ready(true, "fd00:b::1")),
	}}
	spec := probeSpecFor(m, "demo/web", 2*time.Second)
	want := ProbeSpec{Name: "web.demo.svc.clusterset.local", Family: "ip6", Attempts: 8, TimeoutMillis: 2000, Targets: []ProbeTarget{
		{Address: "[fd00:250::5]:80", Protocol: v1.ProtocolTCP},
		{Address: "[fd00:250::5]:53", Protocol: v1.ProtocolUDP},
		{Address: "10.250.0.5:80", Protocol: v1.ProtocolTCP},
		{Address: "10.250.0.5:53", Protocol: v1.ProtocolUDP},
		// The slices carry no port named dns: no endpoint target for it.
		{Cluster: "cluster-a", Address: "[fd00:a::1]:8080", Protocol: v1.ProtocolTCP},
		{Cluster: "cluster-b", Address: "[fd00:b::1]:9090", Protocol: v1.ProtocolTCP},
	}}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}

	// Headless: no clusterset IP; DNS answers the endpoints.
	si.Spec.Type, si.Spec.IPs = mcsv1beta1.Headless, nil
	spec = probeSpecFor(m, "demo/web", time.Second)
	if spec.Family != "ip6" || len(spec.Targets) != 2 || spec.Targets[0].Cluster != "cluster-a" {
		t.Errorf("headless spec: %+v", spec)
	}
}

// TestProbePodIsRestricted checks the probe pod against the restricted
// Pod Security Standard, so that namespaces enforcing it admit it.
func TestProbePodIsRestricted(t *testing.T) {
	pod, err := probePod("demo", "demo/web", DefaultProbeImage, ProbeSpec{Name: "web.demo.svc.clusterset.local"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	result := policy.AggregateCheckResults(evaluator.EvaluatePod(api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}, &pod.ObjectMeta, &pod.Spec))
	if !result.Allowed {
		t.Errorf("the probe pod violates the restricted standard: %s: %s", result.ForbiddenReason(), result.ForbiddenDetail())
	}
	if pod.Spec.RestartPolicy != v1.RestartPolicyNever || pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("the probe pod must run once, end by itself and have no API token: %+v", pod.Spec)
	}
	if got := pod.Spec.Containers[0].Command[:2]; got[0] != probeBinary || got[1] != "probe" {
		t.Errorf("command %v", got)
	}
}

// TestParseProbeLog reads the result among other lines, and says what the
// pod printed when there is none.
func TestParseProbeLog(t *testing.T) {
	r, err := parseProbeLog([]byte("podimage: starting\n{\"dns\":{\"answer\":[\"10.0.0.1\"]},\"hops\":[]}\n"))
	if err != nil || len(r.DNS.Answer) != 1 {
		t.Errorf("parse: %+v, %v", r, err)
	}
	_, err = parseProbeLog([]byte("exec /kubectl-mcs: no such file or directory\n"))
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a log without a result: %v", err)
	}
}

// TestDiagnoseTrustsWhatKubeProxyTrusts: slices labelled with an import's
// name that kube-proxy drops (another manager's, FQDN endpoints) are
// neither checked nor probed; diagnose says it ignored each, and a
// fabricated source does not pass. An import of an untrusted manager is
// said to be ignored.
func TestDiagnoseTrustsWhatKubeProxyTrusts(t *testing.T) {
	slice := func(name, cluster, manager string, at discoveryv1.AddressType, addr string) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{mcsv1beta1.LabelServiceName: "web",
				mcsv1beta1.LabelSourceCluster: cluster, discoveryv1.LabelManagedBy: manager}},
			AddressType: at,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
	}
	all := []discoveryv1.EndpointSlice{
		slice("web-cluster-a", "cluster-a", mcsproxy.DefaultManagedBy, discoveryv1.AddressTypeIPv4, "10.1.0.1"),
		// Written by a tenant: another manager, a source that is none.
		slice("web-evil", "cluster-evil", "alice", discoveryv1.AddressTypeIPv4, "169.254.169.254"),
		// The controller's label, FQDN endpoints: kube-proxy cannot proxy them.
		slice("web-fqdn", "cluster-a", mcsproxy.DefaultManagedBy, discoveryv1.AddressTypeFQDN, "db.example.com"),
	}
	// diagnose's defaults, kube-proxy's.
	trust := trustOptions{managers: []string{mcsproxy.DefaultManagedBy}, cidrs: mcsproxy.DefaultClusterSetIPCIDRs}.proxyOptions()
	kept, ignored := trustedSlices(all, trust)
	if len(kept) != 1 || kept[0].Name != "web-cluster-a" || len(ignored) != 2 {
		t.Fatalf("kept %d, ignored %+v; want web-cluster-a kept, web-evil and web-fqdn ignored", len(kept), ignored)
	}
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.5"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
		Status: mcsv1beta1.ServiceImportStatus{Clusters: []mcsv1beta1.ClusterStatus{{Cluster: "cluster-a"}, {Cluster: "cluster-evil"}}},
	}
	m := MemberState{Context: "b", Import: si, Slices: kept, Ignored: ignored}
	for _, target := range probeSpecFor(m, "demo/web", time.Second).Targets {
		if target.Cluster == "cluster-evil" || strings.HasPrefix(target.Address, "169.254.") {
			t.Errorf("the probe dials %+v, of a slice kube-proxy ignores", target)
		}
	}
	said := map[string]Check{}
	for _, c := range importChecks(m, ServiceState{Namespace: "demo", Name: "web"}, "demo/web") {
		said[c.Subject] = c
	}
	for _, name := range []string{"web-evil", "web-fqdn"} {
		if c, ok := said["EndpointSlice "+name]; !ok || c.Passed || !strings.Contains(c.Detail, "ignored") {
			t.Errorf("nothing said of ignored slice %s: %+v", name, c)
		}
	}
	if c := said["EndpointSlices from cluster-evil"]; c.Passed {
		t.Errorf("the fabricated source passes: %+v", c)
	}

	// An import another manager labelled: kube-proxy ignores it.
	si.Labels[mcsproxy.LabelImportManagedBy] = "alice"
	_, err := mcsproxy.ServiceForImport(si, trust)
	m.ImportIgnored = fmt.Sprint(err)
	for _, c := range importChecks(m, ServiceState{Namespace: "demo", Name: "web"}, "demo/web") {
		if c.Subject == "ServiceImport" && (c.Passed || !strings.Contains(c.Detail, "kube-proxy ignores it")) {
			t.Errorf("an untrusted import: %+v", c)
		}
	}
}

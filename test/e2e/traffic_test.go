package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
)

// waitDNS waits until name resolves (A records) to exactly want, asked
// from a pod of B through B's kube-dns.
func (s *suite) waitDNS(t *testing.T, client *pod, name string, want []string) {
	t.Helper()
	eventually(t, 30*time.Second, name+" to resolve to "+strings.Join(want, ","), func() (bool, string) {
		got, err := client.query(s.b.DNSIP, name, dnsmessage.TypeA)
		if len(want) == 0 {
			return err == nil && got.RCode == dnsmessage.RCodeNameError, got.String() + " " + errString(err)
		}
		return err == nil && slices.Equal(got.A, want), got.String() + " " + errString(err)
	})
}

func (s *suite) testReachable(t *testing.T) {
	sp := s.space(t, "e2e-reach")
	sp.service(s.a, "web", func(spec *v1.ServiceSpec) {
		spec.Ports = []v1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolTCP},
			{Name: "alt", Port: 8081, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolTCP},
			{Name: "udp", Port: 80, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolUDP},
		}
	})
	pods := podNames(sp.echoPods(s.a, "web", "web-a-1", "web-a-2"))
	client := sp.client(s.b, "client")
	sp.export(s.a, "web")
	si := sp.waitImport(s.b, "web", "with 3 ports and an IP", func(si *mcsv1beta1.ServiceImport) bool {
		return len(si.Spec.IPs) == 1 && len(si.Spec.Ports) == 3
	})
	vip := si.Spec.IPs[0]
	if si.Spec.Type != mcsv1beta1.ClusterSetIP {
		t.Errorf("import type %q, want ClusterSetIP", si.Spec.Type)
	}
	name := "web." + sp.name + ".svc.clusterset.local"
	s.waitDNS(t, client, name, []string{vip})
	// SRV per named port, as the service DNS spec the KEP aligns with
	// has it for a ClusterIP Service: the port, and the service's name.
	for _, p := range []struct{ name, proto, port string }{{"http", "tcp", "80"}, {"alt", "tcp", "8081"}, {"udp", "udp", "80"}} {
		srv := "_" + p.name + "._" + p.proto + "." + name
		got, err := client.query(s.b.DNSIP, srv, dnsmessage.TypeSRV)
		t.Logf("dig @%s %s SRV -> %s %v", s.b.DNSIP, srv, got, err)
		if err != nil || len(got.SRV) != 1 || !strings.HasSuffix(got.SRV[0], " "+p.port+" "+name+".") {
			t.Errorf("dig @%s %s SRV: %s %v; want one SRV with port %s and target %s.", s.b.DNSIP, srv, got, err, p.port, name)
		}
	}
	// AAAA for an IPv4-only import: the name exists, it has no IPv6
	// address (NOERROR without records, as for a cluster.local Service).
	aaaa, err := client.query(s.b.DNSIP, name, dnsmessage.TypeAAAA)
	t.Logf("dig @%s %s AAAA -> %s %v", s.b.DNSIP, name, aaaa, err)
	if err != nil || aaaa.RCode != dnsmessage.RCodeSuccess || len(aaaa.A) > 0 {
		t.Errorf("dig @%s %s AAAA: %s %v; want NOERROR and no record", s.b.DNSIP, name, aaaa, err)
	}
	// No PTR record names the clusterset IP: the KEP specifies forward
	// records only, and the IP is no Service's in any cluster.
	reverse, err := echoserver.ReverseName(vip)
	if err != nil {
		t.Fatal(err)
	}
	ptr, err := client.query(s.b.DNSIP, reverse, dnsmessage.TypePTR)
	t.Logf("dig @%s -x %s -> %s %v", s.b.DNSIP, vip, ptr, err)
	if err != nil || len(ptr.PTR) > 0 {
		t.Errorf("dig @%s -x %s: %s %v; want no PTR record", s.b.DNSIP, vip, ptr, err)
	}
	for _, p := range []struct {
		network string
		port    int
	}{{"tcp", 80}, {"tcp", 8081}, {"udp", 80}} {
		waitAnswers(t, client, p.network, hostPort(vip, p.port), 30, pods)
		// By name: what the pod's resolver would do.
		got, err := client.query(s.b.DNSIP, name, dnsmessage.TypeA)
		if err != nil || len(got.A) != 1 {
			t.Fatalf("%s: %v %v", name, got, err)
		}
		waitAnswers(t, client, p.network, hostPort(got.A[0], p.port), 30, pods)
	}
}

func (s *suite) testBothClusters(t *testing.T) {
	sp := s.space(t, "e2e-both")
	sp.service(s.a, "web", nil)
	sp.service(s.b, "web", nil)
	want := append(podNames(sp.echoPods(s.a, "web", "web-a-1", "web-a-2")), podNames(sp.echoPods(s.b, "web", "web-b-1"))...)
	slices.Sort(want)
	clientB := sp.client(s.b, "client")
	clientA := sp.client(s.a, "client")
	sp.export(s.a, "web")
	sp.export(s.b, "web")
	vip := sp.vip(s.b, "web")
	if vipA := sp.vip(s.a, "web"); vipA != vip {
		t.Errorf("clusterset IP differs: %s in %s, %s in %s", vipA, s.a.Name, vip, s.b.Name)
	}
	for _, client := range []*pod{clientB, clientA} {
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, want)
		counts := client.countAnswers(hostPort(vip, 80), 90)
		t.Logf("90 requests from %s: %v", client, counts)
		for _, pod := range want {
			if counts[pod] < 5 {
				t.Errorf("pod %s answered %d of 90 requests from %s, want a fair share: %v", pod, counts[pod], client, counts)
			}
		}
		if counts[""] > 0 {
			t.Errorf("%d of 90 requests got no answer", counts[""])
		}
	}
}

func (s *suite) testLocalServiceUnaffected(t *testing.T) {
	sp := s.space(t, "e2e-local")
	sp.service(s.a, "web", nil)
	local := sp.service(s.b, "web", nil)
	podsA := podNames(sp.echoPods(s.a, "web", "web-a-1"))
	podsB := podNames(sp.echoPods(s.b, "web", "web-b-1"))
	client := sp.client(s.b, "client")
	sp.export(s.a, "web")
	vip := sp.vip(s.b, "web")
	s.waitDNS(t, client, "web."+sp.name+".svc.clusterset.local", []string{vip})
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, podsA)
	s.waitDNS(t, client, "web."+sp.name+".svc.cluster.local", []string{local.Spec.ClusterIP})
	// Many requests: not a single one may reach the import's endpoints.
	if got := client.answers("tcp", hostPort(local.Spec.ClusterIP, 80), 40); !slices.Equal(got, podsB) {
		t.Errorf("the local Service %s reached %v, want only %v", local.Spec.ClusterIP, got, podsB)
	}
	svc, err := s.b.Client.CoreV1().Services(sp.name).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != local.Spec.ClusterIP {
		t.Errorf("local Service changed: %v %v", svc, err)
	}
}

func (s *suite) testUnexport(t *testing.T) {
	sp := s.space(t, "e2e-unexport")
	ips, client, vip := sp.webInBoth()
	name := "web." + sp.name + ".svc.clusterset.local"
	s.waitRules(t, s.b, 10*time.Second, []string{vip, ips["web-a-1"], ips["web-b-1"]}, nil)

	sp.unexport(s.a, "web")
	s.waitRules(t, s.b, 30*time.Second, []string{vip, ips["web-b-1"]}, []string{ips["web-a-1"]})
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, []string{"web-b-1"})
	if got := sp.vip(s.b, "web"); got != vip {
		t.Errorf("clusterset IP moved from %s to %s when one export went", vip, got)
	}
	s.waitDNS(t, client, name, []string{vip})

	sp.unexport(s.b, "web")
	for _, m := range s.p.members() {
		sp.waitNoImport(m, "web")
	}
	// B's pod stays in B's rules: B's local Service web still selects it.
	s.waitRules(t, s.b, 30*time.Second, []string{ips["web-b-1"]}, []string{vip})
	s.waitDNS(t, client, name, nil)
	if got := client.answers("tcp", hostPort(vip, 80), 5); len(got) > 0 {
		t.Errorf("the clusterset IP of a deleted import still answers: %v", got)
	}
}

func (s *suite) testSessionAffinity(t *testing.T) {
	sp := s.space(t, "e2e-affinity")
	affinity := clientIPAffinity(600)
	sp.service(s.a, "web", affinity)
	sp.service(s.b, "web", affinity)
	ipsA := sp.echoPods(s.a, "web", "web-a-1", "web-a-2")
	ipsB := sp.echoPods(s.b, "web", "web-b-1", "web-b-2")
	clients := []*pod{sp.client(s.b, "client-1"), sp.client(s.b, "client-2"), sp.client(s.a, "client-3")}
	sp.export(s.a, "web")
	sp.export(s.b, "web")
	si := sp.waitImport(s.b, "web", "with ClientIP affinity", func(si *mcsv1beta1.ServiceImport) bool {
		return len(si.Spec.IPs) > 0 && si.Spec.SessionAffinity == v1.ServiceAffinityClientIP
	})
	vip := si.Spec.IPs[0]
	var all []string
	for _, ips := range []map[string]string{ipsA, ipsB} {
		for _, ip := range ips {
			all = append(all, ip)
		}
	}
	// Every endpoint of both clusters is behind the VIP, yet each client
	// sticks to one of them.
	s.waitRules(t, s.b, 30*time.Second, append([]string{vip}, all...), nil)
	for _, client := range clients {
		eventually(t, 30*time.Second, "the VIP to answer "+client.String(), func() (bool, string) {
			return client.ask("tcp", hostPort(vip, 80)) != "", ""
		})
		counts := client.countAnswers(hostPort(vip, 80), 40)
		t.Logf("40 requests from %s: %v", client, counts)
		if len(counts) != 1 || counts[""] > 0 {
			t.Errorf("client %s reached %v, want a single endpoint for all 40 requests", client, counts)
		}
	}
}

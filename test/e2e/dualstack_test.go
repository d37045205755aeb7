package e2e

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// TestDualStack runs the dual-stack cases on a dual-stack local clusterset
// (nodes, pods, Services and clusterset IPs of both families, IPv4 first),
// or on hack/kind-e2e.sh's kind clusters, which are dual-stack
// (MCS_E2E_PROVIDER=kind).
func TestDualStack(t *testing.T) {
	runBeside(t)
	var p provider
	switch name := os.Getenv("MCS_E2E_PROVIDER"); name {
	case "", "local":
		p = upLocalWith(t, "e2edual", clusterset.DualStack, false)
	case "kind":
		p = connectKindDualStack(t)
	default:
		t.Skipf("the dual-stack cases run on a dual-stack local clusterset or on kind, not on MCS_E2E_PROVIDER=%s", name)
	}
	dualStackCases(t, p)
}

// TestDualStackPullMode runs the dual-stack cases in pull mode: on a
// dual-stack local clusterset whose last cluster doubles as the hub, or on
// hack/kind-e2e.sh's kind clusters once switched to pull mode.
func TestDualStackPullMode(t *testing.T) {
	var p provider
	switch name := os.Getenv("MCS_E2E_PROVIDER"); name {
	case "", "local":
		runBeside(t)
		p = upLocalPull(t, clusterset.Options{Clusters: 2, Prefix: "e2edualp", IPFamily: clusterset.DualStack})
	case "kind":
		k := connectKindPull(t)
		requireKindDualStack(t, k)
		p = k
	default:
		t.Skipf("the dual-stack cases run in pull mode on a dual-stack local clusterset or on kind, not on MCS_E2E_PROVIDER=%s", name)
	}
	dualStackCases(t, p)
}

func dualStackCases(t *testing.T, p provider) {
	ms := p.members()
	s := &suite{p: p, a: ms[0], b: ms[1], top: t}
	t.Run("a dual-stack export has a clusterset IP per family, A and AAAA records, and both reach every exporting pod", s.testDualStackExport)
	t.Run("exports of different families conflict, and each family reaches the pods that have it", s.testFamilyConflict)
}

func requireDualStack(spec *v1.ServiceSpec) {
	policy := v1.IPFamilyPolicyRequireDualStack
	spec.IPFamilyPolicy = &policy
}

func (s *suite) testDualStackExport(t *testing.T) {
	sp := s.space(t, "e2e-dual")
	tcpAndUDP := func(spec *v1.ServiceSpec) {
		requireDualStack(spec)
		spec.Ports = []v1.ServicePort{
			{Name: "tcp", Port: 80, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolTCP},
			{Name: "udp", Port: 80, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolUDP},
		}
	}
	sp.service(s.a, "web", tcpAndUDP)
	sp.service(s.b, "web", tcpAndUDP)
	want := append(podNames(sp.echoPods(s.a, "web", "web-a-1")), podNames(sp.echoPods(s.b, "web", "web-b-1"))...)
	client := sp.client(s.b, "client")
	sp.export(s.a, "web")
	sp.export(s.b, "web")
	var ips []string
	for _, m := range []*member{s.a, s.b} {
		si := sp.waitImport(m, "web", "with an IPv4 and an IPv6 clusterset IP", func(si *mcsv1beta1.ServiceImport) bool {
			return len(si.Spec.IPs) == 2 && slices.Equal(si.Spec.IPFamilies, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol})
		})
		if ips == nil {
			ips = si.Spec.IPs
		} else if !slices.Equal(ips, si.Spec.IPs) {
			t.Errorf("clusterset IPs differ: %v in %s, %v in %s", ips, s.a.Name, si.Spec.IPs, m.Name)
		}
	}
	v4, v6 := netip.MustParseAddr(ips[0]), netip.MustParseAddr(ips[1])
	if !netip.MustParsePrefix("10.250.0.0/16").Contains(v4) || !netip.MustParsePrefix("fd00:10:250::/108").Contains(v6) {
		t.Errorf("clusterset IPs %v, want one of each default range", ips)
	}
	name := "web." + sp.name + ".svc.clusterset.local"
	for typ, want := range map[dnsmessage.Type]string{dnsmessage.TypeA: ips[0], dnsmessage.TypeAAAA: ips[1]} {
		eventually(t, 30*time.Second, name+" "+typ.String()+" "+want, func() (bool, string) {
			got, err := client.query(s.b.DNSIP, name, typ)
			return err == nil && slices.Equal(got.A, []string{want}), got.String() + " " + errString(err)
		})
	}
	for _, ip := range ips {
		waitAnswers(t, client, "tcp", hostPort(ip, 80), 30, want)
		waitAnswers(t, client, "udp", hostPort(ip, 80), 30, want)
	}
}

func (s *suite) testFamilyConflict(t *testing.T) {
	sp := s.space(t, "e2e-family")
	// A's export is the oldest: its families win.
	sp.service(s.a, "web", requireDualStack)
	sp.service(s.b, "web", nil) // IPv4 only
	sp.echoPods(s.a, "web", "web-a-1")
	sp.echoPods(s.b, "web", "web-b-1")
	client := sp.client(s.b, "client")
	sp.export(s.a, "web")
	si := sp.waitImport(s.b, "web", "with A's two families", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) == 2 })
	// Creation timestamps have a one-second resolution, and a tie goes to
	// the lower cluster ID (on kind, B's mcs-a).
	time.Sleep(1100 * time.Millisecond)
	sp.export(s.b, "web")
	for _, m := range []*member{s.a, s.b} {
		eventually(t, 30*time.Second, m.Name+"'s export to report the family conflict", func() (bool, string) {
			got := sp.exportConditions(m, "web")
			return strings.Contains(got, "Conflict=True/"+string(mcsv1beta1.ServiceExportReasonIPFamilyConflict)), got
		})
	}
	si = sp.waitImport(s.b, "web", "keeping the oldest export's families", func(si *mcsv1beta1.ServiceImport) bool {
		return slices.Equal(si.Spec.IPFamilies, []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol})
	})
	// B's pods have IPv6 addresses, but B's Service has none: B serves
	// the IPv4 clusterset IP only.
	waitAnswers(t, client, "tcp", hostPort(si.Spec.IPs[0], 80), 30, []string{"web-a-1", "web-b-1"})
	waitAnswers(t, client, "tcp", hostPort(si.Spec.IPs[1], 80), 30, []string{"web-a-1"})
}

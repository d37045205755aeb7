package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
)

// statefulPod is an echo pod with a hostname under the headless Service
// (spec.hostname and spec.subdomain), as a StatefulSet makes them: its
// EndpointSlice endpoint carries the hostname.
func statefulPod(name, hostname, service string) *v1.Pod {
	p := echoPod(name, service)
	p.Spec.Hostname = hostname
	p.Spec.Subdomain = service
	return p
}

// testHeadlessDNS checks the KEP-1645 DNS section for a headless export
// from A and B, asked from a pod of B, against B's CoreDNS:
//   - <svc>.<ns>.svc.clusterset.local: an A record per ready endpoint of
//     every exporting cluster;
//   - <hostname>.<clusterid>.<svc>.<ns>.svc.clusterset.local: the endpoint;
//   - _<port>._<proto>.<svc>.<ns>.svc.clusterset.local: an SRV record per
//     ready endpoint naming it as above (the cluster.local service DNS
//     spec the KEP aligns with: headless SRV targets are the endpoints'
//     names);
//   - no VIP, no rules.
func (s *suite) testHeadlessDNS(t *testing.T) {
	sp := s.space(t, "e2e-headless")
	headless := func(spec *v1.ServiceSpec) {
		spec.ClusterIP = v1.ClusterIPNone
		spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt(8080), Protocol: v1.ProtocolTCP}}
	}
	sp.service(s.a, "db", headless)
	sp.service(s.b, "db", headless)
	for _, p := range []*v1.Pod{statefulPod("db-0", "db-0", "db"), statefulPod("db-1", "db-1", "db")} {
		sp.createPod(s.a, p)
	}
	sp.createPod(s.b, statefulPod("db-0", "db-0", "db"))
	// A pod that never gets ready: its endpoint is exported, not ready,
	// and must have no DNS record.
	unready := statefulPod("db-2", "db-2", "db")
	unready.Spec.Containers[0].ReadinessProbe.TCPSocket.Port = intstr.FromInt(9999)
	sp.createPod(s.a, unready)
	ipsA := sp.waitReady(s.a, "db-0", "db-1")
	ipsB := sp.waitReady(s.b, "db-0")
	client := sp.client(s.b, "client")
	sp.export(s.a, "db")
	sp.export(s.b, "db")
	si := sp.waitImport(s.b, "db", "headless", func(si *mcsv1beta1.ServiceImport) bool { return si.Spec.Type == mcsv1beta1.Headless })

	zone := "db." + sp.name + ".svc.clusterset.local"
	endpoints := map[string]string{ // per-endpoint name -> address
		"db-0." + s.a.Name + "." + zone: ipsA["db-0"],
		"db-1." + s.a.Name + "." + zone: ipsA["db-1"],
		"db-0." + s.b.Name + "." + zone: ipsB["db-0"],
	}
	var all, targets []string
	for name, ip := range endpoints {
		all = append(all, ip)
		targets = append(targets, name+".")
	}
	slices.Sort(all)
	slices.Sort(targets)

	// The exchange, with the cluster.local equivalent in A for comparison.
	dig := func(from *pod, server, name string, typ dnsmessage.Type) echoserver.Answer {
		got, err := from.query(server, name, typ)
		if err != nil {
			t.Fatalf("dig @%s %s %s: %v", server, name, typ, err)
		}
		t.Logf("dig @%s %s %s -> %s", server, name, strings.TrimPrefix(typ.String(), "Type"), got)
		return got
	}

	t.Run("no VIP and no rules", func(t *testing.T) {
		if len(si.Spec.IPs) > 0 {
			t.Errorf("headless import has IPs %v", si.Spec.IPs)
		}
		rs, err := s.ruleset(t.Context(), s.b)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(rs, sp.name+"/db") {
			t.Errorf("B's ruleset has rules for the headless import")
		}
	})

	t.Run("service name has an A record per ready endpoint", func(t *testing.T) {
		eventually(t, 30*time.Second, zone+" A "+strings.Join(all, ","), func() (bool, string) {
			got, err := client.query(s.b.DNSIP, zone, dnsmessage.TypeA)
			return err == nil && slices.Equal(got.A, all), got.String() + errString(err)
		})
		dig(client, s.b.DNSIP, zone, dnsmessage.TypeA)
	})

	t.Run("per-endpoint names hostname.clusterid", func(t *testing.T) {
		for name, ip := range endpoints {
			got := dig(client, s.b.DNSIP, name, dnsmessage.TypeA)
			if !slices.Equal(got.A, []string{ip}) {
				t.Errorf("dig @%s %s A: %s; KEP-1645 requires A %s", s.b.DNSIP, name, got, ip)
			}
		}
	})

	t.Run("no record for a not-ready endpoint", func(t *testing.T) {
		name := "db-2." + s.a.Name + "." + zone
		got := dig(client, s.b.DNSIP, name, dnsmessage.TypeA)
		if len(got.A) > 0 {
			t.Errorf("dig @%s %s A: %s; the endpoint is not ready", s.b.DNSIP, name, got)
		}
	})

	t.Run("SRV per named port", func(t *testing.T) {
		clientA := sp.client(s.a, "client")
		local := dig(clientA, s.a.DNSIP, "_http._tcp.db."+sp.name+".svc.cluster.local", dnsmessage.TypeSRV)
		srv := "_http._tcp." + zone
		got := dig(client, s.b.DNSIP, srv, dnsmessage.TypeSRV)
		var gotTargets []string
		for _, r := range got.SRV {
			f := strings.Fields(r)
			gotTargets = append(gotTargets, f[len(f)-1])
		}
		slices.Sort(gotTargets)
		if !slices.Equal(gotTargets, targets) {
			t.Errorf("dig @%s %s SRV: %s; want one SRV per ready endpoint with targets %v (cluster.local in A answers %s)",
				s.b.DNSIP, srv, got, targets, local)
		}
	})

}

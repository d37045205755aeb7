package multicluster_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

const (
	nodeName       = "node-1"
	localClusterID = "cluster-local"
)

func TestDataplaneNFTables(t *testing.T) {
	if netns.Isolate(t, "nft") {
		testDataplane(t, kubeproxyconfig.ProxyModeNFTables)
	}
}

func TestDataplaneIPTables(t *testing.T) {
	if netns.Isolate(t, "iptables", "ip6tables", "iptables-save") {
		testDataplane(t, kubeproxyconfig.ProxyModeIPTables)
	}
}

// testDataplane checks, with real connections through real rules, that a
// connection to a clusterset IP reaches exactly the endpoints it should.
func testDataplane(t *testing.T, mode kubeproxyconfig.ProxyMode) {
	d := newDataplane(t, mode)
	p := d.proxier
	d.endpoint("a1", "10.1.0.1", "tcp/8080", "udp/5353", "tcp/9090")
	d.endpoint("a2", "10.1.0.2", "tcp/8080", "udp/5353", "tcp/9090")
	d.endpoint("b1", "10.2.0.1", "tcp/8080", "udp/5353")
	d.endpoint("local1", "10.3.0.1", "tcp/8080")
	d.endpoint("v6a", "fd00:1::1", "tcp/8080")
	d.endpoint("v6b", "fd00:2::1", "tcp/8080")
	p.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-a"})

	type check struct {
		network, addr string
		want          []string
	}
	cases := []struct {
		name   string
		setup  func()
		checks []check
	}{
		{
			name: "endpoints of every source cluster answer",
			setup: func() {
				p.OnServiceImportUpsert(serviceImport("web", []string{"10.250.0.1"}))
				multicluster.DeliverSlice(p, slice("web", "cluster-a", httpPort, readyEP("10.1.0.1"), readyEP("10.1.0.2")))
				multicluster.DeliverSlice(p, slice("web", "cluster-b", httpPort, readyEP("10.2.0.1")))
			},
			checks: []check{{"tcp", "10.250.0.1:80", []string{"a1", "a2", "b1"}}},
		},
		{
			name: "endpoints that are not ready get no traffic",
			setup: func() {
				p.OnServiceImportUpsert(serviceImport("ready", []string{"10.250.0.2"}))
				multicluster.DeliverSlice(p, slice("ready", "cluster-a", httpPort, readyEP("10.1.0.1"), ep{ip: "10.1.0.2"}))
				multicluster.DeliverSlice(p, slice("ready", "cluster-b", httpPort, ep{ip: "10.2.0.1", serving: true, terminating: true}))
			},
			checks: []check{{"tcp", "10.250.0.2:80", []string{"a1"}}},
		},
		{
			name: "serving terminating endpoints are used when no endpoint is ready",
			setup: func() {
				p.OnServiceImportUpsert(serviceImport("draining", []string{"10.250.0.3"}))
				multicluster.DeliverSlice(p, slice("draining", "cluster-a", httpPort, ep{ip: "10.1.0.1", serving: true, terminating: true}, ep{ip: "10.1.0.2", terminating: true}))
			},
			checks: []check{{"tcp", "10.250.0.3:80", []string{"a1"}}},
		},
		{
			name: "ClientIP session affinity holds a client to one endpoint across clusters",
			setup: func() {
				si := serviceImport("sticky", []string{"10.250.0.4"})
				si.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				p.OnServiceImportUpsert(si)
				multicluster.DeliverSlice(p, slice("sticky", "cluster-a", httpPort, readyEP("10.1.0.1"), readyEP("10.1.0.2")))
				multicluster.DeliverSlice(p, slice("sticky", "cluster-b", httpPort, readyEP("10.2.0.1")))
			},
			checks: []check{{"tcp", "10.250.0.4:80", nil}}, // exactly one, checked below
		},
		{
			name: "UDP ports",
			setup: func() {
				p.OnServiceImportUpsert(serviceImport("dns", []string{"10.250.0.5"}, mcsv1beta1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}))
				multicluster.DeliverSlice(p, slice("dns", "cluster-a", []discoveryv1.EndpointPort{port("dns", v1.ProtocolUDP, 5353)}, readyEP("10.1.0.1")))
				multicluster.DeliverSlice(p, slice("dns", "cluster-b", []discoveryv1.EndpointPort{port("dns", v1.ProtocolUDP, 5353)}, readyEP("10.2.0.1")))
			},
			checks: []check{{"udp", "10.250.0.5:53", []string{"a1", "b1"}}},
		},
		{
			name: "a port only one cluster exports reaches only that cluster",
			setup: func() {
				p.OnServiceImportUpsert(serviceImport("multi", []string{"10.250.0.6"},
					mcsv1beta1.ServicePort{Name: "http", Protocol: v1.ProtocolTCP, Port: 80},
					mcsv1beta1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090}))
				multicluster.DeliverSlice(p, slice("multi", "cluster-a", []discoveryv1.EndpointPort{port("http", v1.ProtocolTCP, 8080), port("metrics", v1.ProtocolTCP, 9090)}, readyEP("10.1.0.1")))
				multicluster.DeliverSlice(p, slice("multi", "cluster-b", httpPort, readyEP("10.2.0.1")))
			},
			checks: []check{
				{"tcp", "10.250.0.6:80", []string{"a1", "b1"}},
				{"tcp", "10.250.0.6:9090", []string{"a1"}},
			},
		},
		{
			name: "internalTrafficPolicy Local keeps traffic on this node's endpoints",
			setup: func() {
				si := serviceImport("nodelocal", []string{"10.250.0.7"})
				local := v1.ServiceInternalTrafficPolicyLocal
				si.Spec.InternalTrafficPolicy = &local
				p.OnServiceImportUpsert(si)
				// Remote node names mean nothing here and are dropped;
				// the local cluster's endpoint on this node stays local.
				multicluster.DeliverSlice(p, slice("nodelocal", "cluster-a", httpPort, ep{ip: "10.1.0.1", ready: true, serving: true, node: nodeName}))
				multicluster.DeliverSlice(p, slice("nodelocal", localClusterID, httpPort, ep{ip: "10.3.0.1", ready: true, serving: true, node: nodeName}))
			},
			checks: []check{{"tcp", "10.250.0.7:80", []string{"local1"}}},
		},
		{
			name: "trafficDistribution PreferClose: this zone's endpoints of every cluster",
			setup: func() {
				si := serviceImport("close", []string{"10.250.0.12"})
				si.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferClose)
				p.OnServiceImportUpsert(si)
				// This node is in zone-a (below): a1 in cluster-a and b1 in
				// cluster-b are, a2 is not.
				multicluster.DeliverSlice(p, slice("close", "cluster-a", httpPort, ep{ip: "10.1.0.1", ready: true, serving: true, zone: "zone-a"}, ep{ip: "10.1.0.2", ready: true, serving: true, zone: "zone-b"}))
				multicluster.DeliverSlice(p, slice("close", "cluster-b", httpPort, ep{ip: "10.2.0.1", ready: true, serving: true, zone: "zone-a"}))
			},
			checks: []check{{"tcp", "10.250.0.12:80", []string{"a1", "b1"}}},
		},
		{
			name: "a local Service keeps its IP against an import",
			setup: func() {
				p.OnServiceAdd(localService("other", "db", "10.250.0.8"))
				p.OnEndpointSliceAdd(&discoveryv1.EndpointSlice{
					ObjectMeta:  metav1.ObjectMeta{Namespace: "other", Name: "db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
					AddressType: discoveryv1.AddressTypeIPv4,
					Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.3.0.1"}}},
					Ports:       httpPort,
				})
				p.OnServiceImportUpsert(serviceImport("hijack", []string{"10.250.0.8"}))
				multicluster.DeliverSlice(p, slice("hijack", "cluster-a", httpPort, readyEP("10.1.0.1")))
			},
			checks: []check{{"tcp", "10.250.0.8:80", []string{"local1"}}},
		},
		{
			name: "an import outside the clusterset range captures nothing",
			setup: func() {
				p.OnServiceImportUpsert(serviceImport("outside", []string{"10.1.0.1"}))
				multicluster.DeliverSlice(p, slice("outside", "cluster-b", httpPort, readyEP("10.2.0.1")))
			},
			checks: []check{{"tcp", "10.1.0.1:8080", []string{"a1"}}},
		},
		{
			name: "untrusted slices and headless imports program nothing",
			setup: func() {
				p.OnServiceImportUpsert(serviceImport("untrusted", []string{"10.250.0.9"}))
				s := slice("untrusted", "cluster-a", httpPort, readyEP("10.1.0.1"))
				s.Labels[discoveryv1.LabelManagedBy] = "someone-else"
				multicluster.DeliverSlice(p, s)
				multicluster.DeliverSlice(p, slice("untrusted", "cluster-b", httpPort, readyEP("10.2.0.1")))
				headless := serviceImport("headless", []string{"10.250.0.10"})
				headless.Spec.Type = mcsv1beta1.Headless
				p.OnServiceImportUpsert(headless)
				multicluster.DeliverSlice(p, slice("headless", "cluster-a", httpPort, readyEP("10.1.0.1")))
			},
			checks: []check{
				{"tcp", "10.250.0.9:80", []string{"b1"}},
				{"tcp", "10.250.0.10:80", []string{}},
			},
		},
		{
			name: "dual-stack import",
			setup: func() {
				si := serviceImport("dual", []string{"10.250.0.11", "fd00:10:250::11"})
				p.OnServiceImportUpsert(si)
				multicluster.DeliverSlice(p, slice("dual", "cluster-a", httpPort, readyEP("10.1.0.1")))
				multicluster.DeliverSlice(p, slice("dual", "cluster-a-v6", httpPort, readyEP("fd00:1::1")))
				multicluster.DeliverSlice(p, slice("dual", "cluster-b-v6", httpPort, readyEP("fd00:2::1")))
			},
			checks: []check{
				{"tcp", "10.250.0.11:80", []string{"a1"}},
				{"tcp", "[fd00:10:250::11]:80", []string{"v6a", "v6b"}},
			},
		},
	}

	for _, tc := range cases {
		tc.setup()
	}
	d.settle()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range tc.checks {
				attempts := 40
				if c.want != nil && len(c.want) == 0 {
					// Unanswered attempts each wait for a timeout.
					attempts = 5
				}
				got := d.answers(c.network, c.addr, attempts)
				if c.want == nil {
					if len(got) != 1 {
						t.Errorf("%s %s: answered by %v, want exactly one endpoint", c.network, c.addr, got)
					}
					continue
				}
				if diff := cmp.Diff(c.want, got); diff != "" {
					t.Errorf("%s %s: endpoints that answered (-want +got):\n%s", c.network, c.addr, diff)
				}
			}
		})
	}

	t.Run("endpoint and import changes follow", func(t *testing.T) {
		// Cluster b leaves web.
		multicluster.WithdrawSlice(p, slice("web", "cluster-b", httpPort))
		// The local Service gives its IP back: the import takes over.
		p.OnServiceDelete(localService("other", "db", "10.250.0.8"))
		// The import goes away.
		p.OnServiceImportDelete(serviceImport("dns", nil))
		d.settle()
		// The sync that removed dns's rules clears its UDP conntrack
		// entries after writing them (upstream's order): the next sync's
		// canary says that one has finished, so that a client reusing a
		// source port is not answered through a flow of before.
		d.settle()
		for _, c := range []struct {
			network, addr string
			want          []string
		}{
			{"tcp", "10.250.0.1:80", []string{"a1", "a2"}},
			{"tcp", "10.250.0.8:80", []string{"a1"}},
			{"udp", "10.250.0.5:53", []string{}},
		} {
			attempts := 30
			if len(c.want) == 0 {
				attempts = 5
			}
			if diff := cmp.Diff(c.want, d.answers(c.network, c.addr, attempts)); diff != "" {
				t.Errorf("%s %s: endpoints that answered (-want +got):\n%s", c.network, c.addr, diff)
			}
		}
	})

	t.Run("removing the API removes every clusterset IP", func(t *testing.T) {
		before := d.withdrawn.Load()
		p.Reset()
		d.settle()
		// At least the four below, of every programmed import.
		if n := d.withdrawn.Load() - before; n < 4 {
			t.Errorf("reset took %d clusterset IPs back from the data plane, want at least 4", n)
		}
		rules := d.rules()
		for _, ip := range []string{"10.250.0.1", "10.250.0.8", "10.250.0.11", "fd00:10:250::11"} {
			if strings.Contains(rules, ip) {
				t.Errorf("rules still mention %s after reset", ip)
			}
		}
		if diff := cmp.Diff([]string{}, d.answers("tcp", "10.250.0.1:80", 5)); diff != "" {
			t.Errorf("clusterset IP still answers after reset: %s", diff)
		}
	})
}

// TestDataplaneUnprogrammedClusterSetIPsDropped: an address of the
// clusterset ranges that no import holds (withdrawn, refused, never
// allocated) is dropped on the node, as upstream drops an unallocated
// ClusterIP, instead of following the node's routes to whoever answers
// there. The attacker here answers on the address itself, as a member or
// router advertising the range would. nftables only: upstream's iptables
// proxier drops no unallocated ClusterIP either.
func TestDataplaneUnprogrammedClusterSetIPsDropped(t *testing.T) {
	if !netns.Isolate(t, "nft") {
		return
	}
	d := newDataplane(t, kubeproxyconfig.ProxyModeNFTables)
	p := d.proxier
	// What kube-proxy's ServiceCIDR informer hands over, after the first
	// sync: upstream writes it at its next full sync, which a topology
	// change forces.
	p.OnServiceCIDRsChanged([]string{"10.96.0.0/16", "fd00:10:96::/108"})
	p.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-a"})
	d.endpoint("a1", "10.1.0.1", "tcp/8080")
	d.endpoint("attacker", "10.250.0.77", "tcp/80")
	d.endpoint("outside", "10.251.0.77", "tcp/80")

	p.OnServiceImportUpsert(serviceImport("web", []string{"10.250.0.7"}))
	multicluster.DeliverSlice(p, slice("web", "cluster-a", httpPort, readyEP("10.1.0.1")))
	d.settle()
	if got := d.answers("tcp", "10.250.0.7:80", 5); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("a programmed clusterset IP answered by %v, want a1", got)
	}
	if got := d.answers("tcp", "10.250.0.77:80", 3); len(got) != 0 {
		t.Errorf("an address of the clusterset range no import holds answered by %v, want dropped", got)
	}
	// Withdrawn: the import's IP is dropped too, not routed on.
	p.OnServiceImportDelete(serviceImport("web", nil))
	d.settle()
	if got := d.answers("tcp", "10.250.0.7:80", 3); len(got) != 0 {
		t.Errorf("a withdrawn clusterset IP answered by %v, want dropped", got)
	}
	// Outside the clusterset ranges nothing changes.
	if got := d.answers("tcp", "10.251.0.77:80", 3); !slices.Equal(got, []string{"outside"}) {
		t.Errorf("an address outside every range answered by %v, want outside", got)
	}
	if rules := d.rules(); !strings.Contains(rules, "10.250.0.0/16") || !strings.Contains(rules, "Drop traffic to unallocated ClusterIPs") {
		t.Errorf("the clusterset range is not in the drop rule:\n%s", rules)
	}
}

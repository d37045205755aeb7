package clusterset

import (
	"net/netip"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A cluster with private pods that overlaps another takes that one's pod
// CIDR, and only its own nodes route it.
func TestPrivatePods(t *testing.T) {
	o := Options{Dir: "/tmp/x", Clusters: 3, PrivatePods: map[string]string{"cluster-c": "cluster-a", "cluster-b": ""}}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.podPlanIndex(2) != 0 || o.podPlanIndex(1) != 1 || o.podPlanIndex(0) != 0 {
		t.Errorf("pod plan indexes %d %d %d", o.podPlanIndex(0), o.podPlanIndex(1), o.podPlanIndex(2))
	}
	a, b, c := &Cluster{Name: "cluster-a"}, &Cluster{Name: "cluster-b", PrivatePods: true}, &Cluster{Name: "cluster-c", PrivatePods: true}
	flat := &Cluster{Name: "cluster-d"}
	if !reachesPods(a, flat) || reachesPods(a, c) || reachesPods(c, a) || reachesPods(b, c) || !reachesPods(c, c) {
		t.Error("pod reachability between flat and private clusters is wrong")
	}
}

func TestOptionsDefaultsAndLimits(t *testing.T) {
	o := Options{Dir: "/tmp/x"}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.Clusters != 2 || o.NodesPerCluster != 1 || o.Prefix != "cset" || o.ProxyMode != "nftables" {
		t.Errorf("defaults: %+v", o)
	}
	for _, bad := range []Options{
		{Dir: "/tmp/x", Clusters: 27},
		{Dir: "/tmp/x", NodesPerCluster: 251},
		{Dir: "/tmp/x", Prefix: "Bad-Prefix"},
		{Dir: "/tmp/x", ProxyMode: "ipvs"},
		{Dir: "/tmp/x", IPFamily: "ipv5"},
		{Dir: "/tmp/x", Clusters: 3, PrivatePods: map[string]string{"cluster-d": ""}},
		{Dir: "/tmp/x", Clusters: 3, PrivatePods: map[string]string{"cluster-c": "cluster-z"}},
		{Dir: "/tmp/x", Clusters: 3, PrivatePods: map[string]string{"cluster-c": "cluster-b", "cluster-b": "cluster-a"}},
		{},
	} {
		if err := bad.defaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestAddressPlanDoesNotOverlap checks the promise of a flat-network
// clusterset, in each family: no Service range, pod range, node address or
// the clusterset range overlaps another, for the largest clusterset
// allowed, and every address is of its family.
func TestAddressPlanDoesNotOverlap(t *testing.T) {
	for _, fam := range DualStack.families() {
		p := plans[fam]
		var ranges []netip.Prefix
		names := map[string]bool{}
		add := func(s string) {
			prefix := netip.MustParsePrefix(s)
			if prefix.Addr().Is4() != (fam == v1.IPv4Protocol) {
				t.Errorf("%s range %s", fam, s)
			}
			ranges = append(ranges, prefix)
		}
		add(map[v1.IPFamily]string{v1.IPv4Protocol: "10.250.0.0/16", v1.IPv6Protocol: "fd00:10:250::/108"}[fam]) // the clusterset range
		add(p.fabricCIDR)
		add(p.lbCIDR)
		if !netip.MustParsePrefix(p.lbCIDR).Contains(netip.MustParseAddr(p.lbIP(maxClusters-1, maxLoadBalancers))) {
			t.Errorf("load-balancer address %s outside %s", p.lbIP(maxClusters-1, maxLoadBalancers), p.lbCIDR)
		}
		for i := range maxClusters {
			for _, a := range []string{p.dnsIP(i), p.apiIP(i), p.nodeIP(i, 0)} {
				if netip.MustParseAddr(a).String() != a {
					t.Errorf("%s is not in canonical form", a)
				}
			}
			add(p.serviceCIDR(i))
			add(p.clusterPodCIDR(i))
			if !netip.MustParsePrefix(p.clusterPodCIDR(i)).Contains(netip.MustParsePrefix(p.nodePodCIDR(i, maxNodes-1)).Addr()) {
				t.Errorf("node pod CIDR %s outside %s", p.nodePodCIDR(i, maxNodes-1), p.clusterPodCIDR(i))
			}
			if !netip.MustParsePrefix(p.serviceCIDR(i)).Contains(netip.MustParseAddr(p.dnsIP(i))) {
				t.Errorf("DNS IP %s outside %s", p.dnsIP(i), p.serviceCIDR(i))
			}
			if !netip.MustParsePrefix(p.fabricCIDR).Contains(netip.MustParseAddr(p.apiIP(i))) {
				t.Errorf("apiserver address %s off the fabric", p.apiIP(i))
			}
			for j := range maxNodes {
				if p.nodeIP(i, j) == p.apiIP(i) {
					t.Errorf("node %s has the apiserver's address %s", nodeName(i, j), p.apiIP(i))
				}
			}
			if names[clusterName(i)] {
				t.Errorf("duplicate cluster name %s", clusterName(i))
			}
			names[clusterName(i)] = true
		}
		for i, a := range ranges {
			for _, b := range ranges[i+1:] {
				if a.Overlaps(b) {
					t.Errorf("%s overlaps %s", a, b)
				}
			}
		}
		if !netip.MustParsePrefix(p.fabricCIDR).Contains(netip.MustParseAddr(p.nodeIP(maxClusters-1, maxNodes-1))) {
			t.Errorf("node address %s off the fabric", p.nodeIP(maxClusters-1, maxNodes-1))
		}
	}
}

// A crashed clusterset's guard routes are found in both families' output
// (IPv6 routes name their device before the metric), and only its own.
func TestGuardRoute(t *testing.T) {
	for _, tc := range []struct {
		line, want string
		ok         bool
	}{
		{line: "unreachable 172.30.0.0/16 metric 40212 ", want: "172.30.0.0/16", ok: true},
		{line: "unreachable fd00:10:250::/108 dev lo metric 40212 pref medium", want: "fd00:10:250::/108", ok: true},
		{line: "unreachable fd00:10:250::/108 dev lo metric 1024 pref medium"},
		{line: "unreachable 10.96.0.0/16 metric 402120"},
		{line: "10.0.0.0/8 via 192.0.2.1 dev eth0 metric 40212"},
		{line: ""},
	} {
		if got, ok := guardRoute(tc.line, "40212"); got != tc.want || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

// --cluster-property CLUSTER=KEY=VALUE: the value may hold "=", a later
// use of the same key wins, and defaults refuses an unknown cluster, the
// properties the clusterset writes itself and a name that is no object's.
func TestClusterPropertyOption(t *testing.T) {
	o := Options{Dir: "/tmp/x", Clusters: 3}
	for _, s := range []string{"cluster-a=region.topology.k8s.io=eu", "cluster-c=region.topology.k8s.io=us", "cluster-c=zone=a=b", "cluster-a=region.topology.k8s.io=us-east"} {
		if err := o.AddClusterProperty(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	want := map[string]map[string]string{
		"cluster-a": {"region.topology.k8s.io": "us-east"},
		"cluster-c": {"region.topology.k8s.io": "us", "zone": "a=b"},
	}
	if !reflect.DeepEqual(o.ClusterProperties, want) {
		t.Errorf("properties %v, want %v", o.ClusterProperties, want)
	}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "cluster-a", "cluster-a=region", "cluster-a=region=", "=region=eu", "cluster-a==eu"} {
		if err := (&Options{}).AddClusterProperty(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, bad := range []string{"cluster-d=region=eu", "cluster-a=cluster.clusterset.k8s.io=cluster-z", "cluster-a=clusterset.k8s.io=other", "cluster-a=Region_Name=eu"} {
		o := Options{Dir: "/tmp/x", Clusters: 3}
		if err := o.AddClusterProperty(bad); err != nil {
			t.Fatalf("%s: %v", bad, err)
		}
		if err := o.defaults(); err == nil {
			t.Errorf("%q accepted by defaults", bad)
		}
	}
}

package clusterset

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
)

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

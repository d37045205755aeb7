package clusterset

import (
	"net/netip"
	"testing"
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
		{},
	} {
		if err := bad.defaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestAddressPlanDoesNotOverlap checks the promise of a flat-network
// clusterset: no Service range, pod range, node address or the clusterset
// range overlaps another, for the largest clusterset allowed.
func TestAddressPlanDoesNotOverlap(t *testing.T) {
	var ranges []netip.Prefix
	names := map[string]bool{}
	add := func(s string) { ranges = append(ranges, netip.MustParsePrefix(s)) }
	add("10.250.0.0/16") // kube-proxy's default clusterset range
	add("172.30.0.0/16") // the fabric
	for i := range maxClusters {
		add(serviceCIDR(i))
		add(clusterPodCIDR(i))
		if !netip.MustParsePrefix(clusterPodCIDR(i)).Contains(netip.MustParsePrefix(nodePodCIDR(i, maxNodes-1)).Addr()) {
			t.Errorf("node pod CIDR %s outside %s", nodePodCIDR(i, maxNodes-1), clusterPodCIDR(i))
		}
		if !netip.MustParsePrefix(serviceCIDR(i)).Contains(netip.MustParseAddr(dnsIP(i))) {
			t.Errorf("DNS IP %s outside %s", dnsIP(i), serviceCIDR(i))
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
	if !netip.MustParsePrefix("172.30.0.0/16").Contains(netip.MustParseAddr(nodeIP(maxClusters-1, maxNodes-1))) {
		t.Errorf("node address %s off the fabric", nodeIP(maxClusters-1, maxNodes-1))
	}
	// The apiserver's address is no node's.
	for i := range maxClusters {
		for j := range maxNodes {
			if nodeIP(i, j) == apiServerIP(i) {
				t.Errorf("node %s has the apiserver's address %s", nodeName(i, j), apiServerIP(i))
			}
		}
	}
}

package clusterset

import (
	"errors"
	"fmt"
	"io"
	"regexp"
)

// Options configures Up.
type Options struct {
	// Clusters is how many clusters to start (default 2, at most 26).
	Clusters int
	// NodesPerCluster is how many nodes each cluster has (default 1).
	NodesPerCluster int
	// Dir holds every component's files and logs. Up removes what an
	// earlier run left there (etcd data, cluster directories).
	Dir string
	// Prefix starts the name of every network namespace Up creates, so
	// that cleanup and leak checks can find them (default "cset").
	Prefix string
	// ProxyMode is kube-proxy's --proxy-mode: nftables (default) or
	// iptables.
	ProxyMode string
	// KubeProxyArgs are appended to every kube-proxy's flags.
	KubeProxyArgs []string
	// NoKubeProxy and NoDNS leave out kube-proxy and CoreDNS.
	NoKubeProxy bool
	NoDNS       bool
	// Progress receives one line per started component (nil: discarded).
	Progress io.Writer
}

const (
	defaultPrefix = "cset"
	maxClusters   = 26
	maxNodes      = 250
)

var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,9}$`)

func (o *Options) defaults() error {
	if o.Clusters == 0 {
		o.Clusters = 2
	}
	if o.NodesPerCluster == 0 {
		o.NodesPerCluster = 1
	}
	if o.Prefix == "" {
		o.Prefix = defaultPrefix
	}
	if o.ProxyMode == "" {
		o.ProxyMode = "nftables"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	switch {
	case o.Clusters < 1 || o.Clusters > maxClusters:
		return fmt.Errorf("clusters: %d, want 1..%d", o.Clusters, maxClusters)
	case o.NodesPerCluster < 1 || o.NodesPerCluster > maxNodes:
		return fmt.Errorf("nodes per cluster: %d, want 1..%d", o.NodesPerCluster, maxNodes)
	case o.Dir == "":
		return errors.New("no Dir")
	case !prefixPattern.MatchString(o.Prefix):
		return fmt.Errorf("prefix %q: want a lower-case letter then up to 9 letters or digits", o.Prefix)
	case o.ProxyMode != "nftables" && o.ProxyMode != "iptables":
		return fmt.Errorf("proxy mode %q: want nftables or iptables", o.ProxyMode)
	}
	return nil
}

// The address plan. Every range is distinct across clusters, as in a
// flat-network clusterset where any pod can reach any other pod:
//
//	cluster i (0-based)   name cluster-<a+i>
//	Service CIDR          10.(96+i).0.0/16, cluster DNS at .0.10
//	pod CIDR              10.(200+i).0.0/16, node j gets 10.(200+i).j.0/24
//	node j's address      172.30.i.(j+1)/16 on the fabric bridge
//	apiserver             172.30.i.254 on every node of cluster i (the
//	                      `kubernetes` Service's endpoint, forwarded to the
//	                      apiserver on the host's loopback)
//	clusterset IPs        10.250.0.0/16 and fd00:10:250::/108 (the
//	                      defaults of kube-proxy and the mcs-controller)
//
// While a clusterset is up, the host has an unreachable route for each of
// these ranges (hostRanges): nothing on the host can send a packet for
// them anywhere, the default route included.
func clusterName(i int) string { return fmt.Sprintf("cluster-%c", 'a'+i) }
func serviceCIDR(i int) string { return fmt.Sprintf("10.%d.0.0/16", 96+i) }
func dnsIP(i int) string       { return fmt.Sprintf("10.%d.0.10", 96+i) }
func clusterPodCIDR(i int) string {
	return fmt.Sprintf("10.%d.0.0/16", 200+i)
}
func nodePodCIDR(i, j int) string { return fmt.Sprintf("10.%d.%d.0/24", 200+i, j) }
func nodeIP(i, j int) string      { return fmt.Sprintf("172.30.%d.%d", i, j+1) }
func nodeName(i, j int) string    { return fmt.Sprintf("%s-node%d", clusterName(i), j) }
func apiServerIP(i int) string    { return fmt.Sprintf("172.30.%d.254", i) }

const (
	fabricCIDR      = "172.30.0.0/16"
	fabricPrefixLen = 16
)

package clusterset

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
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
	// UpstreamKubeProxy names the clusters whose nodes run the unmodified
	// upstream kube-proxy (kube-proxy-upstream) instead of the project's:
	// members that keep stock kube-proxy, served in derived mode.
	UpstreamKubeProxy []string
	// PrivatePods names the clusters whose pod network the others cannot
	// reach, nor they the others' (a private pod network, as members
	// behind their own network boundary have): its pod CIDR is routed
	// only among its own nodes. The value names the cluster whose pod
	// CIDR it takes instead of its own ("" keeps its own): an
	// overlapping pod network, the same pod IPs in both clusters. The
	// nodes of every cluster then masquerade what their pods send to
	// addresses outside the pod networks they reach, as network plugins
	// do for traffic leaving the pod network, so that replies find the
	// way back. Other clusters reach such a cluster's pods only through
	// its node addresses (NodePort Services).
	PrivatePods map[string]string
	// NoKubeProxy and NoDNS leave out kube-proxy and CoreDNS.
	NoKubeProxy bool
	NoDNS       bool
	// IPFamily is the clusterset's IP family: IPv4 (default), IPv6, or
	// DualStack (IPv4 first): nodes, pods, Services, kube-proxy, CoreDNS
	// and the clusterset IP ranges in it.
	IPFamily IPFamily
	// ClusterProperties are ClusterProperties (KEP-2149) written in each
	// cluster at start-up beside its ID and clusterset, as cluster name →
	// property name → value: a region for cluster selection, say.
	// AddClusterProperty parses the command line's CLUSTER=KEY=VALUE.
	ClusterProperties map[string]map[string]string
	// Progress receives one line per started component (nil: discarded).
	Progress io.Writer
}

// AddClusterProperty adds a ClusterProperty given as CLUSTER=KEY=VALUE
// (the value may hold "="). defaults checks the cluster and the name.
func (o *Options) AddClusterProperty(s string) error {
	cluster, rest, ok := strings.Cut(s, "=")
	key, value, ok2 := strings.Cut(rest, "=")
	if !ok || !ok2 || cluster == "" || key == "" || value == "" {
		return fmt.Errorf("cluster property %q: want CLUSTER=KEY=VALUE", s)
	}
	if o.ClusterProperties == nil {
		o.ClusterProperties = map[string]map[string]string{}
	}
	if o.ClusterProperties[cluster] == nil {
		o.ClusterProperties[cluster] = map[string]string{}
	}
	o.ClusterProperties[cluster][key] = value
	return nil
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
	if o.IPFamily == "" {
		o.IPFamily = IPv4
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
	case o.IPFamily != IPv4 && o.IPFamily != IPv6 && o.IPFamily != DualStack:
		return fmt.Errorf("IP family %q: want %s, %s or %s", o.IPFamily, IPv4, IPv6, DualStack)
	}
	for _, name := range o.UpstreamKubeProxy {
		if !o.known(name) {
			return fmt.Errorf("upstream kube-proxy in %q: no such cluster (cluster-a..%s)", name, clusterName(o.Clusters-1))
		}
	}
	for name, props := range o.ClusterProperties {
		if !o.known(name) {
			return fmt.Errorf("cluster property in %q: no such cluster (cluster-a..%s)", name, clusterName(o.Clusters-1))
		}
		for key, value := range props {
			switch {
			case key == aboutv1alpha1.ClusterIDProperty || key == aboutv1alpha1.ClusterSetProperty:
				return fmt.Errorf("cluster property %s in %q: written by the clusterset itself", key, name)
			case len(validation.IsDNS1123Subdomain(key)) > 0:
				return fmt.Errorf("cluster property %q in %q: not a valid object name: %s", key, name, strings.Join(validation.IsDNS1123Subdomain(key), "; "))
			case value == "":
				return fmt.Errorf("cluster property %s in %q: empty value", key, name)
			}
		}
	}
	for name, like := range o.PrivatePods {
		switch {
		case !o.known(name):
			return fmt.Errorf("private pods in %q: no such cluster (cluster-a..%s)", name, clusterName(o.Clusters-1))
		case like != "" && !o.known(like):
			return fmt.Errorf("private pods in %q overlapping %q: no such cluster (cluster-a..%s)", name, like, clusterName(o.Clusters-1))
		case like != "" && o.PrivatePods[like] != "":
			return fmt.Errorf("private pods in %q overlapping %q, whose own pod CIDR is another's: overlap a cluster that keeps its own", name, like)
		}
	}
	return nil
}

// known tells whether the clusterset has a cluster of that name.
func (o *Options) known(name string) bool {
	for i := 0; i < o.Clusters; i++ {
		if clusterName(i) == name {
			return true
		}
	}
	return false
}

// podPlanIndex is the index in the address plan of the pod CIDR of
// cluster i: its own, or that of the cluster it overlaps (PrivatePods).
func (o *Options) podPlanIndex(i int) int {
	if like := o.PrivatePods[clusterName(i)]; like != "" {
		for k := 0; k < o.Clusters; k++ {
			if clusterName(k) == like {
				return k
			}
		}
	}
	return i
}

// IPFamily is the IP family of a clusterset.
type IPFamily string

const (
	IPv4      IPFamily = "ipv4"
	IPv6      IPFamily = "ipv6"
	DualStack IPFamily = "dual"
)

// families are the address families of f, the primary one first.
func (f IPFamily) families() []v1.IPFamily {
	switch f {
	case IPv6:
		return []v1.IPFamily{v1.IPv6Protocol}
	case DualStack:
		return []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	default:
		return []v1.IPFamily{v1.IPv4Protocol}
	}
}

// The address plan. Every range is distinct across clusters, as in a
// flat-network clusterset where any pod can reach any other pod (except
// the pod CIDR of a cluster that overlaps another's, Options.PrivatePods):
//
//	cluster i (0-based)   name cluster-<a+i>
//	Service CIDR          10.(96+i).0.0/16, cluster DNS at .0.10
//	                      fd00:10:96:<i>::/112, cluster DNS at ::a
//	pod CIDR              10.(200+i).0.0/16, node j gets 10.(200+i).j.0/24
//	                      fd00:10:2<ii>::/48, node j gets fd00:10:2<ii>:<j>::/64
//	node j's address      172.30.i.(j+1)/16, fd00:172:30::<i>:<j+1>/64 on the
//	                      fabric bridge
//	machines              172.30.250.k, fd00:172:30::fa:<k> (k = 1..250) on
//	                      the fabric: hosts outside the clusters
//	load balancers        172.31.i.k, fd00:172:31::<i>:<k> (k = 1..250),
//	                      routed to cluster i's first node
//	apiserver             172.30.i.254, fd00:172:30::<i>:fe on every node of
//	                      cluster i (the `kubernetes` Service's endpoint,
//	                      forwarded to the apiserver on the host's loopback)
//	clusterset IPs        10.250.0.0/16 and fd00:10:250::/108 (the
//	                      defaults of kube-proxy and the mcs-controller)
//
// (<i>, <j> in hexadecimal, <ii> with two digits.) A clusterset of one
// family uses that family's addresses; a dual-stack one both, IPv4 first.
//
// While a clusterset is up, the host has an unreachable route for each of
// these ranges (hostRanges): nothing on the host can send a packet for
// them anywhere, the default route included.
func clusterName(i int) string { return fmt.Sprintf("cluster-%c", 'a'+i) }
func nodeName(i, j int) string { return fmt.Sprintf("%s-node%d", clusterName(i), j) }

// plan is the address plan of one family.
type plan struct {
	family                                    v1.IPFamily
	serviceCIDR, dnsIP, clusterPodCIDR, apiIP func(i int) string
	nodePodCIDR, nodeIP                       func(i, j int) string
	// lbIP is the k-th (1-based) load-balancer address of cluster i, in
	// lbCIDR.
	lbIP func(i, k int) string
	// machineIP is the address of the k-th (1-based) machine outside the
	// clusters (AddMachine), on the fabric.
	machineIP          func(k int) string
	fabricCIDR, lbCIDR string
	fabricPrefixLen    int
}

var plans = map[v1.IPFamily]plan{
	v1.IPv4Protocol: {
		family:          v1.IPv4Protocol,
		serviceCIDR:     func(i int) string { return fmt.Sprintf("10.%d.0.0/16", 96+i) },
		dnsIP:           func(i int) string { return fmt.Sprintf("10.%d.0.10", 96+i) },
		clusterPodCIDR:  func(i int) string { return fmt.Sprintf("10.%d.0.0/16", 200+i) },
		apiIP:           func(i int) string { return fmt.Sprintf("172.30.%d.254", i) },
		nodePodCIDR:     func(i, j int) string { return fmt.Sprintf("10.%d.%d.0/24", 200+i, j) },
		nodeIP:          func(i, j int) string { return fmt.Sprintf("172.30.%d.%d", i, j+1) },
		lbIP:            func(i, k int) string { return fmt.Sprintf("172.31.%d.%d", i, k) },
		machineIP:       func(k int) string { return fmt.Sprintf("172.30.250.%d", k) },
		fabricCIDR:      "172.30.0.0/16",
		lbCIDR:          "172.31.0.0/16",
		fabricPrefixLen: 16,
	},
	v1.IPv6Protocol: {
		family:          v1.IPv6Protocol,
		serviceCIDR:     func(i int) string { return v6("fd00:10:96:%x::/112", i) },
		dnsIP:           func(i int) string { return v6("fd00:10:96:%x::a", i) },
		clusterPodCIDR:  func(i int) string { return v6("fd00:10:2%02x::/48", i) },
		apiIP:           func(i int) string { return v6("fd00:172:30::%x:fe", i) },
		nodePodCIDR:     func(i, j int) string { return v6("fd00:10:2%02x:%x::/64", i, j) },
		nodeIP:          func(i, j int) string { return v6("fd00:172:30::%x:%x", i, j+1) },
		lbIP:            func(i, k int) string { return v6("fd00:172:31::%x:%x", i, k) },
		machineIP:       func(k int) string { return v6("fd00:172:30::fa:%x", k) },
		fabricCIDR:      "fd00:172:30::/64",
		lbCIDR:          "fd00:172:31::/64",
		fabricPrefixLen: 64,
	},
}

// v6 formats an IPv6 address or prefix in its canonical form, which API
// validation insists on ("fd00:172:30::1", not "fd00:172:30::0:1").
func v6(format string, args ...any) string {
	s := fmt.Sprintf(format, args...)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.String()
	}
	return netip.MustParseAddr(s).String()
}

// each returns f applied to the plan of every family of the clusterset,
// the primary family first.
func each[T any](f IPFamily, get func(plan) T) []T {
	var out []T
	for _, fam := range f.families() {
		out = append(out, get(plans[fam]))
	}
	return out
}

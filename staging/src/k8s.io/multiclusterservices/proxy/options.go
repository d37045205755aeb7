package proxy

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// DefaultClusterSetIPCIDRs are the ranges the reference mcs-controller
// allocates clusterset IPs from when it is not told otherwise. A proxy admits
// import IPs from these ranges only, unless configured differently.
var DefaultClusterSetIPCIDRs = []string{"10.250.0.0/16", "fd00:10:250::/108"}

// DefaultManagedBy is the endpointslice.kubernetes.io/managed-by value of
// the EndpointSlices written by the reference mcs-controller.
const DefaultManagedBy = "mcs-controller.multicluster.x-k8s.io"

// LabelImportManagedBy names, on a ServiceImport, the controller that wrote
// it. KEP-1645 leaves imports to the MCS controller alone; the API has no
// field that says who that is, so this label does, as
// endpointslice.kubernetes.io/managed-by does for slices. A label is only
// as good as the rule that stops others from setting it: the admission
// policy shipped with the controller (kind-config/mcs-admission-policy.yaml)
// is that rule.
const LabelImportManagedBy = "app.kubernetes.io/managed-by"

// Options says which imports and slices a proxy may trust.
type Options struct {
	// ClusterSetIPCIDRs are the ranges an import's IPs must lie in. An
	// import IP outside them is rejected: otherwise anyone allowed to write
	// a ServiceImport could capture traffic to any address.
	ClusterSetIPCIDRs []netip.Prefix
	// TrustedManagers are the controllers a proxy accepts imports and
	// endpoints from: the LabelImportManagedBy values of ServiceImports and
	// the endpointslice.kubernetes.io/managed-by values of MCS
	// EndpointSlices. Anything else is never programmed, so a user who may
	// create a ServiceImport cannot claim a clusterset IP with it.
	TrustedManagers []string
	// LocalClusterID is the ID of the cluster the proxy runs in, if known
	// (its ClusterProperty cluster.clusterset.k8s.io). Endpoints from any
	// other source cluster, or from every cluster while it is unknown, have
	// their nodeName and node hints removed, because those name nodes of
	// another cluster.
	LocalClusterID string
	// Labels, when set, returns the labels of the slices a proxy programs
	// for import namespace/name, so that a caller holding many slices can
	// share one map per import. It must return what SliceLabels returns.
	Labels func(namespace, name string) map[string]string
}

// SliceLabels are the labels of the slices a proxy programs for import
// name: the one a proxy reads, naming the synthetic Service.
func SliceLabels(name string) map[string]string {
	return map[string]string{discoveryv1.LabelServiceName: ServiceName(name)}
}

func (o *Options) labels(namespace, name string) map[string]string {
	if o.Labels != nil {
		return o.Labels(namespace, name)
	}
	return SliceLabels(name)
}

// The largest clusterset ranges accepted. A clusterset needs an address
// per exported name, not per pod: an IPv4 range beyond a /12 (the size of
// the apiserver's default Service range) or an IPv6 range beyond a /64 is
// almost surely a mistake, and every address it admits is one an import
// could claim on every node.
const (
	maxIPv4Addresses = 1 << 20
	minIPv6Bits      = 64
)

// specialPurpose are ranges no import may ever claim, whatever the
// configuration: traffic to them is the node's own (loopback, link-local,
// cloud metadata and platform services) or not unicast at all.
var specialPurpose = []struct {
	name   string
	prefix netip.Prefix
}{
	{"this-network", netip.MustParsePrefix("0.0.0.0/8")},
	{"loopback", netip.MustParsePrefix("127.0.0.0/8")},
	{"link-local (cloud metadata 169.254.169.254)", netip.MustParsePrefix("169.254.0.0/16")},
	{"Alibaba Cloud metadata", netip.MustParsePrefix("100.100.100.200/32")},
	{"Azure platform (168.63.129.16)", netip.MustParsePrefix("168.63.129.16/32")},
	{"multicast", netip.MustParsePrefix("224.0.0.0/4")},
	{"reserved and broadcast", netip.MustParsePrefix("240.0.0.0/4")},
	{"IPv6 unspecified and loopback", netip.MustParsePrefix("::/127")},
	{"IPv4-mapped IPv6", netip.MustParsePrefix("::ffff:0:0/96")},
	{"IPv6 link-local", netip.MustParsePrefix("fe80::/10")},
	{"IPv6 multicast", netip.MustParsePrefix("ff00::/8")},
	{"AWS IPv6 metadata (fd00:ec2::254)", netip.MustParsePrefix("fd00:ec2::/64")},
}

// SpecialPurpose returns the name of the special-purpose range ip is in
// (loopback, link-local, cloud metadata and platform services, multicast),
// if any. Such an address is never a clusterset IP nor an endpoint of an
// import: a member that published one as an endpoint would make every
// other member's nodes send clusterset traffic to their own metadata
// service.
func SpecialPurpose(ip netip.Addr) (string, bool) {
	ip = ip.Unmap()
	if ip.Is4() {
		a := ip.As4()
		u := binary.BigEndian.Uint32(a[:])
		for _, sp := range specialPurpose4 {
			if u&sp.mask == sp.addr {
				return sp.name, true
			}
		}
		return "", false
	}
	for _, sp := range specialPurpose {
		if sp.prefix.Contains(ip) {
			return sp.name, true
		}
	}
	return "", false
}

// specialPurpose4 is specialPurpose's IPv4 ranges as address and mask:
// every endpoint address a proxy is handed is checked, and comparing
// integers is a tenth of Prefix.Contains.
var specialPurpose4 = func() (out []struct {
	name       string
	addr, mask uint32
}) {
	for _, sp := range specialPurpose {
		if !sp.prefix.Addr().Is4() {
			continue
		}
		a := sp.prefix.Addr().As4()
		mask := ^uint32(0) << (32 - sp.prefix.Bits())
		out = append(out, struct {
			name       string
			addr, mask uint32
		}{sp.name, binary.BigEndian.Uint32(a[:]) & mask, mask})
	}
	return out
}()

// ParseCIDRs parses a list of CIDR strings (as given on a command line) and
// refuses an empty list, a range too large to be meant (together, per
// family), ranges that overlap one another, and ranges that include a
// special-purpose address (loopback, link-local, cloud metadata,
// multicast).
func ParseCIDRs(cidrs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var v4 uint64
	for _, s := range cidrs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("invalid clusterset IP CIDR %q: %w", s, err)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("invalid clusterset IP CIDR %q: host bits set (did you mean %s?)", s, p.Masked())
		}
		if p.Addr().Is4() {
			if p.Bits() < 12 {
				return nil, fmt.Errorf("clusterset IP CIDR %q is too broad: IPv4 ranges may hold at most %d addresses (a /12); name the range the mcs-controller allocates from", s, maxIPv4Addresses)
			}
			v4 += 1 << (32 - p.Bits())
		} else if p.Bits() < minIPv6Bits {
			return nil, fmt.Errorf("clusterset IP CIDR %q is too broad: IPv6 ranges may be at most a /%d; name the range the mcs-controller allocates from", s, minIPv6Bits)
		}
		for _, sp := range specialPurpose {
			if sp.prefix.Overlaps(p) {
				return nil, fmt.Errorf("clusterset IP CIDR %q overlaps the %s range %s, which no import may claim", s, sp.name, sp.prefix)
			}
		}
		for _, q := range out {
			if q.Overlaps(p) {
				return nil, fmt.Errorf("clusterset IP CIDRs %s and %s overlap", q, p)
			}
		}
		out = append(out, p)
	}
	if v4 > maxIPv4Addresses {
		return nil, fmt.Errorf("clusterset IP CIDRs %v together admit %d IPv4 addresses, more than %d (a /12)", cidrs, v4, maxIPv4Addresses)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("at least one clusterset IP CIDR is required")
	}
	return out, nil
}

// CheckDisjoint returns an error naming the first clusterset range that
// overlaps one of others, which are the ranges of what (e.g.
// "--cluster-cidr"): an import IP there would shadow a pod, node or
// Service address.
func CheckDisjoint(ranges []netip.Prefix, what string, others []netip.Prefix) error {
	for _, r := range ranges {
		for _, o := range others {
			if r.Overlaps(o) {
				return fmt.Errorf("clusterset IP CIDR %s overlaps %s %s; choose a clusterset range that no pod, node or Service uses", r, what, o)
			}
		}
	}
	return nil
}

func (o *Options) admits(ip netip.Addr) bool {
	for _, p := range o.ClusterSetIPCIDRs {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (o *Options) trusts(manager string) bool {
	for _, m := range o.TrustedManagers {
		if m == manager {
			return true
		}
	}
	return false
}

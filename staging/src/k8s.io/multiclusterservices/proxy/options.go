package proxy

import (
	"fmt"
	"net/netip"
	"strings"
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
}

// ParseCIDRs parses a list of CIDR strings (as given on a command line) and
// refuses an empty list or a range that admits every address of a family.
func ParseCIDRs(cidrs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
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
		if p.Bits() == 0 {
			return nil, fmt.Errorf("clusterset IP CIDR %q admits every address; name the range the mcs-controller allocates from", s)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("at least one clusterset IP CIDR is required")
	}
	return out, nil
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

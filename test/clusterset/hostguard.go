package clusterset

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	mcsproxy "k8s.io/multiclusterservices/proxy"
)

// hostRanges are every address range of the clusterset: the fabric (node
// and apiserver addresses), the load-balancer addresses, each cluster's Service and pod ranges, and the
// clusterset IP ranges.
func (cs *ClusterSet) hostRanges() []string {
	ranges := append(each(cs.opts.IPFamily, func(p plan) string { return p.fabricCIDR }), each(cs.opts.IPFamily, func(p plan) string { return p.lbCIDR })...)
	for _, c := range cs.Clusters {
		for _, r := range append(slices.Clone(c.ServiceCIDRs), c.PodCIDRs...) {
			// Overlapping pod networks share a range.
			if !slices.Contains(ranges, r) {
				ranges = append(ranges, r)
			}
		}
	}
	return append(ranges, mcsproxy.DefaultClusterSetIPCIDRs...)
}

// guardHost gives the host an unreachable route for every range of the
// clusterset while it is up: whatever on the host addresses a node, a pod,
// a Service or a clusterset IP by mistake gets "no route to host" at once,
// and no such packet can follow the default route off the machine. (The
// clusterset's own traffic never leaves its namespaces: the apiserver
// reaches nodes through its egress proxy, see egress.go.)
//
// Each clusterset's routes carry a metric of its own, so that clustersets
// with other prefixes, which use the same address plan, can be up at the
// same time and remove only their own routes. A range the host already
// routes elsewhere is refused: the clusterset would shadow a real network.
func (cs *ClusterSet) guardHost() error {
	metric := routeMetric(cs.opts.Prefix)
	for _, r := range cs.hostRanges() {
		prefix, err := netip.ParsePrefix(r)
		if err != nil {
			return err
		}
		if err := refuseHostOverlap(prefix); err != nil {
			return err
		}
		family := familyFlag(prefix)
		if err := run("ip", family, "route", "add", "unreachable", r, "metric", metric); err != nil {
			return fmt.Errorf("guarding the host's route to %s: %w", r, err)
		}
		cs.onDown(levelEtcd, func() { _ = run("ip", family, "route", "del", "unreachable", r, "metric", metric) })
	}
	return nil
}

// refuseHostOverlap fails if the host has a route, other than a
// clusterset's unreachable one, into or around prefix.
func refuseHostOverlap(prefix netip.Prefix) error {
	out, err := output("ip", "-j", familyFlag(prefix), "route", "show", "table", "all")
	if err != nil {
		return fmt.Errorf("listing the host's routes: %v: %s", err, out)
	}
	var routes []struct {
		Type string `json:"type"`
		Dst  string `json:"dst"`
		Dev  string `json:"dev"`
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return fmt.Errorf("listing the host's routes: %w", err)
	}
	for _, r := range routes {
		if r.Type == "unreachable" || r.Dst == "default" || r.Type == "local" || r.Type == "broadcast" || r.Type == "multicast" {
			continue
		}
		dst, err := netip.ParsePrefix(r.Dst)
		if err != nil {
			addr, aerr := netip.ParseAddr(r.Dst)
			if aerr != nil {
				continue
			}
			dst = netip.PrefixFrom(addr, addr.BitLen())
		}
		if dst.Overlaps(prefix) && dst.Bits() > 0 && !dst.Addr().IsLinkLocalUnicast() {
			return fmt.Errorf("the host routes %s (dev %s), which overlaps the clusterset's range %s: the clusterset would shadow that network", r.Dst, r.Dev, prefix)
		}
	}
	return nil
}

// routeMetric is the metric of the prefix's unreachable routes.
func routeMetric(prefix string) string {
	h := fnv.New32a()
	h.Write([]byte(prefix))
	return strconv.Itoa(1000 + int(h.Sum32()%60000))
}

func familyFlag(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "-4"
	}
	return "-6"
}

// LeftoverRoutes lists the host's unreachable routes of the clusterset
// with prefix: what it has while up, or left after a crash.
func LeftoverRoutes(prefix string) []string {
	metric := routeMetric(prefix)
	var routes []string
	for _, family := range []string{"-4", "-6"} {
		out, err := output("ip", family, "route", "show", "type", "unreachable")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			if dst, ok := guardRoute(line, metric); ok {
				routes = append(routes, family+" "+dst)
			}
		}
	}
	return routes
}

// guardRoute returns the destination of a line of `ip route show type
// unreachable` if it is a guard route with metric: "unreachable
// 172.30.0.0/16 metric 1234 ...", or for IPv6 "unreachable
// fd00:10:250::/108 dev lo metric 1234 ...".
func guardRoute(line, metric string) (string, bool) {
	fields := strings.Fields(line)
	i := slices.Index(fields, "metric")
	if len(fields) < 2 || fields[0] != "unreachable" || i < 0 || i+1 >= len(fields) || fields[i+1] != metric {
		return "", false
	}
	return fields[1], true
}

// cleanHostRoutes removes the unreachable routes a crashed clusterset with
// prefix left.
func cleanHostRoutes(prefix string) error {
	var errs []string
	for _, r := range LeftoverRoutes(prefix) {
		family, dst, _ := strings.Cut(r, " ")
		if err := run("ip", family, "route", "del", "unreachable", dst, "metric", routeMetric(prefix)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

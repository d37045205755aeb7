package clusterset

import (
	"fmt"
	"os/exec"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// fabricNetns is the namespace holding the bridge all nodes hang off: the
// clusterset's flat network, kept out of the host so that nothing is ever
// routed there.
func (cs *ClusterSet) fabricNetns() string { return cs.opts.Prefix + "-fabric" }

// startNetwork creates the fabric and every node namespace: eth0 on the
// fabric with the node's address, forwarding on (the node routes for its
// pods), and a route to every other node's pod CIDR through that node, in
// every cluster, as a flat-network clusterset has.
func (cs *ClusterSet) startNetwork() error {
	started := time.Now()
	fabric := cs.fabricNetns()
	if err := cs.addNetns(fabric); err != nil {
		return err
	}
	if err := run("ip", "-n", fabric, "link", "add", "br0", "type", "bridge"); err != nil {
		return err
	}
	if err := run("ip", "-n", fabric, "link", "set", "br0", "up"); err != nil {
		return err
	}
	var nodes []*Node
	for _, c := range cs.Clusters {
		nodes = append(nodes, c.Nodes...)
	}
	for _, n := range nodes {
		if err := cs.addNode(n); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		for _, other := range nodes {
			if other == n {
				continue
			}
			for k := range other.PodCIDRs {
				if err := run("ip", "-n", n.Netns, "route", "add", other.PodCIDRs[k], "via", other.IPs[k], "dev", "eth0"); err != nil {
					return err
				}
			}
		}
	}
	cs.progress.timed("network", fmt.Sprintf("fabric bridge and %d node namespaces, flat routing between all pod CIDRs", len(nodes)), started)
	return nil
}

func (cs *ClusterSet) addNode(n *Node) error {
	if err := cs.addNetns(n.Netns); err != nil {
		return err
	}
	// The fabric side is named after the node's place in the address plan,
	// since interface names have at most 15 characters.
	fabricSide := fmt.Sprintf("veth-%d-%s", n.cluster.Index, strings.TrimPrefix(n.Name, n.cluster.Name+"-node"))
	steps := [][]string{
		{"ip", "link", "add", fabricSide, "netns", cs.fabricNetns(), "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
		{"ip", "-n", cs.fabricNetns(), "link", "set", fabricSide, "master", "br0", "up"},
	}
	for k, fam := range cs.opts.IPFamily.families() {
		p := plans[fam]
		// nodad: an IPv6 address is usable at once, not after duplicate
		// address detection (nothing else on the fabric can have it).
		steps = append(steps, append([]string{"ip", "-n", n.Netns, "addr", "add", fmt.Sprintf("%s/%d", n.IPs[k], p.fabricPrefixLen), "dev", "eth0"}, nodad(fam)...))
		if fam == v1.IPv6Protocol {
			// Pods' veths (their node side) need no duplicate address
			// detection either.
			steps = append(steps, []string{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1", "net.ipv6.conf.default.accept_dad=0"})
		} else {
			steps = append(steps, []string{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"})
		}
	}
	steps = append(steps, []string{"ip", "-n", n.Netns, "link", "set", "eth0", "up"})
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// addNetns creates a named network namespace with loopback up and
// registers its deletion, which also removes the veth pairs in it.
func (cs *ClusterSet) addNetns(name string) error {
	if err := run("ip", "netns", "add", name); err != nil {
		return err
	}
	cs.onDown(levelControllers, func() { _ = run("ip", "netns", "del", name) })
	return run("ip", "-n", name, "link", "set", "lo", "up")
}

// nodad are the flags of `ip addr add` for an address of family fam that
// needs no duplicate address detection.
func nodad(fam v1.IPFamily) []string {
	if fam == v1.IPv6Protocol {
		return []string{"nodad"}
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func output(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

package clusterset

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
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
	private := 0
	for _, n := range nodes {
		for _, other := range nodes {
			if other == n || !reachesPods(n.cluster, other.cluster) {
				continue
			}
			for k := range other.PodCIDRs {
				if err := run("ip", "-n", n.Netns, "route", "add", other.PodCIDRs[k], "via", other.IPs[k], "dev", "eth0"); err != nil {
					return err
				}
			}
		}
		if len(cs.opts.PrivatePods) > 0 {
			if err := cs.masqueradeLeavingPods(n); err != nil {
				return err
			}
		}
		if n.cluster.PrivatePods {
			private++
		}
	}
	what := "flat routing between all pod CIDRs"
	if private > 0 {
		what = fmt.Sprintf("pod CIDRs routed between the nodes that reach them (%d nodes with private pods)", private)
	}
	cs.progress.timed("network", fmt.Sprintf("fabric bridge and %d node namespaces, %s", len(nodes), what), started)
	return nil
}

// reachesPods tells whether the nodes of cluster from route to the pods of
// cluster to: always within a cluster, and between clusters unless one
// of them has private pods.
func reachesPods(from, to *Cluster) bool {
	return from == to || !from.PrivatePods && !to.PrivatePods
}

// masqueradeLeavingPods makes node n masquerade what its cluster's pods
// send out of eth0 to any address outside the pod networks n routes to,
// as network plugins do for traffic leaving the pod network: a cluster
// whose pods others cannot reach (or whose pod IPs are also another
// cluster's) answers a connection to its node ports to the node that
// sent it, never to a pod IP it cannot route or routes to its own pod.
func (cs *ClusterSet) masqueradeLeavingPods(n *Node) error {
	var rules []string
	for k, fam := range cs.opts.IPFamily.families() {
		var reached []string
		for _, c := range cs.Clusters {
			if reachesPods(n.cluster, c) && !slices.Contains(reached, c.PodCIDRs[k]) {
				reached = append(reached, c.PodCIDRs[k])
			}
		}
		match := "ip"
		if fam == v1.IPv6Protocol {
			match = "ip6"
		}
		rules = append(rules, fmt.Sprintf("\t\toifname \"eth0\" %s saddr %s %s daddr != { %s } masquerade\n",
			match, n.cluster.PodCIDRs[k], match, strings.Join(reached, ", ")))
	}
	ruleset := "table inet " + cniTable + " {\n\tchain postrouting {\n\t\ttype nat hook postrouting priority srcnat + 10; policy accept;\n" +
		strings.Join(rules, "") + "\t}\n}\n"
	cmd := exec.Command("ip", "netns", "exec", n.Netns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("node %s: masquerading its pods' traffic out of the pod network: %v: %s", n.Name, err, out)
	}
	return nil
}

// cniTable is the nftables table of what the harness does as a node's
// network plugin.
const cniTable = "cset-cni"

// Fail takes node n off the network and marks it as the node lifecycle
// controller marks a node whose kubelet stopped posting its status (no
// such controller runs in the harness): its eth0 goes down, so that
// nothing reaches it or leaves it, and its Ready condition becomes
// Unknown. Its processes keep running, as on a machine cut off.
func (n *Node) Fail(ctx context.Context) error {
	if err := run("ip", "-n", n.Netns, "link", "set", "eth0", "down"); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(n.cluster.API.RESTConfig())
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range node.Status.Conditions {
			if c := &node.Status.Conditions[i]; c.Type == v1.NodeReady {
				c.Status, c.Reason, c.Message = v1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
				c.LastTransitionTime = metav1.Now()
			}
		}
		_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
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

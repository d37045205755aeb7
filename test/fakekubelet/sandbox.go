package fakekubelet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// sandbox is a pod's network: a namespace with eth0, a veth pair whose
// other end is in the node namespace, and an address from the node's pod
// CIDR. The wiring is the point-to-point one of the CNI ptp plugin: the
// pod has a /32 and a default route via the gateway, which the node side
// of every pod's veth carries as a /32, and the node routes each pod's /32
// to its veth. Other nodes route the whole pod CIDR to this node's IP.
type sandbox struct {
	netns    string
	hostVeth string
	ip       net.IP
}

// PodNetnsName returns the network namespace the kubelet with netnsPrefix
// runs pod in: readable, and unique because of the UID.
func PodNetnsName(netnsPrefix string, pod *v1.Pod) string {
	name := pod.Name
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s%s-%s", netnsPrefix, name, shortUID(pod, 6))
}

func shortUID(pod *v1.Pod, n int) string {
	uid := strings.ReplaceAll(string(pod.UID), "-", "")
	if len(uid) < n {
		sum := sha256.Sum256([]byte(pod.Namespace + "/" + pod.Name))
		uid = hex.EncodeToString(sum[:])
	}
	return uid[:n]
}

// createSandbox builds the pod's network. On failure it removes what it
// made.
func (k *Kubelet) createSandbox(pod *v1.Pod) (_ *sandbox, err error) {
	addr, err := k.ipam.allocate()
	if err != nil {
		return nil, err
	}
	s := &sandbox{
		netns: PodNetnsName(k.cfg.NetnsPrefix, pod),
		// Interface names have at most 15 characters.
		hostVeth: "veth" + shortUID(pod, 11),
		ip:       addr,
	}
	defer func() {
		if err != nil {
			k.destroySandbox(s)
		}
	}()
	node, gw, pip := k.cfg.NodeNetns, k.gateway.String(), addr.String()
	steps := [][]string{
		{"netns", "add", s.netns},
		{"-n", s.netns, "link", "set", "lo", "up"},
		{"link", "add", s.hostVeth, "netns", node, "type", "veth", "peer", "name", "eth0", "netns", s.netns},
		{"-n", s.netns, "addr", "add", pip + "/32", "dev", "eth0"},
		{"-n", s.netns, "link", "set", "eth0", "up"},
		{"-n", s.netns, "route", "add", gw, "dev", "eth0", "scope", "link"},
		{"-n", s.netns, "route", "add", "default", "via", gw, "dev", "eth0"},
		{"-n", node, "addr", "add", gw + "/32", "dev", s.hostVeth},
		{"-n", node, "link", "set", s.hostVeth, "up"},
		{"-n", node, "route", "add", pip + "/32", "dev", s.hostVeth},
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			return nil, err
		}
	}
	if err := k.writeResolvConf(pod, s.netns); err != nil {
		return nil, err
	}
	if err := writeHosts(pod, s.netns, addr, k.domain()); err != nil {
		return nil, err
	}
	return s, nil
}

// destroySandbox deletes the namespace (which takes the veth pair with it)
// and returns the address. Safe on a partly built sandbox.
func (k *Kubelet) destroySandbox(s *sandbox) {
	if err := ip("netns", "del", s.netns); err != nil && !strings.Contains(err.Error(), "No such file") {
		k.log.Printf("deleting network namespace %s: %v", s.netns, err)
	}
	_ = os.RemoveAll(filepath.Join("/etc/netns", s.netns))
	k.ipam.release(s.ip)
}

// writeResolvConf gives a ClusterFirst pod the cluster DNS, as a kubelet
// does: `ip netns exec` bind-mounts /etc/netns/<ns>/resolv.conf over
// /etc/resolv.conf for the pod's processes.
func (k *Kubelet) writeResolvConf(pod *v1.Pod, netns string) error {
	if k.cfg.DNS == nil || (pod.Spec.DNSPolicy != "" && pod.Spec.DNSPolicy != v1.DNSClusterFirst) {
		return nil
	}
	domain := k.cfg.DNS.ClusterDomain
	conf := fmt.Sprintf("nameserver %s\nsearch %s.svc.%s svc.%s %s\noptions ndots:5\n",
		k.cfg.DNS.Nameserver, pod.Namespace, domain, domain, domain)
	dir := filepath.Join("/etc/netns", netns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(conf), 0o644)
}

// writeHosts gives the pod the /etc/hosts a kubelet manages: its own name
// (and, with a subdomain, its fully qualified name, as a StatefulSet's pods
// have) on its IP.
func writeHosts(pod *v1.Pod, netns string, podIP net.IP, domain string) error {
	names := hostname(pod)
	if pod.Spec.Subdomain != "" && domain != "" {
		names = fmt.Sprintf("%s.%s.%s.svc.%s\t%s", names, pod.Spec.Subdomain, pod.Namespace, domain, names)
	}
	hosts := fmt.Sprintf("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"+
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n%s\t%s\n", podIP, names)
	dir := filepath.Join("/etc/netns", netns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644)
}

// domain is the cluster domain, "" without cluster DNS.
func (k *Kubelet) domain() string {
	if k.cfg.DNS == nil {
		return ""
	}
	return k.cfg.DNS.ClusterDomain
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ipam hands out the addresses of a node's pod CIDR, skipping the network
// address and the gateway. It goes round the range rather than reusing the
// lowest free address, so that a new pod does not inherit a deleted pod's
// address (and its conntrack entries) right away.
type ipam struct {
	mu    sync.Mutex
	cidr  *net.IPNet
	size  int
	next  int
	inUse map[int]bool
}

func newIPAM(cidr string) (*ipam, net.IP, error) {
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, nil, fmt.Errorf("pod CIDR: %w", err)
	}
	ones, bits := ipnet.Mask.Size()
	if ipnet.IP.To4() == nil || bits-ones < 2 || bits-ones > 16 {
		return nil, nil, fmt.Errorf("pod CIDR %s: want an IPv4 range between /16 and /30", cidr)
	}
	a := &ipam{cidr: ipnet, size: 1 << (bits - ones), next: 2, inUse: map[int]bool{}}
	return a, a.addr(1), nil
}

func (a *ipam) addr(offset int) net.IP {
	n := toUint32(a.cidr.IP) + uint32(offset)
	return net.IPv4(byte(n>>24), byte(n>>16), byte(n>>8), byte(n)).To4()
}

func toUint32(ip net.IP) uint32 {
	ip4 := ip.To4()
	return uint32(ip4[0])<<24 | uint32(ip4[1])<<16 | uint32(ip4[2])<<8 | uint32(ip4[3])
}

func (a *ipam) allocate() (net.IP, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Offsets 2 .. size-2: not the network, the gateway or the broadcast.
	usable := a.size - 3
	for range usable {
		offset := a.next
		a.next++
		if a.next > a.size-2 {
			a.next = 2
		}
		if !a.inUse[offset] {
			a.inUse[offset] = true
			return a.addr(offset), nil
		}
	}
	return nil, fmt.Errorf("pod CIDR %s is full", a.cidr)
}

func (a *ipam) release(ip net.IP) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.inUse, int(toUint32(ip)-toUint32(a.cidr.IP)))
}

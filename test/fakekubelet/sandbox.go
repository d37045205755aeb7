package fakekubelet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// sandbox is a pod's network: a namespace with eth0, a veth pair whose
// other end is in the node namespace, and an address from each of the
// node's pod CIDRs. The wiring is the point-to-point one of the CNI ptp
// plugin: the pod has a /32 (/128) and a default route via the gateway,
// which the node side of every pod's veth carries (IPv4: the pod CIDR's
// first address as a /32; IPv6: the link-local fe80::1), and the node
// routes each pod's address to its veth. Other nodes route the whole pod
// CIDRs to this node's IPs.
type sandbox struct {
	netns    string
	hostVeth string
	// ips are the pod's addresses, one per family, the primary first.
	ips []net.IP
}

// ipv6Gateway is the pods' IPv6 gateway: the node side of every pod's veth
// has it, as a link-local address is unique per link only.
const ipv6Gateway = "fe80::1"

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
	s := &sandbox{
		netns: PodNetnsName(k.cfg.NetnsPrefix, pod),
		// Interface names have at most 15 characters.
		hostVeth: "veth" + shortUID(pod, 11),
	}
	defer func() {
		if err != nil {
			k.destroySandbox(s)
		}
	}()
	for _, a := range k.ipams {
		addr, err := a.allocate()
		if err != nil {
			return nil, err
		}
		s.ips = append(s.ips, addr)
	}
	node := k.cfg.NodeNetns
	steps := [][]string{
		{"netns", "add", s.netns},
		{"-n", s.netns, "link", "set", "lo", "up"},
	}
	if k.ipams[len(k.ipams)-1].ipv6 {
		// The pod's link-local address is usable at once, not after
		// duplicate address detection (the veth has one other end).
		steps = append(steps, []string{"netns", "exec", s.netns, "sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0"})
	}
	steps = append(steps, []string{"link", "add", s.hostVeth, "netns", node, "type", "veth", "peer", "name", "eth0", "netns", s.netns})
	for i, a := range k.ipams {
		pip := s.ips[i].String()
		if a.ipv6 {
			steps = append(steps,
				[]string{"-n", s.netns, "addr", "add", pip + "/128", "dev", "eth0", "nodad"},
				[]string{"-n", node, "addr", "add", ipv6Gateway + "/64", "dev", s.hostVeth, "nodad"})
		} else {
			steps = append(steps,
				[]string{"-n", s.netns, "addr", "add", pip + "/32", "dev", "eth0"},
				[]string{"-n", node, "addr", "add", a.gateway.String() + "/32", "dev", s.hostVeth})
		}
	}
	steps = append(steps,
		[]string{"-n", s.netns, "link", "set", "eth0", "up"},
		[]string{"-n", node, "link", "set", s.hostVeth, "up"})
	for i, a := range k.ipams {
		pip := s.ips[i].String()
		if a.ipv6 {
			steps = append(steps,
				[]string{"-n", s.netns, "-6", "route", "add", "default", "via", ipv6Gateway, "dev", "eth0"},
				[]string{"-n", node, "-6", "route", "add", pip + "/128", "dev", s.hostVeth})
		} else {
			gw := a.gateway.String()
			steps = append(steps,
				[]string{"-n", s.netns, "route", "add", gw, "dev", "eth0", "scope", "link"},
				[]string{"-n", s.netns, "route", "add", "default", "via", gw, "dev", "eth0"},
				[]string{"-n", node, "route", "add", pip + "/32", "dev", s.hostVeth})
		}
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			return nil, err
		}
	}
	if err := k.writeResolvConf(pod, s.netns); err != nil {
		return nil, err
	}
	if err := writeHosts(pod, s.netns, s.ips, k.domain()); err != nil {
		return nil, err
	}
	return s, nil
}

// destroySandbox deletes the namespace (which takes the veth pair with it)
// and returns the addresses. Safe on a partly built sandbox.
func (k *Kubelet) destroySandbox(s *sandbox) {
	if err := ip("netns", "del", s.netns); err != nil && !strings.Contains(err.Error(), "No such file") {
		k.log.Printf("deleting network namespace %s: %v", s.netns, err)
	}
	_ = os.RemoveAll(filepath.Join("/etc/netns", s.netns))
	for i, addr := range s.ips {
		k.ipams[i].release(addr)
	}
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
func writeHosts(pod *v1.Pod, netns string, podIPs []net.IP, domain string) error {
	names := hostname(pod)
	if pod.Spec.Subdomain != "" && domain != "" {
		names = fmt.Sprintf("%s.%s.%s.svc.%s\t%s", names, pod.Spec.Subdomain, pod.Namespace, domain, names)
	}
	hosts := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	for _, ip := range podIPs {
		hosts += fmt.Sprintf("%s\t%s\n", ip, names)
	}
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
// address and the gateway (IPv4). It goes round the range (the first 65536
// addresses of a larger one) rather than reusing the lowest free address,
// so that a new pod does not inherit a deleted pod's address (and its
// conntrack entries) right away.
type ipam struct {
	mu      sync.Mutex
	base    netip.Addr
	cidr    string
	ipv6    bool
	gateway net.IP // IPv4 only
	size    int
	next    int
	inUse   map[int]bool
}

func newIPAM(cidr string) (*ipam, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR: %w", err)
	}
	prefix = prefix.Masked()
	free := prefix.Addr().BitLen() - prefix.Bits()
	if free < 2 || prefix.Addr().Is4() && free > 16 {
		return nil, fmt.Errorf("pod CIDR %s: want an IPv4 range between /16 and /30 or an IPv6 range of /126 or more", cidr)
	}
	a := &ipam{base: prefix.Addr(), cidr: cidr, ipv6: prefix.Addr().Is6(), size: 1 << min(free, 16), next: 2, inUse: map[int]bool{}}
	if !a.ipv6 {
		a.gateway = a.addr(1)
	}
	return a, nil
}

func (a *ipam) addr(offset int) net.IP {
	b := a.base.As16()
	n := uint32(b[12])<<24 | uint32(b[13])<<16 | uint32(b[14])<<8 | uint32(b[15])
	n += uint32(offset)
	b[12], b[13], b[14], b[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	addr := netip.AddrFrom16(b)
	if !a.ipv6 {
		addr = addr.Unmap()
	}
	return net.IP(addr.AsSlice())
}

func (a *ipam) offset(ip net.IP) int {
	addr, _ := netip.AddrFromSlice(ip)
	x, y := addr.Unmap().As16(), a.base.As16()
	return int(uint32(x[12])<<24|uint32(x[13])<<16|uint32(x[14])<<8|uint32(x[15])) -
		int(uint32(y[12])<<24|uint32(y[13])<<16|uint32(y[14])<<8|uint32(y[15]))
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
	delete(a.inUse, a.offset(ip))
}

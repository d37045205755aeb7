package multicluster_test

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

func TestDataplaneConnectionAttemptsBeforeProgrammingNFTables(t *testing.T) {
	if netns.Isolate(t, "nft") {
		testConnectionAttemptsBeforeProgramming(t, kubeproxyconfig.ProxyModeNFTables)
	}
}

func TestDataplaneConnectionAttemptsBeforeProgrammingIPTables(t *testing.T) {
	if netns.Isolate(t, "iptables", "ip6tables", "iptables-save") {
		testConnectionAttemptsBeforeProgramming(t, kubeproxyconfig.ProxyModeIPTables)
	}
}

// testConnectionAttemptsBeforeProgramming: a client tried a clusterset IP
// while this node did not program it (the gate off, stock kube-proxy, or
// the import not seen yet), and its SYN left the node by its routes and
// was never answered. Once the IP is programmed, a new connection that
// reuses that attempt's source port, as busy clients do within the two
// minutes the kernel keeps the attempt, must reach an endpoint, not the
// attempt's leftover entry (which skips the DNAT: refused or lost). A
// connection the rules made is left alone.
func testConnectionAttemptsBeforeProgramming(t *testing.T, mode kubeproxyconfig.ProxyMode) {
	const vip, sourcePort = "10.250.0.7", 40123
	// The node's rules before (stock kube-proxy's) track connections; a
	// new network namespace tracks none until a rule asks it to.
	if mode == kubeproxyconfig.ProxyModeNFTables {
		netns.Run(t, "nft", "add table ip before; add chain ip before output { type filter hook output priority 0; }; add rule ip before output ct state new accept")
	} else {
		netns.Run(t, "iptables", "-A", "OUTPUT", "-m", "conntrack", "--ctstate", "NEW", "-j", "ACCEPT")
	}
	// A route that takes the clusterset IP off the node to a gateway
	// that never answers, as a node's default route does.
	netns.Run(t, "ip", "link", "add", "up0", "type", "veth", "peer", "name", "up1")
	netns.Run(t, "ip", "link", "set", "up0", "up")
	netns.Run(t, "ip", "link", "set", "up1", "up")
	netns.Run(t, "ip", "addr", "add", "192.168.98.1/24", "dev", "up0")
	netns.Run(t, "ip", "route", "add", vip+"/32", "via", "192.168.98.2")
	client := &net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("192.168.98.1"), Port: sourcePort},
		Timeout:   300 * time.Millisecond,
		Control: func(_, _ string, c syscall.RawConn) error {
			var err error
			_ = c.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) })
			return err
		},
	}
	if c, err := client.Dial("tcp", vip+":80"); err == nil {
		c.Close()
		t.Fatalf("%s answered before any rule held it", vip)
	}
	if !leftover(t, vip, sourcePort) {
		t.Fatalf("the attempt to %s left no unanswered conntrack entry: the test would prove nothing", vip)
	}

	// Now this node's kube-proxy programs the import.
	d := newDataplane(t, mode)
	p := d.proxier
	d.endpoint("a1", "10.1.0.1", "tcp/8080")
	p.OnServiceImportUpsert(serviceImport("web", []string{vip}))
	multicluster.DeliverSlice(p, slice("web", "cluster-a", httpPort, readyEP("10.1.0.1")))
	d.settle()
	programmed := time.Now()
	held, err := net.DialTimeout("tcp", vip+":80", time.Second)
	if err != nil {
		t.Fatalf("a new connection to the programmed %s: %v", vip, err)
	}
	defer held.Close()
	reader := bufio.NewReader(held)
	ask := func() (string, error) {
		_ = held.SetDeadline(time.Now().Add(time.Second))
		line, err := reader.ReadString('\n')
		return strings.TrimSpace(line), err
	}
	if name, err := ask(); name != "a1" {
		t.Fatalf("a held connection to %s answered %q (%v), want a1", vip, name, err)
	}

	// The client's next connection from the same port.
	var lastErr error
	answered := false
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		c, err := client.Dial("tcp", vip+":80")
		if err != nil {
			lastErr = err
			continue
		}
		name, err := echoserver.AskOn(c, "tcp", time.Second)
		if name == "a1" {
			answered = true
			t.Logf("answered by a1 %v after the import was programmed", time.Since(programmed).Round(100*time.Millisecond))
			break
		}
		lastErr = errors.Join(errors.New("answered by "+name), err)
	}
	if !answered {
		t.Fatalf("a connection from port %d, which tried %s before it was programmed, never reached an endpoint: %v", sourcePort, vip, lastErr)
	}

	// The sweeps (1, 2, 4 s after) kept the connection the rules made.
	time.Sleep(time.Until(programmed.Add(5 * time.Second)))
	_ = held.SetDeadline(time.Now().Add(time.Second))
	if _, err := held.Write([]byte("again\n")); err != nil {
		t.Fatalf("the held connection: %v", err)
	}
	if name, err := ask(); name != "a1" {
		t.Errorf("the held connection, after the sweeps, answered %q (%v), want a1", name, err)
	}
}

// leftover says whether the node's conntrack table holds an unanswered,
// not DNATed TCP entry to vip from sourcePort.
func leftover(t *testing.T, vip string, sourcePort uint16) bool {
	t.Helper()
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, netlink.FAMILY_V4)
	if err != nil {
		t.Fatalf("listing conntrack entries: %v", err)
	}
	for _, f := range flows {
		tcp, ok := f.ProtoInfo.(*netlink.ProtoInfoTCP)
		if ok && f.Forward.DstIP.String() == vip && f.Forward.SrcPort == sourcePort && f.Reverse.SrcIP.String() == vip && tcp.State == 1 {
			return true
		}
	}
	return false
}

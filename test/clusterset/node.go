package clusterset

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/fakekubelet"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

const startTimeout = 2 * time.Minute

// forwardAPIServer makes the cluster's apiserver, on the host's loopback,
// reachable at the same address on the node's loopback, so that the
// kubeconfigs written by the framework work unchanged for kube-proxy and
// CoreDNS there, and at the apiserver's advertised address (an address of
// the node), where the `kubernetes` Service sends pods; no route leads out
// of the clusterset's network.
func (cs *ClusterSet) forwardAPIServer(n *Node) error {
	ctx, cancel := context.WithCancel(context.Background())
	cs.onDown(levelNode, cancel)
	addr := strings.TrimPrefix(n.cluster.API.URL(), "https://")
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	listen := []string{addr}
	for _, ip := range n.cluster.APIServerIPs {
		bits, fam := "/32", v1.IPv4Protocol
		if net.ParseIP(ip).To4() == nil {
			bits, fam = "/128", v1.IPv6Protocol
		}
		// nodad: even on lo, a new IPv6 address is tentative until the
		// kernel's address worker has run, and listening on it at once
		// fails with "cannot assign requested address".
		if err := run("ip", append([]string{"-n", n.Netns, "addr", "add", ip + bits, "dev", "lo"}, nodad(fam)...)...); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		listen = append(listen, net.JoinHostPort(ip, port))
	}
	for _, listen := range listen {
		if err := netns.Forward(ctx, n.Netns, listen, addr); err != nil {
			return fmt.Errorf("node %s: forwarding the apiserver at %s: %w", n.Name, listen, err)
		}
	}
	return nil
}

// startKubelet registers the node and runs its fake kubelet, in this
// process, until Down.
func (cs *ClusterSet) startKubelet(ctx context.Context, n *Node) error {
	started := time.Now()
	c := n.cluster
	logFile, err := os.Create(filepath.Join(c.dir, "kubelet-"+n.Name+".log"))
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(c.API.RESTConfig())
	if err != nil {
		logFile.Close()
		return err
	}
	cfg := fakekubelet.Config{
		Client:      client,
		ClusterName: c.Name,
		NodeName:    n.Name,
		NodeIPs:     n.IPs,
		NodeNetns:   n.Netns,
		PodCIDRs:    n.PodCIDRs,
		NetnsPrefix: n.PodNetnsPrefix,
		LogDir:      filepath.Join(c.dir, "pods"),
		StateDir:    filepath.Join(c.dir, "volumes"),
		Logger:      log.New(logFile, "", log.LstdFlags|log.Lmicroseconds),
	}
	// The project's images' own binaries (kubectl mcs diagnose --probe's
	// /kubectl-mcs) are the build's.
	if dir, err := framework.BinDir(); err == nil {
		cfg.ImageBinDir = dir
	}
	if !cs.opts.NoDNS {
		cfg.DNS = &fakekubelet.DNSConfig{Nameserver: c.DNSIP, ClusterDomain: "cluster.local"}
	}
	var ips []net.IP
	for _, ip := range n.IPs {
		ips = append(ips, net.ParseIP(ip))
	}
	cert, err := c.API.KubeletServingCert(n.Name, ips...)
	if err != nil {
		logFile.Close()
		return err
	}
	cfg.Serving = &fakekubelet.ServingConfig{Cert: cert, ClientCAs: c.API.KubeletClientCAs()}
	kubelet, err := fakekubelet.New(cfg)
	if err != nil {
		logFile.Close()
		return err
	}
	if err := kubelet.Register(ctx); err != nil {
		logFile.Close()
		return fmt.Errorf("node %s: registering: %w", n.Name, err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := kubelet.Run(runCtx); err != nil {
			cfg.Logger.Printf("kubelet stopped: %v", err)
		}
	}()
	cs.onDown(levelPods, func() {
		stop()
		<-done
		logFile.Close()
	})
	cs.progress.timed(c.Name, "fake kubelet: node "+n.Name+" Ready, InternalIP "+strings.Join(n.IPs, ",")+", pods in "+strings.Join(n.PodCIDRs, ","), started)
	return nil
}

// startKubeProxy runs the project's kube-proxy in the node's namespace with
// the MultiClusterServices gate on (or, in a cluster of
// Options.UpstreamKubeProxy, upstream kube-proxy) and waits for its first
// sync.
func (cs *ClusterSet) startKubeProxy(ctx context.Context, n *Node) error {
	started := time.Now()
	args, err := cs.kubeProxyArgv(n, slices.Contains(cs.opts.UpstreamKubeProxy, n.cluster.Name))
	if err != nil {
		return err
	}
	if err := runKubeProxy(ctx, n, args); err != nil {
		return err
	}
	// Down stops whichever kube-proxy runs then, restarted or not.
	cs.onDown(levelNode, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.proxy.Stop(5 * time.Second)
	})
	cs.progress.timed(n.cluster.Name, fmt.Sprintf("%s (%s) on %s synced", filepath.Base(args[0]), cs.opts.ProxyMode, n.Name), started)
	return nil
}

// kubeProxyArgv is the command line of node n's kube-proxy: the project's
// with the gate on, or the unmodified upstream binary.
func (cs *ClusterSet) kubeProxyArgv(n *Node, upstream bool) ([]string, error) {
	c := n.cluster
	name, gate := "kube-proxy", "--feature-gates=MultiClusterServices=true"
	if upstream {
		name, gate = "kube-proxy-upstream", ""
	}
	binary, err := framework.Binary(name)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := c.API.KubeconfigFor(kubeProxyUser)
	if err != nil {
		return nil, err
	}
	args := []string{binary,
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + n.Name,
		"--proxy-mode=" + cs.opts.ProxyMode,
		"--cluster-cidr=" + strings.Join(c.PodCIDRs, ","),
		// The node is a namespace on a shared kernel: leave the host's
		// conntrack limits alone.
		"--conntrack-max-per-core=0", "--conntrack-min=0",
		"--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256",
		"--v=2",
	}
	if gate != "" {
		args = append(args, gate)
	}
	return append(args, cs.opts.KubeProxyArgs...), nil
}

// SwapKubeProxy replaces the node's kube-proxy, as an operator rolling a
// new kube-proxy onto a node would: the running one is stopped (its rules
// stay until the new one rewrites them) and the project's (upstream false)
// or upstream kube-proxy starts in its place; it returns once that one has
// synced.
func (cs *ClusterSet) SwapKubeProxy(ctx context.Context, n *Node, upstream bool) error {
	argv, err := cs.kubeProxyArgv(n, upstream)
	if err != nil {
		return err
	}
	n.mu.Lock()
	proc := n.proxy
	n.mu.Unlock()
	proc.Stop(5 * time.Second)
	return runKubeProxy(ctx, n, argv)
}

func runKubeProxy(ctx context.Context, n *Node, argv []string) error {
	proc, err := process.Start(process.Options{
		Name:  fmt.Sprintf("kube-proxy on %s", n.Name),
		Argv:  argv,
		Netns: n.Netns,
		Log:   filepath.Join(n.cluster.dir, "kube-proxy-"+n.Name+".log"),
	})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.proxy, n.proxyArgv = proc, argv
	n.mu.Unlock()
	return proc.WaitReady(ctx, startTimeout, func(context.Context) error { return kubeProxySynced(n.Netns) })
}

// CrashKubeProxy kills the node's kube-proxy with SIGKILL, as a crash
// would: its rules stay in the node's namespace.
func (n *Node) CrashKubeProxy() {
	n.mu.Lock()
	proc := n.proxy
	n.mu.Unlock()
	proc.Kill()
}

// RestartKubeProxy runs the node's kube-proxy again after CrashKubeProxy,
// with the same command line, and waits until it has synced its rules.
func (n *Node) RestartKubeProxy(ctx context.Context) error {
	n.mu.Lock()
	proc, argv := n.proxy, n.proxyArgv
	n.mu.Unlock()
	select {
	case <-proc.Exited():
	default:
		return fmt.Errorf("kube-proxy on %s is still running", n.Name)
	}
	return runKubeProxy(ctx, n, argv)
}

// kubeProxySynced reports whether kube-proxy has programmed its rules once:
// its /healthz already answers 200 while it is starting up, its sync
// timestamp metric does not.
func kubeProxySynced(ns string) error {
	metrics, err := httpGet(ns, "127.0.0.1:10249", "/metrics")
	if err != nil {
		return err
	}
	s := bufio.NewScanner(strings.NewReader(metrics))
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "kubeproxy_sync_proxy_rules_last_timestamp_seconds") && !strings.HasSuffix(line, " 0") {
			return nil
		}
	}
	return fmt.Errorf("no sync yet")
}

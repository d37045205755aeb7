// Package clusterset brings up a clusterset on one machine, without Docker:
// N real Kubernetes control planes (one etcd with a prefix per cluster, a
// kube-apiserver and a kube-controller-manager per cluster) with the MCS
// CRDs and a ClusterProperty per cluster; per node a network namespace
// with a fake kubelet (test/fakekubelet) whose pods are real processes in
// their own namespaces, and the project's kube-proxy programming real
// nftables (or iptables); per cluster CoreDNS serving cluster.local and
// clusterset.local. Pod and node namespaces of every cluster share one flat
// network, as a flat-network clusterset does. See options.go for the
// address plan.
//
// Up needs root, iproute2 and nftables, and the binaries of
// hack/build-tools.sh and hack/build.sh in _output/bin. Every process it
// starts dies with the calling process; Down (or, after a crash,
// CleanLeftovers) removes every namespace it made. The program that calls
// Up must import test/podimage (the fake kubelet re-executes it as the pod
// processes); importing this package does that.
package clusterset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	_ "github.com/mcs-kube-proxy/mcs-kube-proxy/test/podimage" // see the package doc
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

// ClusterSet is a running clusterset.
type ClusterSet struct {
	opts                 Options
	Clusters             []*Cluster
	kubeconfig           string
	controllerKubeconfig string
	etcd                 *framework.Etcd
	progress             *progress

	mu       sync.Mutex
	cleanups map[int][]func()
	downOnce sync.Once
}

// Cluster is one member cluster.
//
// Each address field is of the clusterset's primary family; the plural
// ones hold one per family, the primary first.
type Cluster struct {
	// Name is also the cluster's ID (its ClusterProperty
	// cluster.clusterset.k8s.io) and its kubeconfig context.
	Name                   string
	Index                  int
	ServiceCIDR, PodCIDR   string
	ServiceCIDRs, PodCIDRs []string
	// DNSIP is the ClusterIP of kube-system/kube-dns, served by CoreDNS.
	DNSIP  string
	DNSIPs []string
	// APIServerIP is where pods reach the apiserver: the endpoint of the
	// `kubernetes` Service, an address of every node of the cluster.
	APIServerIP  string
	APIServerIPs []string
	// PrivatePods says that no other cluster reaches this one's pods,
	// nor its pods the others' (Options.PrivatePods).
	PrivatePods bool
	API         *framework.Cluster
	Nodes       []*Node
	dir         string
	family      IPFamily
}

// Node is a node of a cluster: a network namespace on the fabric.
type Node struct {
	Name     string
	Netns    string
	IP       string
	IPs      []string
	PodCIDR  string
	PodCIDRs []string
	// PodNetnsPrefix starts the network namespace name of its pods.
	PodNetnsPrefix string
	cluster        *Cluster

	mu sync.Mutex
	// proxy is the node's kube-proxy, proxyArgv its command line.
	proxy     *process.Process
	proxyArgv []string
}

// Levels of teardown: Down stops everything of a level, in parallel,
// before going to the next lower one.
const (
	levelEtcd = iota
	levelAPIServer
	levelControllers // kube-controller-manager, network
	levelNode        // kube-proxy, CoreDNS, forwarders, scheduler
	levelPods        // fake kubelets, which stop their pods
)

var levelNames = map[int]string{
	levelEtcd:        "etcd",
	levelAPIServer:   "apiservers",
	levelControllers: "controller-managers and network",
	levelNode:        "kube-proxy, CoreDNS, schedulers",
	levelPods:        "pods",
}

// Up starts a clusterset and returns once every component is ready. On
// failure it stops what it started and returns an error naming the
// component, with the end of its log.
func Up(ctx context.Context, opts Options) (_ *ClusterSet, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := preflight(opts); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	cs := &ClusterSet{opts: opts, cleanups: map[int][]func(){}, progress: newProgress(opts.Progress)}
	defer func() {
		if err != nil {
			cs.Down()
		}
	}()
	if err := cs.prepareDir(); err != nil {
		return nil, err
	}
	cs.progress.printf("starting %d clusters with %d node(s) each; files and logs in %s", opts.Clusters, opts.NodesPerCluster, dir)
	for i := range opts.Clusters {
		f := opts.IPFamily
		c := &Cluster{Name: clusterName(i), Index: i, family: f, dir: filepath.Join(dir, clusterName(i)),
			ServiceCIDRs: each(f, func(p plan) string { return p.serviceCIDR(i) }),
			PodCIDRs:     each(f, func(p plan) string { return p.clusterPodCIDR(opts.podPlanIndex(i)) }),
			DNSIPs:       each(f, func(p plan) string { return p.dnsIP(i) }),
			APIServerIPs: each(f, func(p plan) string { return p.apiIP(i) }),
		}
		_, c.PrivatePods = opts.PrivatePods[c.Name]
		c.ServiceCIDR, c.PodCIDR, c.DNSIP, c.APIServerIP = c.ServiceCIDRs[0], c.PodCIDRs[0], c.DNSIPs[0], c.APIServerIPs[0]
		for j := range opts.NodesPerCluster {
			n := &Node{
				Name:           nodeName(i, j),
				Netns:          opts.Prefix + "-" + nodeName(i, j),
				IPs:            each(f, func(p plan) string { return p.nodeIP(i, j) }),
				PodCIDRs:       each(f, func(p plan) string { return p.nodePodCIDR(opts.podPlanIndex(i), j) }),
				PodNetnsPrefix: podNetnsPrefix(opts.Prefix, clusterName(i)),
				cluster:        c,
			}
			n.IP, n.PodCIDR = n.IPs[0], n.PodCIDRs[0]
			c.Nodes = append(c.Nodes, n)
		}
		cs.Clusters = append(cs.Clusters, c)
	}

	if err := cleanHostRoutes(opts.Prefix); err != nil {
		return nil, err
	}
	if err := cs.guardHost(); err != nil {
		return nil, err
	}
	// etcd and the network do not depend on each other.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return cs.startEtcd(gctx) })
	g.Go(func() error { return cs.startNetwork() })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	g, gctx = errgroup.WithContext(ctx)
	for _, c := range cs.Clusters {
		g.Go(func() error { return cs.startCluster(gctx, c) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	cs.kubeconfig = filepath.Join(dir, "kubeconfig")
	apis := make([]*framework.Cluster, len(cs.Clusters))
	for i, c := range cs.Clusters {
		apis[i] = c.API
	}
	if err := framework.WriteClusterSetKubeconfig(cs.kubeconfig, apis...); err != nil {
		return nil, err
	}
	cs.controllerKubeconfig = filepath.Join(dir, controllerKubeconfig)
	if err := framework.WriteImpersonatingClusterSetKubeconfig(cs.controllerKubeconfig, ControllerUser, []string{"system:authenticated"}, apis...); err != nil {
		return nil, err
	}
	cs.progress.done("clusterset", "ready; kubeconfig "+cs.kubeconfig)
	return cs, nil
}

// startCluster starts one cluster: its apiserver, then its controllers,
// API objects, node components and DNS, each as soon as what it needs is
// there.
func (cs *ClusterSet) startCluster(ctx context.Context, c *Cluster) error {
	if err := cs.startAPIServer(ctx, c); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return cs.startControllerManager(gctx, c) })
	g.Go(func() error { return cs.startScheduler(c) })
	g.Go(func() error { return cs.startLoadBalancer(c) })
	g.Go(func() error {
		if err := cs.setUpAPI(gctx, c); err != nil {
			return err
		}
		ng, nctx := errgroup.WithContext(gctx)
		ng.Go(func() error { return cs.writeClusterID(nctx, c) })
		for _, n := range c.Nodes {
			ng.Go(func() error { return cs.startNode(nctx, n) })
		}
		if !cs.opts.NoDNS {
			ng.Go(func() error { return cs.startCoreDNS(nctx, c) })
		}
		return ng.Wait()
	})
	return g.Wait()
}

// startNode makes the apiserver reachable in the node's namespace, then
// runs the fake kubelet and kube-proxy there.
func (cs *ClusterSet) startNode(ctx context.Context, n *Node) error {
	if err := cs.forwardAPIServer(n); err != nil {
		return err
	}
	if err := cs.startKubelet(ctx, n); err != nil {
		return err
	}
	if cs.opts.NoKubeProxy {
		return nil
	}
	return cs.startKubeProxy(ctx, n)
}

// onDown registers f to run at the given teardown level.
func (cs *ClusterSet) onDown(level int, f func()) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.cleanups[level] = append(cs.cleanups[level], f)
}

// Down stops every process and removes every namespace of the clusterset.
// It is safe to call more than once.
func (cs *ClusterSet) Down() {
	cs.downOnce.Do(func() {
		started := time.Now()
		cs.mu.Lock()
		levels := make([]int, 0, len(cs.cleanups))
		for l := range cs.cleanups {
			levels = append(levels, l)
		}
		cs.mu.Unlock()
		sort.Sort(sort.Reverse(sort.IntSlice(levels)))
		var took []string
		for _, l := range levels {
			levelStart := time.Now()
			var wg sync.WaitGroup
			for _, f := range cs.cleanups[l] {
				wg.Go(f)
			}
			wg.Wait()
			took = append(took, fmt.Sprintf("%s %.1fs", levelNames[l], time.Since(levelStart).Seconds()))
		}
		// A safety net for anything a failed start left half made.
		if err := CleanLeftovers(cs.opts.Prefix); err != nil {
			cs.progress.printf("cleanup: %v", err)
		}
		cs.progress.printf("clusterset stopped in %.1fs (%s)", time.Since(started).Seconds(), strings.Join(took, ", "))
	})
}

// Kubeconfig returns the path of a kubeconfig with one context per
// cluster, named after it, for the admin.
func (cs *ClusterSet) Kubeconfig() string { return cs.kubeconfig }

// ControllerUser is the identity an mcs-controller has in every cluster:
// the user kind-config/mcs-controller-rbac.yaml binds and the admission
// policies let write imports and MCS EndpointSlices.
const ControllerUser = "system:mcs-controller"

// controllerKubeconfig is the file name, in Dir, of ControllerKubeconfig.
const controllerKubeconfig = "mcs-controller.kubeconfig"

// ControllerKubeconfig returns the path of a kubeconfig with one context
// per cluster acting as ControllerUser, with only what that identity is
// granted: what an mcs-controller (or the stand-in) runs with.
func (cs *ClusterSet) ControllerKubeconfig() string { return cs.controllerKubeconfig }

// Dir returns the directory with every component's files and logs.
func (cs *ClusterSet) Dir() string { return cs.opts.Dir }

// Prefix returns the prefix of the clusterset's network namespaces.
func (cs *ClusterSet) Prefix() string { return cs.opts.Prefix }

// Cluster returns the named cluster, or nil.
func (cs *ClusterSet) Cluster(name string) *Cluster {
	for _, c := range cs.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// prepareDir removes what an earlier run left in Dir: a restarted etcd
// would otherwise bring back the old clusters' objects.
func (cs *ClusterSet) prepareDir() error {
	if err := os.MkdirAll(cs.opts.Dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(cs.opts.Dir, "cluster-*"))
	if err != nil {
		return err
	}
	for _, p := range append(old, filepath.Join(cs.opts.Dir, "etcd"), filepath.Join(cs.opts.Dir, "kubeconfig"), filepath.Join(cs.opts.Dir, controllerKubeconfig)) {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// preflight fails early, saying what is missing, rather than halfway
// through start-up.
func preflight(opts Options) error {
	if os.Geteuid() != 0 {
		return errors.New("the clusterset needs root (CAP_NET_ADMIN) for network namespaces and nftables")
	}
	tools := []string{"ip", "nft"}
	if opts.ProxyMode == "iptables" {
		tools = append(tools, "iptables")
	}
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s is not installed (hack/install-deps.sh installs it): %w", t, err)
		}
	}
	binaries := []string{"etcd", "kube-apiserver", "kube-controller-manager"}
	if !opts.NoKubeProxy {
		binaries = append(binaries, "kube-proxy")
		if len(opts.UpstreamKubeProxy) > 0 {
			binaries = append(binaries, "kube-proxy-upstream")
		}
	}
	if !opts.NoDNS {
		binaries = append(binaries, "coredns")
	}
	for _, b := range binaries {
		if _, err := framework.Binary(b); err != nil {
			return fmt.Errorf("%w (hack/build-tools.sh builds etcd, kube-apiserver, kube-controller-manager and coredns; hack/build.sh builds kube-proxy)", err)
		}
	}
	left, err := Leftovers(opts.Prefix)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("network namespaces of an earlier clusterset with prefix %q still exist (%v); is one running? If not, remove them with hack/local-down-clusterset.sh", opts.Prefix, left)
	}
	return nil
}

// StartController runs the built mcs-controller against every cluster of
// the clusterset (as ControllerUser, ControllerKubeconfig), logging to mcs-controller.log in Dir,
// with no metrics or health ports (nothing here scrapes them, and none can
// collide); args are added to its flags. The caller stops it.
func (cs *ClusterSet) StartController(args ...string) (*process.Process, error) {
	binary, err := framework.Binary("mcs-controller")
	if err != nil {
		return nil, err
	}
	return process.Start(process.Options{
		Name: "mcs-controller",
		Argv: append([]string{binary, "--kubeconfig=" + cs.ControllerKubeconfig(), "--v=2",
			"--metrics-bind-address=0", "--healthz-bind-address=0", "--secure-port=0"}, args...),
		Log: filepath.Join(cs.Dir(), "mcs-controller.log"),
	})
}

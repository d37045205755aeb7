package e2e

import (
	"context"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

const (
	prefix = "e2e"
	// localEndpointTTL is the controller's --endpoint-ttl on the local
	// clusterset: short, so that the outage case is quick.
	localEndpointTTL = 10 * time.Second
)

// local is the local clusterset (test/clusterset, two clusters of one
// node) with the real mcs-controller run as a process. Pods are network
// namespaces: the client runs there with ip netns exec, or (viaAPI) with
// the pods/exec API, which the apiserver hands to the fake kubelet's API
// as it would to a kubelet: the kind provider's path.
type local struct {
	cs         *clusterset.ClusterSet
	clusters   []*clusterset.Cluster
	ms         []*member
	echoserver string
	viaAPI     bool

	mu    sync.Mutex
	netns map[string]string // "cluster/ns/pod" -> network namespace

	// controller is the running mcs-controller process, started with
	// controllerArgs.
	controller     *process.Process
	controllerArgs []string
	// baseControllerArgs are the flags every controller of the suite gets.
	baseControllerArgs []string
	// pull is pull mode's planner and agents, where they stand in for
	// the mcs-controller (upLocalPull), and pullExtra the planner's flags
	// beside StartPullMode's.
	pull      *clusterset.PullMode
	pullExtra []string
}

func upLocal(t *testing.T, viaAPI bool) *local {
	t.Helper()
	return upLocalWith(t, prefix, clusterset.IPv4, viaAPI)
}

// upLocalWith brings up a local clusterset of family with namespaces
// named after prefix.
func upLocalWith(t *testing.T, prefix string, family clusterset.IPFamily, viaAPI bool) *local {
	t.Helper()
	return upLocalOpts(t, clusterset.Options{Clusters: 2, Prefix: prefix, IPFamily: family}, viaAPI)
}

// upLocalOpts brings up a local clusterset as opts say (Dir and Progress
// are the test's) and the mcs-controller with extra flags controllerArgs.
func upLocalOpts(t *testing.T, opts clusterset.Options, viaAPI bool, controllerArgs ...string) *local {
	t.Helper()
	l := upLocalClusters(t, opts, viaAPI)
	cs := l.cs
	var err error
	// The leader election Lease lives in cluster-b so that cluster-a's
	// outage (case 9) does not take the controller's leadership with it.
	l.baseControllerArgs = []string{"--leader-elect-context=" + cs.Clusters[1].Name, "--endpoint-ttl=" + localEndpointTTL.String()}
	l.controllerArgs = append(slices.Clone(l.baseControllerArgs), controllerArgs...)
	if l.controller, err = cs.StartController(l.controllerArgs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.mu.Lock()
		controller := l.controller
		l.mu.Unlock()
		if controller == nil {
			return
		}
		controller.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", controller.LogFile(), process.Tail(controller.LogFile(), 40))
		}
	})
	return l
}

// upLocalPull brings up a local clusterset as opts say in pull mode: the
// last cluster doubles as the hub, the planner runs there and every
// cluster has its member agent (clusterset.StartPullMode); no
// mcs-controller writes into the members. args go to the planner and
// every agent (both take the controller's --feature-gates).
func upLocalPull(t *testing.T, opts clusterset.Options, args ...string) *local {
	t.Helper()
	return upLocalPullWith(t, opts, pullFlags{}, args...)
}

// pullFlags are flags of the planner alone (--ingress-members), and of
// some clusters' agents, by cluster name (a derived member's --derived).
type pullFlags struct {
	planner  []string
	agentsOf map[string][]string
}

// upLocalPullWith is upLocalPull with further flags for the planner or
// some agents.
func upLocalPullWith(t *testing.T, opts clusterset.Options, flags pullFlags, args ...string) *local {
	t.Helper()
	l := upLocalClusters(t, opts, false)
	common := append([]string{"--endpoint-ttl=" + localEndpointTTL.String()}, args...)
	pm, err := l.cs.StartPullMode(t.Context(), append(slices.Clone(common), flags.planner...), slices.Clone(common), flags.agentsOf)
	if err != nil {
		t.Fatal(err)
	}
	l.pull = pm
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		pm.Stop()
		if t.Failed() {
			for _, p := range append([]*process.Process{pm.Planner}, slices.Collect(maps.Values(pm.Agents))...) {
				if p != nil {
					t.Logf("last lines of %s:\n%s", p.LogFile(), process.Tail(p.LogFile(), 40))
				}
			}
		}
	})
	return l
}

// upLocalClusters brings up a local clusterset as opts say (Dir and
// Progress are the test's), with nothing that writes into the members
// yet.
func upLocalClusters(t *testing.T, opts clusterset.Options, viaAPI bool) *local {
	t.Helper()
	prefix := opts.Prefix
	requireBuilt(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-proxy", "kube-proxy-upstream", "coredns", "mcs-controller", "echoserver")
	netns.Require(t, "nft", "ip")
	if left, _ := clusterset.Leftovers(prefix); len(left) > 0 {
		t.Logf("removing namespaces an earlier run left: %v", left)
		if err := clusterset.CleanLeftovers(prefix); err != nil {
			t.Fatal(err)
		}
	}
	upStart := time.Now()
	opts.Dir, opts.Progress = t.TempDir(), testWriter{t}
	cs, err := clusterset.Up(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clusterset up in %v", time.Since(upStart).Round(10*time.Millisecond))
	l := &local{cs: cs, clusters: cs.Clusters, netns: map[string]string{}, viaAPI: viaAPI}
	t.Cleanup(func() {
		cs.Down()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(cs.Dir(), "cluster-*", "*.log"))
			for _, log := range logs {
				t.Logf("--- last lines of %s ---\n%s", log, process.Tail(log, 15))
			}
		}
	})
	if l.echoserver, err = framework.Binary("echoserver"); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Clusters {
		m, err := newMember(t.Context(), c.API.RESTConfig(), c.PodCIDR, c.Nodes[0].Name)
		if err != nil {
			t.Fatal(err)
		}
		l.ms = append(l.ms, m)
	}
	return l
}

func (l *local) stopController(t *testing.T) func(*testing.T) {
	t.Helper()
	if l.pull != nil {
		return l.stopPull(t)
	}
	l.mu.Lock()
	controller := l.controller
	l.controller = nil
	l.mu.Unlock()
	controller.Stop(5 * time.Second)
	start := func(t *testing.T) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.controller != nil {
			return
		}
		c, err := l.cs.StartController(l.controllerArgs...)
		if err != nil {
			t.Fatal(err)
		}
		l.controller = c
	}
	// Whatever happens, the suite gets its controller back.
	t.Cleanup(func() { start(t) })
	return start
}

// restartController stops the mcs-controller and starts it again with
// the suite's flags and extra, as an operator changing its configuration
// would; the suite's later cases get the same flags.
func (l *local) restartController(t *testing.T, extra ...string) {
	t.Helper()
	l.mu.Lock()
	controller := l.controller
	l.controller = nil
	l.controllerArgs = append(slices.Clone(l.baseControllerArgs), extra...)
	l.mu.Unlock()
	if controller != nil {
		controller.Stop(5 * time.Second)
	}
	c, err := l.cs.StartController(l.controllerArgs...)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.controller = c
	l.mu.Unlock()
}

// stopPull stops pull mode's planner and every agent (what writes into
// the members), and returns what starts them again.
func (l *local) stopPull(t *testing.T) func(*testing.T) {
	t.Helper()
	l.mu.Lock()
	l.pull.Stop()
	l.pull.Planner = nil
	l.mu.Unlock()
	start := func(t *testing.T) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.pull.Planner != nil {
			return
		}
		if err := l.pull.StartPlanner(l.pullExtra...); err != nil {
			t.Fatal(err)
		}
		for _, c := range l.clusters {
			if err := l.pull.StartAgent(c.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { start(t) })
	return start
}

// configurePlanner restarts pull mode's planner with extra flags (the
// controller's planning flags), and with its previous ones after the
// test.
func (l *local) configurePlanner(t *testing.T, extra ...string) {
	t.Helper()
	l.mu.Lock()
	before := slices.Clone(l.pullExtra)
	l.mu.Unlock()
	l.restartPlanner(t, extra...)
	t.Cleanup(func() { l.restartPlanner(t, before...) })
}

// restartPlanner restarts pull mode's planner with extra flags, which it
// keeps.
func (l *local) restartPlanner(t *testing.T, extra ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pull.StopPlanner()
	l.pullExtra = extra
	if err := l.pull.StartPlanner(extra...); err != nil {
		t.Fatal(err)
	}
}

// configureController restarts the controller process with extra flags;
// in pull mode, the planner, which takes the controller's planning flags.
func (l *local) configureController(t *testing.T, extra ...string) {
	t.Helper()
	if l.pull != nil {
		l.configurePlanner(t, extra...)
		return
	}
	l.mu.Lock()
	before := slices.Clone(l.controllerArgs[len(l.baseControllerArgs):])
	l.mu.Unlock()
	l.restartController(t, extra...)
	t.Cleanup(func() { l.restartController(t, before...) })
}

func (l *local) kubeconfig() (string, []string) {
	var contexts []string
	for _, c := range l.clusters {
		contexts = append(contexts, c.Name)
	}
	return l.cs.Kubeconfig(), contexts
}

func (l *local) diagnoseFlags() []string {
	if l.pull == nil {
		return nil
	}
	return []string{"--hub-context=" + l.pull.Hub.Name, "--endpoint-ttl=" + localEndpointTTL.String()}
}

func (l *local) members() []*member         { return l.ms }
func (l *local) endpointTTL() time.Duration { return localEndpointTTL }

func (l *local) cluster(m *member) *clusterset.Cluster {
	for i, mm := range l.ms {
		if mm == m {
			return l.clusters[i]
		}
	}
	panic("not a member of the local clusterset: " + m.Name)
}

func (l *local) node(m *member, name string) *clusterset.Node {
	for _, n := range l.cluster(m).Nodes {
		if n.Name == name {
			return n
		}
	}
	panic("no node " + name + " in " + m.Name)
}

func (l *local) podNetns(ctx context.Context, m *member, ns, name string) (string, error) {
	key := m.Name + "/" + ns + "/" + name
	l.mu.Lock()
	found, ok := l.netns[key]
	l.mu.Unlock()
	if ok {
		return found, nil
	}
	found, err := l.cs.PodNetns(ctx, l.cluster(m), ns, name)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	l.netns[key] = found
	l.mu.Unlock()
	return found, nil
}

func (l *local) client(ctx context.Context, m *member, ns, name string, args ...string) ([]byte, error) {
	if l.viaAPI {
		// The fake kubelet runs exec'd commands with the host's binaries.
		return podExec(ctx, m, ns, name, "echo", append([]string{l.echoserver}, args...)...)
	}
	podNetns, err := l.podNetns(ctx, m, ns, name)
	if err != nil {
		return nil, err
	}
	return output(exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", podNetns, l.echoserver}, args...)...))
}

func (l *local) nodeExec(ctx context.Context, m *member, node string, argv ...string) ([]byte, error) {
	return output(exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.node(m, node).Netns}, argv...)...))
}

// stopKubeProxy SIGKILLs the node's kube-proxy (a crash: no cleanup, no
// graceful shutdown); start runs the same command line again.
func (l *local) stopKubeProxy(t *testing.T, m *member, node string) func(*testing.T) {
	t.Helper()
	n := l.node(m, node)
	n.CrashKubeProxy()
	return func(t *testing.T) {
		if err := n.RestartKubeProxy(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// stopAPIServer SIGKILLs the cluster's kube-apiserver (a crash, without a
// graceful shutdown that drains watches for a while); start runs it again
// with the same address and credentials.
func (l *local) stopAPIServer(t *testing.T, m *member) func(*testing.T) {
	t.Helper()
	api := l.cluster(m).API
	api.Crash()
	return func(t *testing.T) {
		if err := api.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitAPI(t, m, true, 60*time.Second)
	}
}

// startGateOff runs both kube-proxies as processes in two fresh network
// namespaces, reaching the apiserver through a forwarded port.
func (l *local) startGateOff(t *testing.T, m *member, _ string, node string) (gateOff, upstream func(context.Context) (string, error)) {
	t.Helper()
	c := l.cluster(m)
	kubeconfig, err := c.API.KubeconfigFor("system:kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	readers := map[string]func(context.Context) (string, error){}
	for _, run := range []struct{ ns, binary, gate string }{
		{l.cs.Prefix() + "-gateoff", "kube-proxy", "--feature-gates=MultiClusterServices=false"},
		{l.cs.Prefix() + "-upstream", "kube-proxy-upstream", ""},
	} {
		if out, err := netns.Output("ip", "netns", "add", run.ns); err != nil {
			t.Fatalf("ip netns add %s: %v %s", run.ns, err, out)
		}
		t.Cleanup(func() { _, _ = netns.Output("ip", "netns", "del", run.ns) })
		if out, err := netns.Output("ip", "-n", run.ns, "link", "set", "lo", "up"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		addr := strings.TrimPrefix(c.API.URL(), "https://")
		if err := netns.Forward(ctx, run.ns, addr, addr); err != nil {
			t.Fatal(err)
		}
		binary, err := framework.Binary(run.binary)
		if err != nil {
			t.Fatal(err)
		}
		argv := append([]string{binary, "--kubeconfig=" + kubeconfig}, gateOffArgs(m, node)...)
		if run.gate != "" {
			argv = append(argv, run.gate)
		}
		proxy, err := process.Start(process.Options{Name: run.binary + " in " + run.ns, Argv: argv, Netns: run.ns,
			Log: filepath.Join(l.cs.Dir(), run.ns+".log")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			proxy.Stop(5 * time.Second)
			if t.Failed() {
				t.Logf("last lines of %s:\n%s", proxy.LogFile(), process.Tail(proxy.LogFile(), 20))
			}
		})
		readers[run.binary] = func(ctx context.Context) (string, error) {
			out, err := output(exec.CommandContext(ctx, "ip", "netns", "exec", run.ns, "nft", "list", "ruleset"))
			return string(out), err
		}
	}
	return readers["kube-proxy"], readers["kube-proxy-upstream"]
}

// gateOffArgs are the flags both kube-proxies of the gate-off case run
// with, as the Node node, in a network namespace of their own.
func gateOffArgs(m *member, node string) []string {
	return []string{"--hostname-override=" + node,
		"--proxy-mode=nftables", "--cluster-cidr=" + m.PodCIDR,
		"--conntrack-max-per-core=0", "--conntrack-min=0",
		"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256", "--v=2"}
}

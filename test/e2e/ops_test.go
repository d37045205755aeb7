package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/multiclusterservices/crds"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

// findProcess returns the pid and command line of the one process whose
// argv[0] ends with binary and whose arguments contain every one of want.
// The harness does not hand out the processes it starts (kube-proxy, the
// apiservers), so the suite finds them like an operator would.
func findProcess(t *testing.T, binary string, want ...string) (int, []string) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var found []int
	var argv []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if !strings.HasSuffix(args[0], "/"+binary) {
			continue
		}
		all := strings.Join(args, " ")
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(all, w)
		}
		if ok {
			found = append(found, pid)
			argv = args
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s process with %v, found %v", binary, want, found)
	}
	return found[0], argv
}

// waitGone waits until pid has exited (the harness reaps its children).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	eventually(t, 20*time.Second, "process "+strconv.Itoa(pid)+" to exit", func() (bool, string) {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
		return os.IsNotExist(err), ""
	})
}

// traffic sends a request to addr from ns every 50ms until stopped and
// counts the answered and unanswered ones.
type traffic struct {
	ok, failed atomic.Int64
	stop       context.CancelFunc
	done       chan struct{}
}

func startTraffic(ns, addr string) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for ctx.Err() == nil {
			if ask(ns, "tcp", addr) != "" {
				tr.ok.Add(1)
			} else {
				tr.failed.Add(1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return tr
}

func (tr *traffic) finish() (ok, failed int64) {
	tr.stop()
	<-tr.done
	return tr.ok.Load(), tr.failed.Load()
}

func (s *suite) testRestartAndCRD(t *testing.T) {
	sp := s.space(t, "e2e-restart")
	sp.service(s.a, "web", nil)
	sp.service(s.b, "web", nil)
	sp.service(s.a, "gone", nil)
	sp.echoPods(s.a, "web", "web-a-1")
	sp.echoPods(s.b, "web", "web-b-1")
	sp.echoPods(s.a, "gone", "gone-a-1")
	client := sp.client(s.b, "client")
	sp.export(s.a, "web")
	sp.export(s.b, "web")
	sp.export(s.a, "gone")
	vip, vipGone := sp.vip(s.b, "web"), sp.vip(s.b, "gone")
	both := []string{"web-a-1", "web-b-1"}
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, both)
	waitAnswers(t, client, "tcp", hostPort(vipGone, 80), 5, []string{"gone-a-1"})
	node := s.b.Nodes[0]

	t.Run("kube-proxy restart", func(t *testing.T) {
		tr := startTraffic(client, hostPort(vip, 80))
		pid, argv := findProcess(t, "kube-proxy", "--hostname-override="+node.Name, s.cs.Dir())
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)
		// While kube-proxy is down an import goes away: its rules must not
		// survive the restart.
		sp.unexport(s.a, "gone")
		eventually(t, 30*time.Second, "import gone to leave B", func() (bool, string) {
			_, err := mcsClient(s.b).MulticlusterV1beta1().ServiceImports(sp.name).Get(t.Context(), "gone", metav1.GetOptions{})
			return apierrors.IsNotFound(err), errString(err)
		})
		proxy, err := process.Start(process.Options{
			Name: "restarted kube-proxy on " + node.Name, Argv: argv, Netns: node.Netns,
			Log: filepath.Join(s.cs.Dir(), s.b.Name, "kube-proxy-"+node.Name+"-restarted.log"),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.top.Cleanup(func() { proxy.Stop(5 * time.Second) })
		waitRules(t, node.Netns, 60*time.Second, []string{vip}, []string{vipGone})
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, both)
		if got := answers(client, "tcp", hostPort(vipGone, 80), 3); len(got) > 0 {
			t.Errorf("the VIP of an import deleted while kube-proxy was down still answers: %v", got)
		}
		ok, failed := tr.finish()
		t.Logf("traffic to %s during the restart: %d answered, %d unanswered", vip, ok, failed)
	})

	t.Run("ServiceImport CRD delete and recreate", func(t *testing.T) {
		ext, err := apiextensionsclientset.NewForConfig(s.b.API.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		crd, err := crds.ServiceImport()
		if err != nil {
			t.Fatal(err)
		}
		tr := startTraffic(client, hostPort(vip, 80))
		if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(t.Context(), crd.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the CRD to go", func() (bool, string) {
			_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crd.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), errString(err)
		})
		waitRules(t, node.Netns, 60*time.Second, nil, []string{vip})
		if got := answers(client, "tcp", hostPort(vip, 80), 3); len(got) > 0 {
			t.Errorf("the VIP answers without the ServiceImport CRD: %v", got)
		}
		if err := crds.Install(t.Context(), ext, crd); err != nil {
			t.Fatal(err)
		}
		// The controller writes the import again, kube-proxy's watch comes
		// back without a restart.
		if got := sp.vip(s.b, "web"); got != vip {
			t.Errorf("clusterset IP after the CRD came back: %s, was %s", got, vip)
		}
		waitRules(t, node.Netns, 60*time.Second, []string{vip}, []string{vipGone})
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, both)
		ok, failed := tr.finish()
		t.Logf("traffic to %s across the CRD delete/recreate: %d answered, %d unanswered", vip, ok, failed)
	})
}

func (s *suite) testGateOff(t *testing.T) {
	sp := s.space(t, "e2e-gateoff")
	local := sp.service(s.b, "web", nil)
	sp.service(s.a, "web", nil)
	sp.echoPods(s.a, "web", "web-a-1")
	sp.echoPods(s.b, "web", "web-b-1")
	sp.export(s.a, "web")
	sp.export(s.b, "web")
	vip := sp.vip(s.b, "web")
	waitRules(t, s.b.Nodes[0].Netns, 30*time.Second, []string{vip, local.Spec.ClusterIP}, nil)

	kubeconfig, err := s.b.API.KubeconfigFor("system:kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	// kube-proxy waits for its Node object (for the node's IPs) before
	// giving up on it; the harness's scheduler stand-in binds pods only to
	// the harness's own nodes, so an extra Node object is safe.
	extra := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-extra-node"},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "172.30.1.250"}}},
	}
	if _, err := s.b.API.Client().CoreV1().Nodes().Create(t.Context(), extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.b.API.Client().CoreV1().Nodes().Delete(context.Background(), extra.Name, metav1.DeleteOptions{})
	})
	rulesets := map[string]string{}
	for _, run := range []struct{ ns, binary, gate string }{
		{prefix + "-gateoff", "kube-proxy", "--feature-gates=MultiClusterServices=false"},
		{prefix + "-upstream", "kube-proxy-upstream", ""},
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
		addr := strings.TrimPrefix(s.b.API.URL(), "https://")
		if err := netns.Forward(ctx, run.ns, addr, addr); err != nil {
			t.Fatal(err)
		}
		binary, err := framework.Binary(run.binary)
		if err != nil {
			t.Fatal(err)
		}
		argv := []string{binary, "--kubeconfig=" + kubeconfig, "--hostname-override=" + extra.Name,
			"--proxy-mode=nftables", "--cluster-cidr=" + s.b.PodCIDR,
			"--conntrack-max-per-core=0", "--conntrack-min=0",
			"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256", "--v=2"}
		if run.gate != "" {
			argv = append(argv, run.gate)
		}
		proxy, err := process.Start(process.Options{Name: run.binary + " in " + run.ns, Argv: argv, Netns: run.ns,
			Log: filepath.Join(s.cs.Dir(), run.ns+".log")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			proxy.Stop(5 * time.Second)
			if t.Failed() {
				t.Logf("last lines of %s:\n%s", proxy.LogFile(), process.Tail(proxy.LogFile(), 20))
			}
		})
		started := time.Now()
		waitRules(t, run.ns, 60*time.Second, []string{local.Spec.ClusterIP}, nil)
		t.Logf("%s programmed the local Service after %v", run.binary, time.Since(started).Round(10*time.Millisecond))
	}
	// Same rules as upstream, and no clusterset IP, once both settle.
	eventually(t, 30*time.Second, "the gate-off ruleset to equal upstream's", func() (bool, string) {
		for _, ns := range []string{prefix + "-gateoff", prefix + "-upstream"} {
			rs, err := ruleset(ns)
			if err != nil {
				return false, err.Error()
			}
			rulesets[ns] = normalize(rs)
		}
		return rulesets[prefix+"-gateoff"] == rulesets[prefix+"-upstream"], lineDiff(rulesets[prefix+"-gateoff"], rulesets[prefix+"-upstream"])
	})
	if hasIP(rulesets[prefix+"-gateoff"], vip) || strings.Contains(rulesets[prefix+"-gateoff"], "clusterset") {
		t.Errorf("the gate-off node programs the import (VIP %s)", vip)
	}
}

// normalize sorts a ruleset's lines: element order inside sets and maps
// is not part of the behaviour.
func normalize(rs string) string {
	lines := strings.Split(rs, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func lineDiff(a, b string) string {
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(a, "\n") {
		inA[l] = true
	}
	for _, l := range strings.Split(b, "\n") {
		inB[l] = true
	}
	var out []string
	for l := range inA {
		if !inB[l] {
			out = append(out, "gate-off only: "+l)
		}
	}
	for l := range inB {
		if !inA[l] {
			out = append(out, "upstream only: "+l)
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = out[:20]
	}
	return strings.Join(out, "\n")
}

func (s *suite) testOutage(t *testing.T) {
	sp := s.space(t, "e2e-outage")
	sp.service(s.a, "web", nil)
	sp.service(s.b, "web", nil)
	ipsA := sp.echoPods(s.a, "web", "web-a-1")
	ipsB := sp.echoPods(s.b, "web", "web-b-1")
	client := sp.client(s.b, "client")
	sp.export(s.a, "web")
	sp.export(s.b, "web")
	vip := sp.vip(s.b, "web")
	node := s.b.Nodes[0].Netns
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, []string{"web-a-1", "web-b-1"})

	// The harness has no Stop/Start for one apiserver that keeps the
	// cluster (framework.Cluster.Stop is final): kill the process found by
	// its directory and run the same command line again later.
	// SIGKILL: a crash, and no graceful shutdown that drains watches for
	// a while.
	pid, argv := findProcess(t, "kube-apiserver", s.a.API.Dir())
	down := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	waitRules(t, node, endpointTTL+60*time.Second, []string{vip, ipsB["web-b-1"]}, []string{ipsA["web-a-1"]})
	t.Logf("OUTAGE A's endpoints left B's rules %v after A's apiserver stopped (endpoint TTL %v)", time.Since(down).Round(100*time.Millisecond), endpointTTL)
	if elapsed := time.Since(down); elapsed < endpointTTL/2 {
		t.Errorf("A's endpoints left after %v, before the endpoint TTL %v", elapsed, endpointTTL)
	}
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 20, []string{"web-b-1"})
	if got := sp.vip(s.b, "web"); got != vip {
		t.Errorf("clusterset IP moved during the outage: %s -> %s", vip, got)
	}

	t.Run("return", func(t *testing.T) {
		api, err := process.Start(process.Options{Name: "restarted kube-apiserver of " + s.a.Name, Argv: argv,
			Log: filepath.Join(s.cs.Dir(), s.a.Name, "kube-apiserver-restarted.log")})
		if err != nil {
			t.Fatal(err)
		}
		s.top.Cleanup(func() { api.Stop(3 * time.Second) })
		back := time.Now()
		eventually(t, 60*time.Second, "A's apiserver to answer", func() (bool, string) {
			_, err := s.a.API.Client().CoreV1().Namespaces().Get(t.Context(), sp.name, metav1.GetOptions{})
			return err == nil, errString(err)
		})
		waitRules(t, node, 90*time.Second, []string{vip, ipsA["web-a-1"], ipsB["web-b-1"]}, nil)
		t.Logf("OUTAGE A's endpoints back in B's rules %v after A's apiserver restarted", time.Since(back).Round(100*time.Millisecond))
		waitAnswers(t, client, "tcp", hostPort(vip, 80), 30, []string{"web-a-1", "web-b-1"})
	})
}

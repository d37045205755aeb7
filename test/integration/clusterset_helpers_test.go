package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

// hostState is what a clusterset must leave as it found: the host's
// interfaces and nftables tables (the harness never creates any there)
// and its routes other than clustersets' unreachable ones (which come and
// go with clustersets of other tests; LeftoverRoutes checks this one's).
type hostState struct {
	links, tables, routes string
}

func csHostState(t *testing.T) hostState {
	t.Helper()
	run := func(name string, args ...string) string {
		out, err := netns.Output(name, args...)
		if err != nil {
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	}
	return hostState{
		links:  run("sh", "-c", "ip -o link show | awk -F': ' '{print $2}'"),
		tables: run("nft", "list", "tables"),
		routes: run("sh", "-c", "{ ip -4 route show table all; ip -6 route show table all; } | grep -v '^unreachable' || true"),
	}
}

func upClusterSet(t *testing.T, opts clusterset.Options) (*clusterset.ClusterSet, hostState) {
	t.Helper()
	framework.SkipUnlessBuilt(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-proxy", "coredns")
	netns.Require(t, "nft", "iptables", "getent")
	// A test binary killed by a timeout leaves its namespaces behind; the
	// prefix is this test's own.
	if left, _ := clusterset.Leftovers(opts.Prefix); len(left) > 0 {
		t.Logf("removing namespaces an earlier run left: %v", left)
		if err := clusterset.CleanLeftovers(opts.Prefix); err != nil {
			t.Fatal(err)
		}
	}
	before := csHostState(t)
	opts.Dir = t.TempDir()
	opts.Progress = testWriter{t}
	started := time.Now()
	cs, err := clusterset.Up(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d clusters up in %v", opts.Clusters, time.Since(started).Round(10*time.Millisecond))
	t.Cleanup(func() {
		cs.Down()
		if t.Failed() {
			csDumpLogs(t, cs)
		}
	})
	return cs, before
}

// csCheckNothingLeft compares the host with its state before Up, and looks
// for processes of the clusterset.
func csCheckNothingLeft(t *testing.T, cs *clusterset.ClusterSet, before hostState) {
	t.Helper()
	if left, err := clusterset.Leftovers(cs.Prefix()); err != nil || len(left) > 0 {
		t.Errorf("network namespaces left: %v (%v)", left, err)
	}
	if left := clusterset.LeftoverRoutes(cs.Prefix()); len(left) > 0 {
		t.Errorf("host routes left: %v", left)
	}
	// Other namespaces may come and go meanwhile (a demo, other tests);
	// every namespace of the harness carries its prefix.
	after := csHostState(t)
	if after.links != before.links {
		t.Errorf("host interfaces changed:\nbefore:\n%s\nafter:\n%s", before.links, after.links)
	}
	if after.tables != before.tables {
		t.Errorf("host nftables tables changed:\nbefore:\n%s\nafter:\n%s", before.tables, after.tables)
	}
	if after.routes != before.routes {
		t.Errorf("host routes changed:\nbefore:\n%s\nafter:\n%s", before.routes, after.routes)
	}
	if procs := csProcesses(cs.Dir()); len(procs) > 0 {
		t.Errorf("processes left: %v", procs)
	}
	etc, _ := filepath.Glob(filepath.Join("/etc/netns", cs.Prefix()+"-*"))
	if len(etc) > 0 {
		t.Errorf("/etc/netns entries left: %v", etc)
	}
}

// csProcesses lists the children of this process (pods, kube-proxy,
// CoreDNS, control planes are all children) and any process whose command
// line mentions the clusterset's directory.
func csProcesses(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == me {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The parent pid is the second field after the command in parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmd := strings.ReplaceAll(string(cmdline), "\x00", " ")
		if (len(fields) > 1 && fields[1] == me) || strings.Contains(cmd, dir) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}

func csDumpLogs(t *testing.T, cs *clusterset.ClusterSet) {
	logs, _ := filepath.Glob(filepath.Join(cs.Dir(), "cluster-*", "*.log"))
	pods, _ := filepath.Glob(filepath.Join(cs.Dir(), "cluster-*", "pods", "*", "*", "*.log"))
	for _, log := range append(logs, pods...) {
		t.Logf("--- last lines of %s ---\n%s", log, process.Tail(log, 15))
	}
}

// testWriter sends the harness's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func csCreateNamespace(t *testing.T, c *clusterset.Cluster) {
	t.Helper()
	_, err := c.API.Client().CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: csNamespace}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func csCreateService(t *testing.T, c *clusterset.Cluster, app string, port int) {
	t.Helper()
	_, err := c.API.Client().CoreV1().Services(csNamespace).Create(t.Context(), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []v1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt(port)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func csEchoPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "echo"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "echo", Image: "mcs-kube-proxy/echoserver", Args: []string{"--port=8080"},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(8080)}}, PeriodSeconds: 1},
		}}},
	}
}

func csNetexecPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "netexec", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Args: []string{"netexec", "--http-port=8080"},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(8080)}}, PeriodSeconds: 1},
		}}},
	}
}

func csClientPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// csCreatePod retries while admission waits for the namespace's default
// ServiceAccount.
func csCreatePod(t *testing.T, c *clusterset.Cluster, pod *v1.Pod) {
	t.Helper()
	eventually(t, 30*time.Second, "creating pod "+pod.Name, func() (bool, string) {
		_, err := c.API.Client().CoreV1().Pods(csNamespace).Create(t.Context(), pod, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), errString(err)
	})
}

// csWaitPodsReady waits until the pods are Ready and returns their IPs.
func csWaitPodsReady(t *testing.T, c *clusterset.Cluster, names ...string) map[string]string {
	t.Helper()
	ips, err := c.WaitPodsReady(t.Context(), 60*time.Second, csNamespace, names...)
	if err != nil {
		t.Fatal(err)
	}
	return ips
}

// csWaitEndpoints waits until the Service's EndpointSlices (made by
// kube-controller-manager) list exactly these ready addresses.
func csWaitEndpoints(t *testing.T, c *clusterset.Cluster, service string, ips ...string) {
	t.Helper()
	want := slices.Clone(ips)
	sort.Strings(want)
	eventually(t, 30*time.Second, service+" endpoints "+strings.Join(want, ","), func() (bool, string) {
		list, err := c.API.Client().DiscoveryV1().EndpointSlices(csNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					got = append(got, e.Addresses...)
				}
			}
		}
		sort.Strings(got)
		return slices.Equal(got, want), strings.Join(got, ",")
	})
}

func csPodNetns(t *testing.T, cs *clusterset.ClusterSet, c *clusterset.Cluster, pod string) string {
	t.Helper()
	ns, err := cs.PodNetns(t.Context(), c, csNamespace, pod)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func csExport(t *testing.T, c *clusterset.Cluster, name string) {
	t.Helper()
	mcs := mcsclientset.NewForConfigOrDie(c.API.RESTConfig())
	_, err := mcs.MulticlusterV1beta1().ServiceExports(csNamespace).Create(t.Context(), &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// csImportIP waits for the cluster's ServiceImport and returns its IP.
func csImportIP(t *testing.T, c *clusterset.Cluster, name string) string {
	t.Helper()
	mcs := mcsclientset.NewForConfigOrDie(c.API.RESTConfig())
	var ip string
	eventually(t, 60*time.Second, c.Name+" ServiceImport "+name, func() (bool, string) {
		si, err := mcs.MulticlusterV1beta1().ServiceImports(csNamespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || len(si.Spec.IPs) == 0 {
			return false, errString(err)
		}
		ip = si.Spec.IPs[0]
		return true, ""
	})
	return ip
}

// csLookup resolves name through the DNS server at dnsIP, from inside a
// pod's namespace.
func csLookup(podNetns, dnsIP, name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(_ context.Context, network, _ string) (net.Conn, error) {
		return netns.Dial(podNetns, network, net.JoinHostPort(dnsIP, "53"), 2*time.Second)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupHost(ctx, name)
	sort.Strings(addrs)
	return addrs, err
}

// csHTTPGet fetches url from inside a network namespace.
func csHTTPGet(ns, url string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(ns, network, addr, 2*time.Second)
		},
	}}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

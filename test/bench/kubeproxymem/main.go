// Command bench-kube-proxy-memory measures what kube-proxy holds in memory
// for N ServiceImports against N plain Services, in the same run: for each
// path a fresh kube-apiserver is filled with N objects of 10 endpoints in
// two EndpointSlices (imports: one per source cluster), this project's
// kube-proxy (gate on, nftables) runs in a network namespace of its own
// until every clusterset or cluster IP is in its rules, and its live heap
// is read after a forced garbage collection (/debug/pprof/heap?gc=1). The
// same kube-proxy against the empty apiserver gives the baseline that is
// subtracted. With -restart, kube-proxy is then restarted over its own
// rules, as a node's kube-proxy restarts, and the time to its first full
// sync is compared too (-sources gives each object more slices: an import
// exported from that many clusters). hack/bench-kube-proxy-memory.sh builds
// and runs it (as root).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crds"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

var (
	count     = flag.Int("n", 10000, "ServiceImports, and Services, per path")
	endpoints = flag.Int("endpoints", 10, "endpoints per object, spread over its -sources EndpointSlices")
	sources   = flag.Int("sources", 2, "EndpointSlices per object: an import's source clusters, a Service's slices")
	restart   = flag.Bool("restart", false, "then restart kube-proxy over its rules and time its first full sync")
	kubeProxy = flag.String("kube-proxy", "_output/bin/kube-proxy", "kube-proxy binary")
	workDir   = flag.String("dir", "", "working directory (default: a temporary one)")
	profiles  = flag.String("profiles", "", "directory to save kube-proxy's heap profiles in (go tool pprof -sample_index=inuse_space)")
	order     = flag.String("order", "services,imports", "the order the two paths run in, to see what the order adds (imports,services)")
)

const (
	namespace = "bench"
	nodeName  = "bench-node"
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type result struct {
	path       string
	base, full uint64 // live heap bytes
	fullRSS    uint64
	objects    int
	// restarted is the time from kube-proxy's restart to its first full
	// sync done (-restart).
	restarted time.Duration
}

func run() error {
	ctx := context.Background()
	// results are in this order whichever order the paths run in: the
	// ratios are the imports' over the Services'.
	known := []string{"services", "imports"}
	paths := strings.Split(*order, ",")
	if len(paths) != 2 || !slices.Contains(paths, known[0]) || !slices.Contains(paths, known[1]) {
		return fmt.Errorf("-order=%s: want services,imports or imports,services", *order)
	}
	dir := *workDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "bench-kube-proxy-memory-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	binary, err := filepath.Abs(*kubeProxy)
	if err != nil {
		return err
	}
	etcd, err := framework.StartEtcd(ctx, filepath.Join(dir, "etcd"))
	if err != nil {
		return err
	}
	defer etcd.Stop()
	results := make([]result, len(known))
	for _, path := range paths {
		r, err := measure(ctx, etcd, dir, binary, path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		results[slices.Index(known, path)] = r
	}
	fmt.Printf("\n%-9s %8s %12s %12s %14s %12s\n", "path", "objects", "heap base", "heap full", "heap/object", "RSS full")
	var perObject [2]float64
	for i, r := range results {
		perObject[i] = float64(r.full-r.base) / float64(r.objects)
		fmt.Printf("%-9s %8d %10.1f MB %10.1f MB %12.0f B %10.1f MB\n", r.path, r.objects, mb(r.base), mb(r.full), perObject[i], mb(r.fullRSS))
	}
	fmt.Printf("RESULT heap per import / heap per Service = %.2f (N=%d, %d endpoints each in %d slices)\n", perObject[1]/perObject[0], *count, *endpoints, *sources)
	if *restart {
		fmt.Printf("RESULT restart to first full sync: imports %s / Services %s = %.2f\n", results[1].restarted.Round(time.Millisecond),
			results[0].restarted.Round(time.Millisecond), results[1].restarted.Seconds()/results[0].restarted.Seconds())
	}
	return nil
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// measure fills a fresh apiserver with one path's objects and measures
// kube-proxy before and after.
func measure(ctx context.Context, etcd *framework.Etcd, dir, binary, path string) (result, error) {
	r := result{path: path, objects: *count}
	c, err := framework.StartCluster(ctx, framework.ClusterOptions{Name: "bench-" + path, Etcd: etcd, Dir: filepath.Join(dir, path),
		ServiceCIDR: "10.96.0.0/12",
		ExtraArgs:   []string{"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"}})
	if err != nil {
		return r, err
	}
	defer c.Stop()
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 3000, 6000
	kube := kubernetes.NewForConfigOrDie(cfg)
	if err := prepare(ctx, c, kube); err != nil {
		return r, err
	}
	kubeconfig, err := c.KubeconfigFor(framework.AdminUser)
	if err != nil {
		return r, err
	}
	kp := kubeProxyRun{dir: dir, binary: binary, kubeconfig: kubeconfig, apiURL: c.URL()}
	if r.base, _, _, err = kp.run(ctx, path+"-base", 0, false); err != nil {
		return r, err
	}
	start := time.Now()
	if err := populate(ctx, kube, mcsclientset.NewForConfigOrDie(cfg), path); err != nil {
		return r, err
	}
	fmt.Printf("%s: created %d objects with %d slices each in %s\n", path, *count, *sources, time.Since(start).Round(time.Millisecond))
	r.full, r.fullRSS, r.restarted, err = kp.run(ctx, path, *count, *restart)
	return r, err
}

func prepare(ctx context.Context, c *framework.Cluster, kube kubernetes.Interface) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(c.RESTConfig()), all...); err != nil {
		return err
	}
	prop := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": aboutv1alpha1.SchemeGroupVersion.String(), "kind": "ClusterProperty",
		"metadata": map[string]any{"name": aboutv1alpha1.ClusterIDProperty},
		"spec":     map[string]any{"value": "bench"},
	}}
	if _, err := dynamic.NewForConfigOrDie(c.RESTConfig()).Resource(aboutv1alpha1.Resource).Create(ctx, prop, metav1.CreateOptions{}); err != nil {
		return err
	}
	// kube-proxy waits for its Node (for the node's IPs) before starting.
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.99.1"}}}}
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err = kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	return err
}

// populate creates N Services, or N ServiceImports, with two slices each.
func populate(ctx context.Context, kube kubernetes.Interface, mcs mcsclientset.Interface, path string) error {
	var g errgroup.Group
	g.SetLimit(64)
	for i := 0; i < *count; i++ {
		g.Go(func() error { return create(ctx, kube, mcs, path, i) })
	}
	return g.Wait()
}

func create(ctx context.Context, kube kubernetes.Interface, mcs mcsclientset.Interface, path string, i int) error {
	name := fmt.Sprintf("svc-%05d", i)
	perSlice := max(*endpoints / *sources, 1)
	for half := range *sources {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-%d", name, half)},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
		}
		for e := range perSlice {
			// 10.128.0.0/14 (the cluster CIDR), unique per slice and
			// endpoint.
			n := (i**sources+half)*perSlice + e
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+n/62500, n/250%250, n%250+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			})
		}
		if path == "services" {
			slice.Labels = map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "bench"}
		} else {
			// As the mcs-controller writes them.
			slice.Labels = export.ImportedSliceLabels(name, fmt.Sprintf("cluster-%d", half), mcsproxy.DefaultManagedBy)
		}
		if _, err := kube.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	port := []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
	if path == "services" {
		_, err := kube.CoreV1().Services(namespace).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ServiceSpec{Ports: port}}, metav1.CreateOptions{})
		return err
	}
	si, err := mcs.MulticlusterV1beta1().ServiceImports(namespace).Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{fmt.Sprintf("10.250.%d.%d", i/250, i%250+1)},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The status the mcs-controller writes: source clusters and its
	// conditions. kube-proxy never reads it, and should not hold it.
	now := metav1.Now()
	si.Status = mcsv1beta1.ServiceImportStatus{
		Clusters:             sourceClusters(),
		EndpointSliceObjects: mcsv1beta1.EndpointSliceObjectsPresent,
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "the import is ready", LastTransitionTime: now},
			{Type: "ClusterSetIPConflict", Status: metav1.ConditionFalse, Reason: "NoConflict", Message: "no other ServiceImport carries this import's clusterset IPs", LastTransitionTime: now},
			{Type: "EndpointsStale", Status: metav1.ConditionFalse, Reason: "SourcesReachable", Message: "the endpoints come from reachable source clusters", LastTransitionTime: now},
		},
	}
	_, err = mcs.MulticlusterV1beta1().ServiceImports(namespace).UpdateStatus(ctx, si, metav1.UpdateOptions{})
	return err
}

// sourceClusters is an import's status: its -sources clusters.
func sourceClusters() []mcsv1beta1.ClusterStatus {
	out := make([]mcsv1beta1.ClusterStatus, *sources)
	for i := range out {
		out[i].Cluster = fmt.Sprintf("cluster-%d", i)
	}
	return out
}

// kubeProxyRun is how kube-proxy is run against one path's apiserver.
type kubeProxyRun struct {
	dir, binary, kubeconfig, apiURL string
}

// run runs kube-proxy in a fresh network namespace until its rules send
// want service IPs to endpoints (the kubernetes Service has none here: the
// test apiserver runs no endpoint reconciler), then returns its live heap
// after a forced GC and its RSS. With restart, it then stops kube-proxy
// and starts it again in the same namespace, over the rules it left, and
// returns the time from that start to its first sync done: the first
// full ruleset a restarted node's kube-proxy writes.
func (k kubeProxyRun) run(ctx context.Context, name string, want int, restart bool) (heap, rss uint64, restarted time.Duration, err error) {
	ns := "mcs-bench-" + name
	_, _ = netns.Output("ip", "netns", "del", ns) // left by an interrupted run
	if out, err := netns.Output("ip", "netns", "add", ns); err != nil {
		return 0, 0, 0, fmt.Errorf("ip netns add %s: %v %s", ns, err, out)
	}
	defer func() { _, _ = netns.Output("ip", "netns", "del", ns) }()
	if out, err := netns.Output("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		return 0, 0, 0, fmt.Errorf("%v %s", err, out)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addr := strings.TrimPrefix(k.apiURL, "https://")
	if err := netns.Forward(fctx, ns, addr, addr); err != nil {
		return 0, 0, 0, err
	}
	// The metrics port is in kube-proxy's namespace: dial it from there.
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(ns, network, addr, 5*time.Second)
		},
	}}
	proc, err := k.start(ns, name)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { proc.Stop(5 * time.Second) }()
	start := time.Now()
	err = proc.WaitReady(ctx, 10*time.Minute, func(context.Context) error {
		out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "map", "ip", "kube-proxy", "service-ips").Output()
		if err != nil {
			return err
		}
		if got := strings.Count(string(out), "goto service-"); got < want {
			return fmt.Errorf("%d of %d service IPs programmed", got, want)
		}
		return nil
	})
	if err != nil {
		return 0, 0, 0, err
	}
	fmt.Printf("%s: kube-proxy programmed %d service IPs in %s (%s)\n", name, want, time.Since(start).Round(time.Millisecond), syncs(client))
	// Let informer resyncs and the first syncs' garbage settle.
	time.Sleep(5 * time.Second)
	if heap, err = liveHeap(client, name); err != nil {
		return 0, 0, 0, err
	}
	rss = vmRSS(proc.Pid())
	if !restart {
		return heap, rss, 0, nil
	}
	proc.Stop(5 * time.Second)
	if proc, err = k.start(ns, name+"-restarted"); err != nil {
		return 0, 0, 0, err
	}
	start = time.Now()
	err = proc.WaitReady(ctx, 10*time.Minute, func(context.Context) error {
		if n, err := metric(client, "kubeproxy_sync_proxy_rules_duration_seconds_count"); err != nil || n < 1 {
			return fmt.Errorf("no sync done yet (%v)", err)
		}
		return nil
	})
	if err != nil {
		return 0, 0, 0, err
	}
	restarted = time.Since(start)
	fmt.Printf("%s: restarted kube-proxy's first full sync done in %s (%s)\n", name, restarted.Round(time.Millisecond), syncs(client))
	return heap, rss, restarted, nil
}

func (k kubeProxyRun) start(ns, name string) (*process.Process, error) {
	return process.Start(process.Options{
		Name: "kube-proxy " + name, Netns: ns, Log: filepath.Join(k.dir, "kube-proxy-"+name+".log"),
		Argv: []string{k.binary, "--kubeconfig=" + k.kubeconfig, "--hostname-override=" + nodeName, "--proxy-mode=nftables",
			"--feature-gates=MultiClusterServices=true", "--cluster-cidr=10.128.0.0/14",
			"--conntrack-max-per-core=0", "--conntrack-min=0", "--profiling=true",
			"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256", "--v=1"},
	})
}

// liveHeap is kube-proxy's heap after a forced GC, its profile saved with
// -profiles.
func liveHeap(client *http.Client, name string) (uint64, error) {
	resp, err := client.Get("http://127.0.0.1:10249/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	if *profiles != "" {
		resp, err := client.Get("http://127.0.0.1:10249/debug/pprof/heap?gc=1")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(*profiles, name+".heap"))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			return 0, err
		}
	}
	found := regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`).FindStringSubmatch(string(b))
	if found == nil {
		return 0, fmt.Errorf("no HeapAlloc in kube-proxy's heap profile")
	}
	return strconv.ParseUint(found[1], 10, 64)
}

// metric reads a sample of kube-proxy's metrics, the sum over its labels
// (the IP families' sync metrics).
func metric(client *http.Client, name string) (float64, error) {
	resp, err := client.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	sum, found := 0.0, false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum, found = sum+v, true
		}
	}
	if !found {
		return 0, fmt.Errorf("no %s", name)
	}
	return sum, nil
}

// syncs says how many syncs kube-proxy has made so far and the time they
// took, full and partial: where a start's time went, beside the listing
// before its first sync.
func syncs(client *http.Client) string {
	var v [4]float64
	for i, name := range []string{
		"kubeproxy_sync_proxy_rules_duration_seconds_count", "kubeproxy_sync_proxy_rules_duration_seconds_sum",
		"kubeproxy_sync_full_proxy_rules_duration_seconds_count", "kubeproxy_sync_full_proxy_rules_duration_seconds_sum",
	} {
		var err error
		if v[i], err = metric(client, name); err != nil {
			return err.Error()
		}
	}
	return fmt.Sprintf("%.0f syncs in %.1f s, of which %.0f full in %.1f s", v[0], v[1], v[2], v[3])
}

func vmRSS(pid int) uint64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

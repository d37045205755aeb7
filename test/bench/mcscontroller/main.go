// Command mcscontroller benchmarks the built mcs-controller against real
// apiservers (run it through hack/bench-controller.sh): N member clusters
// each export the same E Services with P endpoints each; it reports the time
// from controller start to every import and slice being present in every
// member, the latency from an endpoint change in one member to the imported
// slice being updated in every member (p50, p99), and the controller's peak
// RSS.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crds"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	mcscontroller "github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

const namespace = "bench"

var (
	clusters   = flag.Int("clusters", 3, "member clusters")
	exports    = flag.Int("exports", 1000, "exported Services per cluster (the same names everywhere)")
	perService = flag.Int("endpoints", 10, "endpoints per Service per cluster")
	changes    = flag.Int("changes", 200, "endpoint changes whose propagation latency is measured")
	controller = flag.String("controller", "_output/bin/mcs-controller", "mcs-controller binary")
	workDir    = flag.String("dir", "", "working directory (default: a temporary one)")
	limitPhase = flag.Bool("limit", true, "measure the limit before and after convergence: the same writes the controller makes into each member (imports, their status, one slice per source cluster, an export status), made straight with the controller's client settings, so that convergence is reported as a ratio to what the apiservers accept")
	apiQPS     = flag.Int("kube-api-qps", 500, "the controller's --kube-api-qps, and the limit phase's client QPS per member")
	workers    = flag.Int("workers", 8, "the controller's --workers, and the limit phase's writers per member")
	profiles   = flag.String("profiles", "", "directory to save the controller's heap profile in, taken at convergence (go tool pprof -sample_index=inuse_space); also serves the apiservers' /debug/pprof")
	timeout    = flag.Duration("timeout", 10*time.Minute, "how long convergence may take before the run fails (its working directory, with the controller's log, is then kept)")
	verbosity  = flag.Int("controller-v", 0, "the controller's -v (2 logs every failed write into a member)")
	derived    = flag.String("derived", "", "cluster IDs served in derived mode (the controller's --derived-members), e.g. cluster-c: each member's figures are reported, so native and derived members are compared in one run")
)

type member struct {
	id string
	// index is the second octet of the member's endpoint addresses.
	index int
	cfg   *rest.Config
	kube  kubernetes.Interface
	mcs   mcsclientset.Interface
	// observer sees the imported slices and the imports, for convergence
	// and the latency probe.
	observer
	// converged is when the member first held every import (with its IPs)
	// and slice; writes are the write requests its apiserver served from
	// controller start until then.
	converged time.Duration
	writes    int
	latencies []time.Duration
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	// A run that does not converge keeps its directory: the controller's
	// log says why.
	keep := false
	dir := *workDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "bench-mcs-controller-"); err != nil {
			return err
		}
		defer func() {
			if !keep {
				os.RemoveAll(dir)
			}
		}()
	}
	etcd, err := framework.StartEtcd(ctx, filepath.Join(dir, "etcd"))
	if err != nil {
		return err
	}
	defer etcd.Stop()
	serverPids := []int{etcd.Pid()}

	var members []*member
	var fcs []*framework.Cluster
	apiserverArgs := []string{"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"}
	if *profiles != "" {
		// Where the apiservers' CPU goes, phase by phase: kubectl get --raw
		// '/debug/pprof/profile?seconds=20' with a member's admin.kubeconfig.
		apiserverArgs = append(apiserverArgs, "--profiling=true")
	}
	for i := 0; i < *clusters; i++ {
		id := clusterID(i)
		c, err := framework.StartCluster(ctx, framework.ClusterOptions{Name: id, Etcd: etcd, Dir: filepath.Join(dir, id),
			ExtraArgs: apiserverArgs})
		if err != nil {
			return err
		}
		defer c.Stop()
		fcs = append(fcs, c)
		serverPids = append(serverPids, c.Pid())
		cfg := c.RESTConfig()
		cfg.QPS, cfg.Burst = 2000, 4000
		// Built-in types as protobuf, as the controller reads them, so
		// that the benchmark's own watches cost the apiservers little.
		proto := rest.CopyConfig(cfg)
		proto.ContentType = "application/vnd.kubernetes.protobuf"
		m := &member{id: id, index: i + 1, cfg: cfg, kube: kubernetes.NewForConfigOrDie(proto), mcs: mcsclientset.NewForConfigOrDie(cfg)}
		if err := prepare(ctx, m); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		members = append(members, m)
	}
	kubeconfig := filepath.Join(dir, "clusterset.kubeconfig")
	if err := framework.WriteClusterSetKubeconfig(kubeconfig, fcs...); err != nil {
		return err
	}

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(members))
	for _, m := range members {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- populate(ctx, m) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	fmt.Printf("populated %d clusters x %d exports x %d endpoints in %s\n", *clusters, *exports, *perService, time.Since(start).Round(time.Millisecond))

	var limit time.Duration
	if *limitPhase {
		settle(serverPids)
		var limitCPU float64
		if limit, limitCPU, err = measureLimit(ctx, members, serverPids); err != nil {
			return fmt.Errorf("limit: %w", err)
		}
		fmt.Printf("limit: %s for the controller's writes made straight into every member (%d clients at %d QPS, %d writers each); apiservers and etcd used %.1f s CPU\n",
			limit.Round(time.Millisecond), len(members), *apiQPS, *workers, limitCPU)
	}

	stop := make(chan struct{})
	defer close(stop)
	for _, m := range members {
		m.observer = observe(m, namespace, mcsproxy.DefaultManagedBy, stop)
	}

	logPath := filepath.Join(dir, "mcs-controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	metricsPort, err := framework.FreePort()
	if err != nil {
		return err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--healthz-bind-address=0",
		fmt.Sprintf("--kube-api-qps=%d", *apiQPS), fmt.Sprintf("--kube-api-burst=%d", 2**apiQPS), fmt.Sprintf("--workers=%d", *workers)}
	if *verbosity > 0 {
		args = append(args, fmt.Sprintf("-v=%d", *verbosity))
	}
	if *derived != "" {
		args = append(args, "--derived-members="+*derived)
	}
	if *profiles != "" {
		args = append(args, "--profiling")
	}
	writesBefore := map[string]int{}
	for _, m := range members {
		if writesBefore[m.id], err = writeRequests(ctx, m); err != nil {
			return err
		}
	}
	_, byBefore, err := writeRequestsBy(ctx, members[0])
	if err != nil {
		return err
	}
	cmd := exec.Command(*controller, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The limit's deletes are digested first: each phase carries its own
	// work only.
	settle(serverPids)
	serverCPU := cpuSeconds(serverPids...)
	start = time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	peak := &peakRSS{pid: cmd.Process.Pid}
	go peak.watch(stop)

	wantSlices := *exports * *clusters
	var progress milestones
	for {
		done := true
		var state []string
		var got int
		for _, m := range members {
			ni, n := m.observer.counts()
			got += ni + n
			state = append(state, fmt.Sprintf("%s: %d/%d imports %d/%d slices", m.id, ni, *exports, n, wantSlices))
			if ni == *exports && n == wantSlices && m.converged == 0 {
				m.converged = time.Since(start)
				w, err := writeRequests(ctx, m)
				if err != nil {
					return err
				}
				m.writes = w - writesBefore[m.id]
			}
			done = done && m.converged > 0
		}
		progress.record(got, len(members)*(*exports+wantSlices), time.Since(start))
		if done {
			break
		}
		if time.Since(start) > *timeout {
			keep = true
			return fmt.Errorf("no convergence after %s: %s (log %s)", *timeout, strings.Join(state, "; "), logPath)
		}
		time.Sleep(250 * time.Millisecond)
	}
	convergence := time.Since(start)
	if *profiles != "" {
		if err := saveProfile(strings.TrimSuffix(metricsURL, "/metrics")+"/debug/pprof/heap", filepath.Join(*profiles, fmt.Sprintf("heap-%d-clusters.pb.gz", len(members)))); err != nil {
			return err
		}
	}
	if _, byAfter, err := writeRequestsBy(ctx, members[0]); err == nil {
		var parts []string
		for k, n := range byAfter {
			if d := n - byBefore[k]; d > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, d))
			}
		}
		slices.Sort(parts)
		fmt.Printf("requests to %s until convergence: %s\n", members[0].id, strings.Join(parts, ", "))
	}
	fmt.Printf("convergence: %s from controller start to %d imports and %d slices in each of %d members (%s)\n",
		convergence.Round(time.Millisecond), *exports, wantSlices, len(members), progress)
	// Where the time went: CPU the controller used against the apiservers
	// and etcd, on a machine they share.
	controllerCPU := cpuSeconds(cmd.Process.Pid)
	fmt.Printf("CPU during convergence: controller %.1f s, apiservers and etcd %.1f s (%d cores)\n",
		controllerCPU, cpuSeconds(serverPids...)-serverCPU, runtime.NumCPU())
	latencies, err := measureLatency(ctx, members)
	if err != nil {
		return err
	}
	slices.Sort(latencies)
	p := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1))] }
	fmt.Printf("endpoint change -> slice updated in every member (%d changes): p50 %s  p99 %s  max %s\n",
		len(latencies), p(0.50).Round(time.Millisecond), p(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	for _, m := range members {
		mode := "native"
		if slices.Contains(strings.Split(*derived, ","), m.id) {
			mode = "derived"
		}
		slices.Sort(m.latencies)
		q := func(f float64) time.Duration { return m.latencies[int(f*float64(len(m.latencies)-1))] }
		fmt.Printf("  %s (%s): converged in %s, %d write requests (%.2f per export), propagation p50 %s p99 %s\n",
			m.id, mode, m.converged.Round(time.Millisecond), m.writes, float64(m.writes)/float64(*exports),
			q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond))
	}
	fmt.Printf("controller peak RSS: %d MB\n", peak.get()/1024)
	printSyncCounts(metricsURL)
	if *limitPhase {
		// The limit again, the controller stopped: the apiservers hold
		// more history after each phase (watch cache, etcd), which costs
		// them more CPU per write, so the limit before convergence favours
		// the limit and the one after favours the controller. The ratio is
		// to their mean.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		settle(serverPids)
		after, afterCPU, err := measureLimit(ctx, members, serverPids)
		if err != nil {
			return fmt.Errorf("limit after convergence: %w", err)
		}
		fmt.Printf("limit after convergence: %s; apiservers and etcd used %.1f s CPU\n", after.Round(time.Millisecond), afterCPU)
		mean := (limit + after) / 2
		fmt.Printf("convergence / limit: %.2f (target <= 1.25; against the limit before only: %.2f, after only: %.2f)\n",
			convergence.Seconds()/mean.Seconds(), convergence.Seconds()/limit.Seconds(), convergence.Seconds()/after.Seconds())
	}
	fmt.Printf("targets: convergence < 60s: %v; p99 < 2s: %v; RSS < 500MB: %v\n",
		convergence < time.Minute, p(0.99) < 2*time.Second, peak.get()/1024 < 500)
	return nil
}

// prepare installs the CRDs, the cluster ID and the namespace.
func prepare(ctx context.Context, m *member) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(m.cfg), all...); err != nil {
		return err
	}
	prop := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": aboutv1alpha1.SchemeGroupVersion.String(), "kind": "ClusterProperty",
		"metadata": map[string]any{"name": aboutv1alpha1.ClusterIDProperty},
		"spec":     map[string]any{"value": m.id},
	}}
	dyn := dynamic.NewForConfigOrDie(m.cfg)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := dyn.Resource(aboutv1alpha1.Resource).Create(ctx, prop, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
	_, err = m.kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	return err
}

func serviceName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// clusterID names the i-th member as spreadsheets name columns: cluster-a
// to cluster-z, then cluster-aa, cluster-ab, ...
func clusterID(i int) string {
	name := ""
	for i++; i > 0; i = (i - 1) / 26 {
		name = string(rune('a'+(i-1)%26)) + name
	}
	return "cluster-" + name
}

func localSlice(m *member, i int, generation int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(i) + "-local", Namespace: namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: serviceName(i), discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for e := 0; e < *perService; e++ {
		// 10.<cluster>.<service/256>.<...>: unique per cluster and service;
		// the generation moves the first endpoint, which is the change
		// whose propagation is measured.
		host := (i%16)*16 + e + 1
		if e == 0 {
			host = 200 + generation%50
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", m.index, i/16, host)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			// As the EndpointSlice controller writes it: the controller
			// mirrors only endpoints of Pods from a member whose nodes
			// say nothing of its pod ranges.
			TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: fmt.Sprintf("%s-%d", serviceName(i), e)},
		})
	}
	return s
}

// populate creates the Services, their slices and their exports.
func populate(ctx context.Context, m *member) error {
	var g errgroup.Group
	g.SetLimit(32)
	for i := 0; i < *exports; i++ {
		g.Go(func() error {
			svc, err := m.kube.CoreV1().Services(namespace).Create(ctx, &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: serviceName(i)},
				Spec:       v1.ServiceSpec{Selector: map[string]string{"app": serviceName(i)}, Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			// Owned by its Service, as the EndpointSlice controller's are.
			s := localSlice(m, i, 0)
			s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(svc, v1.SchemeGroupVersion.WithKind("Service"))}
			if _, err := m.kube.DiscoveryV1().EndpointSlices(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err = m.mcs.MulticlusterV1beta1().ServiceExports(namespace).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: serviceName(i)}}, metav1.CreateOptions{})
			return err
		})
	}
	return g.Wait()
}

// measureLatency changes one endpoint of a random Service in a random
// member at a time and times until every member's imported slice shows it.
func measureLatency(ctx context.Context, members []*member) ([]time.Duration, error) {
	rng := rand.New(rand.NewSource(1))
	var out []time.Duration
	for g := 1; g <= *changes; g++ {
		m := members[rng.Intn(len(members))]
		i := rng.Intn(*exports)
		s := localSlice(m, i, g)
		want := s.Endpoints[0].Addresses[0]
		cur, err := m.kube.DiscoveryV1().EndpointSlices(namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		s.ResourceVersion, s.OwnerReferences = cur.ResourceVersion, cur.OwnerReferences
		if slices.ContainsFunc(cur.Endpoints, func(e discoveryv1.Endpoint) bool { return e.Addresses[0] == want }) {
			continue
		}
		start := time.Now()
		if _, err := m.kube.DiscoveryV1().EndpointSlices(namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for {
			all := true
			for _, target := range members {
				if seen[target.id] {
					continue
				}
				if !hasAddress(target, serviceName(i), m.id, want) {
					all = false
					continue
				}
				seen[target.id] = true
				target.latencies = append(target.latencies, time.Since(start))
			}
			if all {
				break
			}
			if time.Since(start) > time.Minute {
				return nil, fmt.Errorf("change %d (%s in %s) not propagated after a minute", g, serviceName(i), m.id)
			}
			time.Sleep(2 * time.Millisecond)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func hasAddress(m *member, service, source, addr string) bool {
	for _, o := range m.observer.slices.List() {
		s := o.(*discoveryv1.EndpointSlice)
		if s.Labels[mcsv1beta1.LabelServiceName] != service || s.Labels[mcsv1beta1.LabelSourceCluster] != source {
			continue
		}
		for _, e := range s.Endpoints {
			if slices.Contains(e.Addresses, addr) {
				return true
			}
		}
	}
	return false
}

// peakRSS samples a process's high-water RSS (VmHWM) until stopped.
type peakRSS struct {
	pid int
	mu  sync.Mutex
	kb  int
}

func (p *peakRSS) watch(stop <-chan struct{}) {
	for {
		p.sample()
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *peakRSS) sample() {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb int
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			p.mu.Lock()
			if kb > p.kb {
				p.kb = kb
			}
			p.mu.Unlock()
		}
	}
}

func (p *peakRSS) get() int {
	p.sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kb
}

// printSyncCounts prints how many syncs the controller ran and how many
// failed (a write lost to a stale cache is retried and counted here).
func printSyncCounts(url string) {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Println("metrics:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "mcs_controller_export_sync_duration_seconds_count") || strings.HasPrefix(line, "mcs_controller_member_sync_duration_seconds_count") {
			fmt.Println("  ", line)
		}
	}
}

// writeRequests returns how many create, update, patch and delete requests
// m's apiserver has served (apiserver_request_total).
func writeRequests(ctx context.Context, m *member) (int, error) {
	total, _, err := writeRequestsBy(ctx, m)
	return total, err
}

// writeRequestsBy also returns the requests of every verb (reads too) by
// verb and resource.
func writeRequestsBy(ctx context.Context, m *member) (int, map[string]int, error) {
	raw, err := m.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, nil, err
	}
	by := map[string]int{}
	label := func(labels, name string) string {
		_, rest, ok := strings.Cut(labels, name+`="`)
		if !ok {
			return ""
		}
		v, _, _ := strings.Cut(rest, `"`)
		return v
	}
	total := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		write := strings.Contains(labels, `verb="POST"`) || strings.Contains(labels, `verb="PUT"`) ||
			strings.Contains(labels, `verb="PATCH"`) || strings.Contains(labels, `verb="DELETE"`)
		var n float64
		if _, err := fmt.Sscan(value, &n); err == nil {
			if write {
				total += int(n)
			}
			key := label(labels, "verb") + " " + label(labels, "resource")
			if sub := label(labels, "subresource"); sub != "" {
				key += "/" + sub
			}
			by[key] += int(n)
		}
	}
	return total, by, nil
}

// measureLimit makes, straight into every member at once, the writes the
// controller makes to converge, with the same objects (per name: the
// import, its status, one slice per source cluster owned by the import,
// the export's status; the same fields, conditions and labels), with the
// controller's client rate limits and as many writers as it has workers,
// and returns the time the slowest member took and the CPU the apiservers
// and etcd (serverPids) used meanwhile. The objects go into their own
// namespace under another manager, and are deleted before the controller
// starts.
func measureLimit(ctx context.Context, members []*member, serverPids []int) (time.Duration, float64, error) {
	const ns = "limit"
	// The limit's writes are watched as the controller's are, so that
	// both phases carry the same cost of being observed.
	stop := make(chan struct{})
	defer close(stop)
	observers := make([]observer, len(members))
	for i, m := range members {
		if _, err := m.kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, 0, err
		}
		observers[i] = observe(m, ns, "limit", stop)
	}
	// The exports whose status is written exist before, as populate's do
	// before the controller starts.
	var pre errgroup.Group
	pre.SetLimit(32)
	exportsOf := make([][]*mcsv1beta1.ServiceExport, len(members))
	for j, m := range members {
		exportsOf[j] = make([]*mcsv1beta1.ServiceExport, *exports)
		for i := 0; i < *exports; i++ {
			pre.Go(func() (err error) {
				exportsOf[j][i], err = m.mcs.MulticlusterV1beta1().ServiceExports(ns).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: serviceName(i)}}, metav1.CreateOptions{})
				return err
			})
		}
	}
	if err := pre.Wait(); err != nil {
		return 0, 0, err
	}
	cpuBefore := cpuSeconds(serverPids...)
	start := time.Now()
	// Done when every member's watchers have seen every write, as
	// convergence is.
	seen := make(chan milestones, 1)
	go func() {
		var progress milestones
		defer func() { seen <- progress }()
		want := len(members) * (*exports + *exports**clusters)
		for {
			got := 0
			for _, o := range observers {
				ni, n := o.counts()
				got += ni + n
			}
			progress.record(got, want, time.Since(start))
			if got == want || ctx.Err() != nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	var g errgroup.Group
	for j, m := range members {
		cfg := rest.CopyConfig(m.cfg)
		cfg.QPS, cfg.Burst = float32(*apiQPS), 2**apiQPS
		mcsc := mcsclientset.NewForConfigOrDie(cfg)
		// As the controller's clients: built-in types as protobuf.
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		kube := kubernetes.NewForConfigOrDie(cfg)
		g.Go(func() error {
			var w errgroup.Group
			w.SetLimit(*workers)
			for i := 0; i < *exports; i++ {
				w.Go(func() error {
					// The fields the controller's import carries.
					si := &mcsv1beta1.ServiceImport{
						ObjectMeta: metav1.ObjectMeta{Name: serviceName(i), Namespace: ns, Labels: map[string]string{mcsproxy.LabelImportManagedBy: "limit"}},
						Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{fmt.Sprintf("10.251.%d.%d", i/256, i%256)},
							IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, SessionAffinity: v1.ServiceAffinityNone, InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyCluster),
							Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
					}
					si, err := mcsc.MulticlusterV1beta1().ServiceImports(ns).Create(ctx, si, metav1.CreateOptions{})
					if err != nil {
						return err
					}
					owner := []metav1.OwnerReference{{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: mcsv1beta1.ServiceImportKindName, Name: si.Name, UID: si.UID}}
					for _, source := range members {
						s := localSlice(source, i, 0)
						s.Name, s.Namespace, s.OwnerReferences = serviceName(i)+"-"+source.id, ns, owner
						s.Labels = map[string]string{mcsv1beta1.LabelServiceName: serviceName(i), mcsv1beta1.LabelSourceCluster: source.id, discoveryv1.LabelManagedBy: "limit"}
						for e := range s.Endpoints {
							// The controller's slices name no Pod.
							s.Endpoints[e].TargetRef = nil
						}
						if _, err := kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
							return err
						}
					}
					for _, c := range members {
						si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: c.id})
					}
					si.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
					si.Status.Conditions = conditions(mcscontroller.HealthyImportConditions(), si.Generation)
					if _, err = mcsc.MulticlusterV1beta1().ServiceImports(ns).UpdateStatus(ctx, si, metav1.UpdateOptions{}); err != nil {
						return err
					}
					// The controller reads the export from its cache.
					se := exportsOf[j][i].DeepCopy()
					se.Status.Conditions = conditions(export.ExportConditions(export.Validate(&v1.Service{}), nil, ""), se.Generation)
					_, err = mcsc.MulticlusterV1beta1().ServiceExports(ns).UpdateStatus(ctx, se, metav1.UpdateOptions{})
					return err
				})
			}
			return w.Wait()
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	progress := <-seen
	limit := time.Since(start)
	fmt.Printf("limit progress: %s\n", progress)
	cpu := cpuSeconds(serverPids...) - cpuBefore
	for _, m := range members {
		if err := m.kube.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return 0, 0, err
		}
		if err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return 0, 0, err
		}
		if err := m.mcs.MulticlusterV1beta1().ServiceExports(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return 0, 0, err
		}
	}
	return limit, cpu, nil
}

// conditions stamps conds as written now for generation.
func conditions(conds []metav1.Condition, generation int64) []metav1.Condition {
	now := metav1.Now()
	for i := range conds {
		conds[i].ObservedGeneration, conds[i].LastTransitionTime = generation, now
	}
	return conds
}

// milestones are when a phase's watchers first saw a tenth, half and nine
// tenths of every object: whether a phase is slower throughout, at its
// start or at its end.
type milestones [3]time.Duration

func (ms *milestones) record(got, want int, at time.Duration) {
	for i, frac := range []float64{0.1, 0.5, 0.9} {
		if ms[i] == 0 && float64(got) >= frac*float64(want) {
			ms[i] = at
		}
	}
}

func (ms milestones) String() string {
	return fmt.Sprintf("10%% at %s, 50%% at %s, 90%% at %s", ms[0].Round(100*time.Millisecond), ms[1].Round(100*time.Millisecond), ms[2].Round(100*time.Millisecond))
}

// settle waits until the apiservers and etcd are idle (under a tenth of a
// core for half a second; at most 20 s), so that a phase does not start
// while they still digest the writes or deletes before it.
func settle(pids []int) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		before := cpuSeconds(pids...)
		time.Sleep(500 * time.Millisecond)
		if cpuSeconds(pids...)-before < 0.05 {
			return
		}
	}
}

// cpuSeconds returns the user and system CPU time the processes used.
func cpuSeconds(pids ...int) float64 {
	ticks := 0.0
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces): utime is the
		// 14th field of the line, stime the 15th.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		var u, s float64
		fmt.Sscan(fields[11], &u)
		fmt.Sscan(fields[12], &s)
		ticks += u + s
	}
	return ticks / 100 // USER_HZ
}

// saveProfile saves what url serves into path.
func saveProfile(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	fmt.Printf("heap profile at convergence: %s\n", path)
	return err
}

// observer watches, in one member's namespace, the MCS EndpointSlices one
// manager wrote and the ServiceImports, as the benchmark sees them.
type observer struct {
	slices  cache.Indexer
	imports cache.Indexer
}

func observe(m *member, ns, managedBy string, stop <-chan struct{}) observer {
	f := informers.NewSharedInformerFactoryWithOptions(m.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelManagedBy + "=" + managedBy
		}))
	inf := f.Discovery().V1().EndpointSlices().Informer()
	f.Start(stop)
	// Imports are watched too: listing them every poll would load the
	// apiservers the controller is measured against.
	mf := mcsinformers.NewSharedInformerFactoryWithOptions(m.mcs, 0, mcsinformers.WithNamespace(ns))
	imports := mf.Multicluster().V1beta1().ServiceImports().Informer()
	mf.Start(stop)
	cache.WaitForCacheSync(stop, inf.HasSynced, imports.HasSynced)
	return observer{slices: inf.GetIndexer(), imports: imports.GetIndexer()}
}

// counts returns the imports seen with their clusterset IPs and the
// slices seen with every endpoint.
func (o observer) counts() (imports, slices int) {
	for _, obj := range o.slices.List() {
		if len(obj.(*discoveryv1.EndpointSlice).Endpoints) == *perService {
			slices++
		}
	}
	for _, obj := range o.imports.List() {
		if len(obj.(*mcsv1beta1.ServiceImport).Spec.IPs) > 0 {
			imports++
		}
	}
	return imports, slices
}

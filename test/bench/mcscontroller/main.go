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
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/bench/measure"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

const namespace = "bench"

var (
	clusters     = flag.Int("clusters", 3, "member clusters")
	exports      = flag.Int("exports", 1000, "exported Services per cluster (the same names everywhere)")
	perService   = flag.Int("endpoints", 10, "endpoints per Service per cluster")
	changes      = flag.Int("changes", 200, "endpoint changes whose propagation latency is measured")
	controller   = flag.String("controller", "_output/bin/mcs-controller", "mcs-controller binary")
	workDir      = flag.String("dir", "", "working directory (default: a temporary one)")
	limitPhase   = flag.Bool("limit", true, "measure the limit before and after convergence: the same writes the controller makes into each member (imports, their status, one slice per source cluster, an export status), made straight with the controller's client settings, so that convergence is reported as a ratio to what the apiservers accept")
	apiQPS       = flag.Int("kube-api-qps", 500, "the controller's --kube-api-qps, and the limit phase's client QPS per member")
	workers      = flag.Int("workers", 8, "the controller's --workers, and the limit phase's writers per member")
	profiles     = flag.String("profiles", "", "directory to save the controller's heap profile in, taken at convergence (go tool pprof -sample_index=inuse_space); also serves the apiservers' /debug/pprof")
	timeout      = flag.Duration("timeout", 10*time.Minute, "how long convergence may take before the run fails (its working directory, with the controller's log, is then kept)")
	verbosity    = flag.Int("controller-v", 0, "the controller's -v (2 logs every failed write into a member)")
	limitAfter   = flag.Bool("limit-after", true, "measure the limit after convergence too (with --limit); it takes longest, the apiservers then holding every slice twice")
	restart      = flag.Duration("restart", 20*time.Second, "after the latency probe, restart the controller and count the writes it makes from its start until this long after it is ready (0: no restart)")
	leaderChange = flag.Bool("leader-change", false, "after the restart, run two replicas electing a leader and hand leadership over twice (the leader stopped, then killed), counting each takeover's time and writes")
	away         = flag.Duration("away", 0, "after that, take the last member's apiserver away this long (more than the controller's 40 s endpoint TTL), change --away-changes endpoints meanwhile, and count what its return costs (0: not)")
	awayChanges  = flag.Int("away-changes", 20, "endpoints changed while a member is away (--away)")
	derived      = flag.String("derived", "", "cluster IDs served in derived mode (the controller's --derived-members), e.g. cluster-c: each member's figures are reported, so native and derived members are compared in one run")
	modes        = flag.String("mode", "push", "push: the mcs-controller writes into every member; pull: one more apiserver, the hub, with the planner, and a member agent in each member (docs/architecture.md, \"Pull mode\"); push,pull: both, each on apiservers of its own, one after the other, then side by side. The limit, restart, leader change and away phases are push mode's")
)

type member struct {
	id string
	// index is the second octet of the member's endpoint addresses.
	index int
	cfg   *rest.Config
	// kubeconfig is the member's admin kubeconfig.
	kubeconfig string
	kube       kubernetes.Interface
	mcs        mcsclientset.Interface
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
	var results []*result
	for _, mode := range strings.Split(*modes, ",") {
		if mode != "push" && mode != "pull" {
			fmt.Fprintf(os.Stderr, "bench: --mode: %q is neither push nor pull\n", mode)
			os.Exit(2)
		}
		fmt.Printf("== %s mode\n", mode)
		r, err := run(mode)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s mode: %v\n", mode, err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	if len(results) > 1 {
		printSideBySide(results)
	}
}

// result is what one mode's run is compared by.
type result struct {
	mode string
	// convergence is from the processes' start to every import and slice
	// in every member.
	convergence time.Duration
	// cpu is what our processes used until convergence, servers what
	// the apiservers and etcd used.
	cpu, servers float64
	// biggest is the process of ours with the highest peak RSS.
	biggest   string
	biggestMB int
	// writes are the write requests every apiserver served until
	// convergence (each member's until its own), hubWrites the hub's
	// share.
	writes, hubWrites int
	p50, p99          time.Duration
}

func run(mode string) (*result, error) {
	ctx := context.Background()
	// A run that does not converge keeps its directory: the processes'
	// log says why.
	keep := false
	dir := *workDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "bench-mcs-controller-"); err != nil {
			return nil, err
		}
		defer func() {
			if !keep {
				os.RemoveAll(dir)
			}
		}()
	} else {
		dir = filepath.Join(dir, mode)
	}
	etcd, err := framework.StartEtcd(ctx, filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, err
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
			return nil, err
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
		m := &member{id: id, index: i + 1, cfg: cfg, kubeconfig: c.Kubeconfig(), kube: kubernetes.NewForConfigOrDie(proto), mcs: mcsclientset.NewForConfigOrDie(cfg)}
		if err := prepare(ctx, m); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		members = append(members, m)
	}
	kubeconfig := filepath.Join(dir, "clusterset.kubeconfig")
	if err := framework.WriteClusterSetKubeconfig(kubeconfig, fcs...); err != nil {
		return nil, err
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
			return nil, err
		}
	}
	fmt.Printf("populated %d clusters x %d exports x %d endpoints in %s\n", *clusters, *exports, *perService, time.Since(start).Round(time.Millisecond))

	var limit time.Duration
	limits := *limitPhase && mode == "push"
	if limits {
		settle(serverPids)
		var limitCPU float64
		if limit, limitCPU, err = measureLimit(ctx, members, serverPids); err != nil {
			return nil, fmt.Errorf("limit: %w", err)
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
		return nil, err
	}
	defer logFile.Close()
	metricsPort, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	// What every process of ours shares: the client settings and workers.
	shared := []string{"--leader-elect=false", fmt.Sprintf("--kube-api-qps=%d", *apiQPS), fmt.Sprintf("--kube-api-burst=%d", 2**apiQPS), fmt.Sprintf("--workers=%d", *workers)}
	if *verbosity > 0 {
		shared = append(shared, fmt.Sprintf("-v=%d", *verbosity))
	}
	serving := []string{fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--healthz-bind-address=0"}
	args := append(append([]string{"--kubeconfig=" + kubeconfig}, serving...), shared...)
	if *derived != "" {
		args = append(args, "--derived-members="+*derived)
	}
	if *profiles != "" {
		args = append(args, "--profiling")
	}
	writesBefore := map[string]int{}
	for _, m := range members {
		if writesBefore[m.id], err = writeRequests(ctx, m); err != nil {
			return nil, err
		}
	}
	_, byBefore, err := writeRequestsBy(ctx, members[0])
	if err != nil {
		return nil, err
	}
	var hub *framework.Cluster
	hubWritesBefore := 0
	if mode == "pull" {
		// The hub is started and laid out before the clock starts: what
		// is measured is the processes' work.
		if hub, err = startPullHub(ctx, dir, etcd, members, apiserverArgs); err != nil {
			return nil, err
		}
		defer hub.Stop()
		serverPids = append(serverPids, hub.Pid())
		if hubWritesBefore, _, err = measure.WriteRequestsBy(ctx, hub.Client()); err != nil {
			return nil, err
		}
	}
	// The limit's deletes are digested first: each phase carries its own
	// work only.
	settle(serverPids)
	serverCPU := cpuSeconds(serverPids...)
	var ours *fleet
	start = time.Now()
	switch mode {
	case "push":
		ours = newFleet()
		if err := ours.start("mcs-controller", *controller, args, logFile); err != nil {
			return nil, err
		}
	case "pull":
		// The planner serves the metrics printed below; the agents, as
		// many as the members, serve nothing here.
		plannerArgs := append(append([]string{"--secure-port=0"}, serving...), shared...)
		agentArgs := append([]string{"--metrics-bind-address=0", "--healthz-bind-address=0", "--secure-port=0"}, shared...)
		if ours, err = startPullMode(hub, members, plannerArgs, agentArgs, logFile); err != nil {
			return nil, err
		}
	}
	defer ours.kill()

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
					return nil, err
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
			return nil, fmt.Errorf("no convergence after %s: %s (log %s)", *timeout, strings.Join(state, "; "), logPath)
		}
		time.Sleep(250 * time.Millisecond)
	}
	convergence := time.Since(start)
	res := &result{mode: mode, convergence: convergence, cpu: ours.cpu(), servers: cpuSeconds(serverPids...) - serverCPU}
	for _, m := range members {
		res.writes += m.writes
	}
	if hub != nil {
		w, _, err := measure.WriteRequestsBy(ctx, hub.Client())
		if err != nil {
			return nil, err
		}
		res.hubWrites = w - hubWritesBefore
		res.writes += res.hubWrites
	}
	if *profiles != "" {
		if err := saveProfile(strings.TrimSuffix(metricsURL, "/metrics")+"/debug/pprof/heap", filepath.Join(*profiles, fmt.Sprintf("heap-%s-%d-clusters.pb.gz", mode, len(members)))); err != nil {
			return nil, err
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
	fmt.Printf("convergence: %s from start to %d imports and %d slices in each of %d members (%s)\n",
		convergence.Round(time.Millisecond), *exports, wantSlices, len(members), progress)
	// Where the time went: CPU our processes used against the apiservers
	// and etcd, on a machine they share.
	fmt.Printf("CPU during convergence: ours (%d processes) %.1f s, apiservers and etcd %.1f s (%d cores)\n",
		len(ours.cmds), res.cpu, res.servers, runtime.NumCPU())
	if hub != nil {
		fmt.Printf("writes until convergence: %d, of which %d into the hub\n", res.writes, res.hubWrites)
	}
	latencies, err := measureLatency(ctx, members)
	if err != nil {
		return nil, err
	}
	slices.Sort(latencies)
	p := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1))] }
	res.p50, res.p99 = p(0.50), p(0.99)
	fmt.Printf("endpoint change -> slice updated in every member (%d changes): p50 %s  p99 %s  max %s\n",
		len(latencies), p(0.50).Round(time.Millisecond), p(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	for _, m := range members {
		kind := "native"
		if slices.Contains(strings.Split(*derived, ","), m.id) {
			kind = "derived"
		}
		slices.Sort(m.latencies)
		q := func(f float64) time.Duration { return m.latencies[int(f*float64(len(m.latencies)-1))] }
		fmt.Printf("  %s (%s): converged in %s, %d write requests (%.2f per export), propagation p50 %s p99 %s\n",
			m.id, kind, m.converged.Round(time.Millisecond), m.writes, float64(m.writes)/float64(*exports),
			q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond))
	}
	res.biggest, res.biggestMB = ours.biggest()
	fmt.Printf("biggest process of ours: %s, peak RSS %d MB\n", res.biggest, res.biggestMB)
	printSyncCounts(metricsURL)
	ours.kill()
	if mode == "pull" {
		return res, nil
	}
	// The phases over the converged clusterset wait this long after each
	// event for writes it should not cause.
	settleFor := *restart
	if settleFor == 0 {
		settleFor = 20 * time.Second
	}
	if *restart > 0 {
		if err := measureRestart(ctx, members, *controller, args, logFile, *restart); err != nil {
			return nil, fmt.Errorf("restart: %w", err)
		}
	}
	if *leaderChange {
		if err := measureLeaderChange(ctx, members, *controller, args, logFile, settleFor); err != nil {
			return nil, fmt.Errorf("leader change: %w", err)
		}
	}
	if *away > 0 {
		if err := measureAway(ctx, members, fcs, *controller, args, logFile, *away, *awayChanges, settleFor); err != nil {
			return nil, fmt.Errorf("away: %w", err)
		}
	}
	if limits && !*limitAfter {
		fmt.Printf("convergence / limit before convergence: %.2f\n", convergence.Seconds()/limit.Seconds())
	}
	if limits && *limitAfter {
		// The limit again, the controller stopped: the apiservers hold
		// more history after each phase (watch cache, etcd), which costs
		// them more CPU per write, so the limit before convergence favours
		// the limit and the one after favours the controller. The ratio is
		// to their mean.
		settle(serverPids)
		after, afterCPU, err := measureLimit(ctx, members, serverPids)
		if err != nil {
			return nil, fmt.Errorf("limit after convergence: %w", err)
		}
		fmt.Printf("limit after convergence: %s; apiservers and etcd used %.1f s CPU\n", after.Round(time.Millisecond), afterCPU)
		mean := (limit + after) / 2
		fmt.Printf("convergence / limit: %.2f (target <= 1.25; against the limit before only: %.2f, after only: %.2f)\n",
			convergence.Seconds()/mean.Seconds(), convergence.Seconds()/limit.Seconds(), convergence.Seconds()/after.Seconds())
	}
	fmt.Printf("targets: convergence < 60s: %v; p99 < 2s: %v; RSS < 500MB: %v\n",
		convergence < time.Minute, p(0.99) < 2*time.Second, res.biggestMB < 500)
	return res, nil
}

// printSideBySide prints the modes' results as a table, each figure of
// pull mode also as a ratio to push mode's.
func printSideBySide(results []*result) {
	fmt.Printf("\nside by side (%d members x %d names x %d endpoints):\n", *clusters, *exports, *perService)
	fmt.Println("| mode | convergence | CPU, ours | CPU, apiservers + etcd | biggest process (peak RSS) | writes | propagation p50 / p99 |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range results {
		writes := fmt.Sprint(r.writes)
		if r.hubWrites > 0 {
			writes += fmt.Sprintf(" (hub %d)", r.hubWrites)
		}
		fmt.Printf("| %s | %s | %.1f s | %.1f s | %s (%d MB) | %s | %s / %s |\n", r.mode, r.convergence.Round(100*time.Millisecond),
			r.cpu, r.servers, r.biggest, r.biggestMB, writes, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond))
	}
}

// Command bench-pull-hub measures pull mode's hub (docs/benchmarks.md,
// "Pull mode"): one real hub apiserver, N member agents (the real
// pull.Agent, each with its own hub identity and watches; their own
// clusters are simulated in memory: fake clientsets holding their
// Services, EndpointSlices and ServiceExports), every member exporting
// the same names, and the real planner (mcs-controller planner) as a
// process. It reports the agents' publishing, the planner's convergence
// (the plan whole in the hub, and delivered to every agent's watch of the
// plan), its CPU, peak RSS and writes, the apiserver's and etcd's CPU and
// RSS, and, measured before the planner starts in the same run, the
// limit: the planner's writes made straight into the hub with its identity
// and client settings and watched as the plan is, convergence reported as a
// ratio to it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/crds"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/bench/measure"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/kindconfig"
)

var (
	members    = flag.Int("members", 250, "member clusters, each an agent with its own hub identity")
	names      = flag.Int("names", 100, "names every member exports (the same names everywhere)")
	perService = flag.Int("endpoints", 10, "endpoints per Service per member")
	planner    = flag.String("planner", "_output/bin/mcs-controller", "mcs-controller binary (its planner command)")
	apiQPS     = flag.Int("kube-api-qps", 500, "the planner's --kube-api-qps, and the limit's client QPS")
	workers    = flag.Int("workers", 8, "the planner's --workers, and the limit's writers")
	watchers   = flag.Int("plan-watchers", 0, "agents whose watch of the plan convergence waits for (0: every member)")
	limitPhase = flag.Bool("limit", true, "measure the limit before the planner starts")
	timeout    = flag.Duration("timeout", 30*time.Minute, "how long a phase may take")
	workDir    = flag.String("dir", "", "working directory (default: a temporary one, kept when a phase fails)")
	member     = flag.Bool("member", true, "after convergence, join one more member with a real apiserver, importing every name from every source: its agent's writes, RSS and time, then its restart's writes")
	cpuProfile = flag.String("cpu-profile", "", "write a CPU profile of the planner's first --cpu-profile-seconds to this file (go tool pprof reads it)")
	profileFor = flag.Duration("cpu-profile-seconds", time.Minute, "how long the planner's CPU profile runs")
	settleFor  = flag.Duration("restart-settle", 30*time.Second, "how long after a restarted agent is ready its writes are counted")
)

const namespace = "bench"

// plannerUser is the planner's hub identity (deploy/hub-pull), which the
// limit writes with too.
const plannerUser = "system:serviceaccount:mcs-system:mcs-planner"

var (
	memberExportsGVR = hubv1alpha1.SchemeGroupVersion.WithResource("memberexports")
	servicePlansGVR  = hubv1alpha1.SchemeGroupVersion.WithResource("serviceplans")
	serviceExports   = mcsv1beta1.SchemeGroupVersion.WithResource("serviceexports")
)

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	keep := false
	dir := *workDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "bench-pull-hub-"); err != nil {
			return err
		}
		defer func() {
			if !keep {
				os.RemoveAll(dir)
			}
		}()
	}
	if *watchers <= 0 || *watchers > *members {
		*watchers = *members
	}
	etcd, err := framework.StartEtcd(ctx, filepath.Join(dir, "etcd"))
	if err != nil {
		return err
	}
	defer etcd.Stop()
	hub, err := framework.StartCluster(ctx, framework.ClusterOptions{Name: "hub", Etcd: etcd, Dir: filepath.Join(dir, "hub"),
		ExtraArgs: []string{"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"}})
	if err != nil {
		return err
	}
	defer hub.Stop()
	serverPids := []int{etcd.Pid(), hub.Pid()}
	admin := hub.RESTConfig()
	admin.QPS, admin.Burst = 2000, 4000
	kube := kubernetes.NewForConfigOrDie(admin)
	dyn := dynamic.NewForConfigOrDie(admin)
	if err := layOut(ctx, hub, kube, dyn); err != nil {
		return fmt.Errorf("laying out the hub: %w", err)
	}

	// The agents publish.
	start := time.Now()
	var agentWrites, agentRenewals []func() int64
	agentCtx, stopAgents := context.WithCancel(ctx)
	defer stopAgents()
	for i := range *members {
		id := clusterID(i)
		cfg := identity(admin, fmt.Sprintf("system:serviceaccount:%s:%s", id, pull.AgentServiceAccount), id)
		agent, err := pull.NewAgent(pull.AgentConfig{
			ClusterID: id,
			Member:    simulatedMember(i), MemberDynamic: simulatedExports(),
			Hub: mustKube(cfg), HubDynamic: dynamic.NewForConfigOrDie(cfg),
			SourceManagers: []string{"endpointslice-controller.k8s.io"},
			LeaseRenewal:   10 * time.Second,
			// Their clusters are simulated: always ready.
			MemberReady: func(context.Context) error { return nil },
		})
		if err != nil {
			return err
		}
		agentWrites, agentRenewals = append(agentWrites, agent.Writes), append(agentRenewals, agent.Renewals)
		go func() {
			if err := agent.Run(agentCtx, 2); err != nil && agentCtx.Err() == nil {
				fmt.Fprintln(os.Stderr, "agent", id, err)
			}
		}()
	}
	published := *members * *names
	meta := metadata.NewForConfigOrDie(admin)
	if err := waitFor(ctx, *timeout, "every member's exports and endpoints published", func() (bool, string) {
		exports, e1 := count(ctx, meta.Resource(memberExportsGVR).Namespace(""), metav1.ListOptions{})
		slices, e2 := count(ctx, meta.Resource(schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}).Namespace(""),
			metav1.ListOptions{LabelSelector: discoveryv1.LabelManagedBy + "=" + pull.AgentManager})
		time.Sleep(2 * time.Second)
		return e1 == nil && e2 == nil && exports == published && slices == published, fmt.Sprintf("%d exports, %d slices (%v %v)", exports, slices, e1, e2)
	}); err != nil {
		keep = true
		return err
	}
	fmt.Printf("published: %d members x %d names x %d endpoints in %s (agents' writes: %d)\n",
		*members, *names, *perService, time.Since(start).Round(time.Millisecond), sum(agentWrites))
	measure.Settle(serverPids)

	// What the planner must write: a ServicePlan per name (with every
	// member's export's conditions), one slice per name and source.
	floor := *names + published
	var limit time.Duration
	if *limitPhase {
		if limit, err = measureLimit(ctx, admin, kube, dyn, serverPids); err != nil {
			keep = true
			return fmt.Errorf("limit: %w", err)
		}
		measure.Settle(serverPids)
	}

	// The planner.
	seen := startWatchers(ctx, admin, pull.PlanNamespace)
	defer seen.stop()
	kubeconfig, err := writeKubeconfig(dir, "planner", identity(admin, plannerUser, "mcs-system"))
	if err != nil {
		return err
	}
	writesBefore, _, err := measure.WriteRequestsBy(ctx, kube)
	if err != nil {
		return err
	}
	renewalsBefore, agentWritesBefore := sum(agentRenewals), sum(agentWrites)
	cpuServersBefore := measure.CPUSeconds(serverPids...)
	logFile, err := os.Create(filepath.Join(dir, "planner.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	metricsPort, err := framework.FreePort()
	if err != nil {
		return err
	}
	cmd := exec.Command(*planner, "planner", "--kubeconfig="+kubeconfig, "--leader-elect=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--healthz-bind-address=0", "--secure-port=0",
		fmt.Sprintf("--kube-api-qps=%d", *apiQPS), fmt.Sprintf("--kube-api-burst=%d", 2**apiQPS), fmt.Sprintf("--workers=%d", *workers),
		fmt.Sprintf("--profiling=%t", *cpuProfile != ""))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start = time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	if *cpuProfile != "" {
		go profileCPU(ctx, metricsPort, *cpuProfile, *profileFor)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	rss := &measure.PeakRSS{Pid: cmd.Process.Pid}
	stopRSS := make(chan struct{})
	go rss.Watch(stopRSS)
	var inHub time.Duration
	if err := waitFor(ctx, *timeout, "the plan delivered to every agent's watch", func() (bool, string) {
		first, all := seen.progress(*names + published)
		if first && inHub == 0 {
			inHub = time.Since(start)
		}
		return all == *watchers, fmt.Sprintf("%d of %d watchers have the whole plan", all, *watchers)
	}); err != nil {
		keep = true
		return err
	}
	delivered := time.Since(start)
	if err := waitFor(ctx, *timeout, "every member's export given its conditions", func() (bool, string) {
		n, err := withConditions(ctx, dyn)
		return n == published, fmt.Sprintf("%d of %d (%v)", n, published, err)
	}); err != nil {
		keep = true
		return err
	}
	converged := time.Since(start)
	close(stopRSS)
	plannerCPU := measure.CPUSeconds(cmd.Process.Pid)
	serversCPU := measure.CPUSeconds(serverPids...) - cpuServersBefore
	writesAfter, _, err := measure.WriteRequestsBy(ctx, kube)
	if err != nil {
		return err
	}
	plannerWrites := writesAfter - writesBefore - int(sum(agentRenewals)-renewalsBefore) - int(sum(agentWrites)-agentWritesBefore)
	fmt.Printf("planner: the plan whole in the hub after %s, in every one of %d agents' watches after %s, every export's conditions after %s\n",
		inHub.Round(time.Millisecond), *watchers, delivered.Round(time.Millisecond), converged.Round(time.Millisecond))
	// The limit writes from a list made before its clock starts; the
	// planner reads the hub (every member's exports and slices) before
	// its first write. Both are said: the whole, and the writing alone.
	firstWrite := seen.first().Sub(start)
	fmt.Printf("  its first write in a watch after %s (reading the hub before it); from there, the plan delivered after %s and every export's conditions after %s\n",
		firstWrite.Round(time.Millisecond), (delivered - firstWrite).Round(time.Millisecond), (converged - firstWrite).Round(time.Millisecond))
	if limit > 0 {
		fmt.Printf("  ratio to the limit: %.2f (conditions included), %.2f (the plan delivered); from its first write: %.2f and %.2f\n",
			converged.Seconds()/limit.Seconds(), delivered.Seconds()/limit.Seconds(),
			(converged-firstWrite).Seconds()/limit.Seconds(), (delivered-firstWrite).Seconds()/limit.Seconds())
	}
	fmt.Printf("  planner: %.1f s CPU, peak RSS %d MB, %d writes (the floor: %d objects: %d ServicePlans, %d slices)\n",
		plannerCPU, rss.Get()/1024, plannerWrites, floor, *names, published)
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "mcs_planner_writes_total") || strings.HasPrefix(line, "mcs_planner_members{") || strings.HasPrefix(line, "mcs_planner_sync_duration_seconds_count") {
				fmt.Println("   ", line)
			}
		}
	}
	fmt.Printf("  hub apiserver and etcd: %.1f s CPU during convergence; apiserver RSS %d MB, etcd RSS %d MB\n",
		serversCPU, measure.StatusKB(hub.Pid(), "VmRSS")/1024, measure.StatusKB(etcd.Pid(), "VmRSS")/1024)
	if *member {
		if err := measureMember(ctx, dir, etcd, hub, admin, kube, dyn); err != nil {
			keep = true
			return fmt.Errorf("one member at %d sources: %w", *members, err)
		}
	}
	return nil
}

// measureMember joins one more member, with a real apiserver, that
// exports nothing and has the names' namespace: the planner adds it to
// every name's plan, and its agent (mcs-controller member-agent, a
// process) writes every import and every source's slices into it. Then
// the agent is restarted, and its writes into the member counted.
func measureMember(ctx context.Context, dir string, etcd *framework.Etcd, hub *framework.Cluster, admin *rest.Config, kube kubernetes.Interface, dyn dynamic.Interface) error {
	id := clusterID(*members)
	c, err := framework.StartCluster(ctx, framework.ClusterOptions{Name: id, Etcd: etcd, Dir: filepath.Join(dir, id),
		ExtraArgs: []string{"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"}})
	if err != nil {
		return err
	}
	defer c.Stop()
	cfg := c.RESTConfig()
	mkube := kubernetes.NewForConfigOrDie(cfg)
	all, err := crds.All()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(cfg), all...); err != nil {
		return err
	}
	mdyn := dynamic.NewForConfigOrDie(cfg)
	prop := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "about.k8s.io/v1alpha1", "kind": "ClusterProperty",
		"metadata": map[string]any{"name": "cluster.clusterset.k8s.io"}, "spec": map[string]any{"value": id},
	}}
	if err := waitFor(ctx, time.Minute, "the member's ClusterProperty", func() (bool, string) {
		_, err := mdyn.Resource(schema.GroupVersionResource{Group: "about.k8s.io", Version: "v1alpha1", Resource: "clusterproperties"}).Create(ctx, prop, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err)
	}); err != nil {
		return err
	}
	if _, err := mkube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Its part of the hub.
	part, err := pull.MemberObjects(id, pull.DefaultMemberLimits)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	for _, o := range part {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return err
		}
		if err := kindconfig.Apply(ctx, dyn, mapper, &unstructured.Unstructured{Object: u}, false); err != nil {
			return err
		}
		if q, ok := o.(*v1.ResourceQuota); ok {
			got, err := kube.CoreV1().ResourceQuotas(id).Get(ctx, q.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.Status.Hard, got.Status.Used = q.Spec.Hard, v1.ResourceList{}
			for name := range q.Spec.Hard {
				got.Status.Used[name] = resource.MustParse("0")
			}
			if _, err := kube.CoreV1().ResourceQuotas(id).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	hubKubeconfig, err := writeKubeconfig(dir, "agent-hub", identity(admin, fmt.Sprintf("system:serviceaccount:%s:%s", id, pull.AgentServiceAccount), id))
	if err != nil {
		return err
	}
	memberKubeconfig, err := writeKubeconfig(dir, "agent-member", cfg)
	if err != nil {
		return err
	}
	args := []string{"member-agent", "--kubeconfig=" + memberKubeconfig, "--hub-kubeconfig=" + hubKubeconfig, "--leader-elect=false",
		"--metrics-bind-address=0", "--healthz-bind-address=0", "--secure-port=0",
		fmt.Sprintf("--kube-api-qps=%d", *apiQPS), fmt.Sprintf("--kube-api-burst=%d", 2**apiQPS), fmt.Sprintf("--workers=%d", *workers)}
	held := func() (int, int, error) {
		imports, err := count(ctx, metadata.NewForConfigOrDie(cfg).Resource(mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports")).Namespace(namespace), metav1.ListOptions{})
		if err != nil {
			return 0, 0, err
		}
		slices, err := count(ctx, metadata.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}).Namespace(namespace),
			metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName})
		return imports, slices, err
	}
	before, _, err := measure.WriteRequestsBy(ctx, mkube)
	if err != nil {
		return err
	}
	agent, err := startProcess(filepath.Join(dir, "member-agent.log"), args...)
	if err != nil {
		return err
	}
	start := time.Now()
	rss := &measure.PeakRSS{Pid: agent.Process.Pid}
	stopRSS := make(chan struct{})
	go rss.Watch(stopRSS)
	want := *members * *names
	if err := waitFor(ctx, *timeout, "the member to hold every import and every source's slices", func() (bool, string) {
		time.Sleep(2 * time.Second)
		imports, slices, err := held()
		return err == nil && imports == *names && slices == want, fmt.Sprintf("%d imports, %d slices (%v)", imports, slices, err)
	}); err != nil {
		return err
	}
	took := time.Since(start)
	close(stopRSS)
	after, by, err := measure.WriteRequestsBy(ctx, mkube)
	if err != nil {
		return err
	}
	fmt.Printf("one member at %d sources: every import and slice after %s; agent %.1f s CPU, peak RSS %d MB; %d writes into the member (the floor: %d imports, their %d statuses, %d slices)\n",
		*members, took.Round(time.Millisecond), measure.CPUSeconds(agent.Process.Pid), rss.Get()/1024, after-before, *names, *names, want)
	_ = by
	_ = agent.Process.Kill()
	_ = agent.Wait()

	// The agent restarted: what it writes is what changed, nothing.
	before, byBefore, err := measure.WriteRequestsBy(ctx, mkube)
	if err != nil {
		return err
	}
	agent, err = startProcess(filepath.Join(dir, "member-agent-restarted.log"), args...)
	if err != nil {
		return err
	}
	defer func() { _ = agent.Process.Kill(); _ = agent.Wait() }()
	time.Sleep(*settleFor)
	after, byAfter, err := measure.WriteRequestsBy(ctx, mkube)
	if err != nil {
		return err
	}
	var what []string
	for k, n := range byAfter {
		if d := n - byBefore[k]; d > 0 && (strings.HasPrefix(k, "POST") || strings.HasPrefix(k, "PUT") || strings.HasPrefix(k, "PATCH") || strings.HasPrefix(k, "DELETE")) {
			what = append(what, fmt.Sprintf("%s %d", k, d))
		}
	}
	sort.Strings(what)
	fmt.Printf("  restarted over %d sources: %d writes into the member in the %s after its start (%s)\n", *members, after-before, *settleFor, strings.Join(what, ", "))
	return nil
}

func startProcess(log string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(*planner, args...)
	cmd.Stdout, cmd.Stderr = f, f
	return cmd, cmd.Start()
}

// layOut sets the hub up as its operator does: the hub CRDs,
// deploy/hub-pull, every member's part (its quota's status initialised,
// as the quota controller would: no kube-controller-manager runs here).
func layOut(ctx context.Context, hub *framework.Cluster, kube kubernetes.Interface, dyn dynamic.Interface) error {
	hubCRDs, err := crds.Hub()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(hub.RESTConfig()), hubCRDs...); err != nil {
		return err
	}
	path, err := repoFile("deploy", "hub-pull", "hub.yaml")
	if err != nil {
		return err
	}
	objs, err := kindconfig.Objects(path, nil)
	if err != nil {
		return err
	}
	var quotas []*v1.ResourceQuota
	for i := range *members {
		part, err := pull.MemberObjects(clusterID(i), pull.DefaultMemberLimits)
		if err != nil {
			return err
		}
		for _, o := range part {
			if q, ok := o.(*v1.ResourceQuota); ok {
				quotas = append(quotas, q)
			}
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				return err
			}
			objs = append(objs, &unstructured.Unstructured{Object: u})
		}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	for _, obj := range objs {
		if err := kindconfig.Apply(ctx, dyn, mapper, obj, false); err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, q := range quotas {
		got, err := kube.CoreV1().ResourceQuotas(q.Namespace).Get(ctx, q.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got.Status.Hard, got.Status.Used = q.Spec.Hard, v1.ResourceList{}
		for name := range q.Spec.Hard {
			got.Status.Used[name] = resource.MustParse("0")
		}
		if _, err := kube.CoreV1().ResourceQuotas(q.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	// The limit's namespace, readable by every agent as the plan is.
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "limit"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := kube.RbacV1().RoleBindings("limit").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "agents"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: pull.PlanReaderClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts"}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// And writable by the planner's identity as the plan's namespace is
	// (its Role there, copied), so that the limit's writes are
	// authorized as the planner's are, not as the hub's admin's.
	writer, err := kube.RbacV1().Roles(pull.PlanNamespace).Get(ctx, "multicluster:planner-writer", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, err := kube.RbacV1().Roles("limit").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: writer.Name}, Rules: writer.Rules}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err = kube.RbacV1().RoleBindings("limit").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "planner"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: writer.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "mcs-planner", Namespace: "mcs-system"}},
	}, metav1.CreateOptions{})
	return err
}

// simulatedMember is member i's own cluster, in memory: namespace bench,
// every name's Service and one EndpointSlice of it as the EndpointSlice
// controller writes it, its endpoints in the member's own range.
func simulatedMember(i int) kubernetes.Interface {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	objs := []runtime.Object{&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, CreationTimestamp: created}}}
	for n := range *names {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: serviceName(n), UID: uid("svc", i, n)},
			Spec: v1.ServiceSpec{Selector: map[string]string{"app": serviceName(n)}, Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace, Name: serviceName(n) + "-abcde",
				Labels:          map[string]string{discoveryv1.LabelServiceName: serviceName(n), discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, v1.SchemeGroupVersion.WithKind("Service"))},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		}
		for e := range *perService {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("100.%d.%d.%d", 64+i/256, i%256, 1+(n**perService+e)%250)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: fmt.Sprintf("%s-%d", serviceName(n), e)},
			})
		}
		objs = append(objs, svc, s)
	}
	return kubefake.NewClientset(objs...)
}

// simulatedExports holds a simulated member's ServiceExports, one per name
// (and no ClusterProperty, which its agent lists too).
func simulatedExports() dynamic.Interface {
	scheme := runtime.NewScheme()
	var objs []runtime.Object
	for n := range *names {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(mcsv1beta1.SchemeGroupVersion.String())
		u.SetKind("ServiceExport")
		u.SetNamespace(namespace)
		u.SetName(serviceName(n))
		u.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)))
		objs = append(objs, u)
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		serviceExports: "ServiceExportList", aboutv1alpha1.Resource: "ClusterPropertyList",
		mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports"): "ServiceImportList",
	}, objs...)
}

// measureLimit writes, with the planner's client settings and into a
// namespace of its own, what the planner writes (a ServicePlan per name
// with every member's export's conditions, a slice per name and source),
// watched as the plan is, and returns how long until every watcher saw
// all of it.
func measureLimit(ctx context.Context, admin *rest.Config, kube kubernetes.Interface, dyn dynamic.Interface, serverPids []int) (time.Duration, error) {
	seen := startWatchers(ctx, admin, "limit")
	defer seen.stop()
	// The planner's identity and client settings.
	cfg := identity(admin, plannerUser, "mcs-system")
	cfg.QPS, cfg.Burst = float32(*apiQPS), 2**apiQPS
	ldyn := dynamic.NewForConfigOrDie(cfg)
	lkube := mustKube(cfg)
	exports, err := dyn.Resource(memberExportsGVR).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	published, err := kube.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: pull.AgentManager}).String()})
	if err != nil {
		return 0, err
	}
	cpuBefore := measure.CPUSeconds(serverPids...)
	start := time.Now()
	jobs := make(chan func() error)
	var failed atomic.Value
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range jobs {
				if err := job(); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	var clusters []any
	for _, me := range exports.Items {
		if !slices.Contains(clusters, any(me.GetNamespace())) {
			clusters = append(clusters, me.GetNamespace())
		}
	}
	for n := range *names {
		jobs <- func() error {
			sp := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": hubv1alpha1.SchemeGroupVersion.String(), "kind": "ServicePlan",
				"metadata": map[string]any{"name": pull.PlanName(namespace, serviceName(n)), "namespace": "limit"},
				"spec": map[string]any{"service": map[string]any{"namespace": namespace, "name": serviceName(n)},
					"import": map[string]any{"spec": map[string]any{"type": "ClusterSetIP", "ips": []any{fmt.Sprintf("10.251.%d.%d", n/256, n%256)},
						"ports": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "TCP"}}}},
					"exportConditions": []any{map[string]any{"clusters": clusters, "conditions": []any{
						map[string]any{"type": "Valid", "status": "True", "reason": "Valid"},
						map[string]any{"type": "Ready", "status": "True", "reason": "Exported"},
						map[string]any{"type": "Conflict", "status": "False", "reason": "NoConflicts"},
					}}}},
			}}
			_, err := ldyn.Resource(servicePlansGVR).Namespace("limit").Create(ctx, sp, metav1.CreateOptions{})
			return err
		}
	}
	// Each slice as the planner plans it (export.ImportedSlice, then
	// pull.PlanSlice, from what the agent published), so that the limit
	// writes objects of the same size as the plan's.
	for _, p := range published.Items {
		jobs <- func() error {
			svc, cluster := p.Labels[hubv1alpha1.LabelServiceName], p.Namespace
			src := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: p.Annotations[hubv1alpha1.AnnotationSourceSlice]},
				AddressType: p.AddressType, Endpoints: p.Endpoints, Ports: p.Ports,
			}
			imported := export.ImportedSlice(src, svc, cluster, mcsproxy.DefaultManagedBy, map[string]bool{"http": true}, nil)
			trigger, _ := time.Parse(time.RFC3339Nano, p.Annotations[v1.EndpointsLastChangeTriggerTime])
			planned := pull.PlanSlice(imported, trigger, false)
			planned.Namespace = "limit"
			_, err := lkube.DiscoveryV1().EndpointSlices("limit").Create(ctx, planned, metav1.CreateOptions{})
			return err
		}
	}
	close(jobs)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return 0, err
	}
	want := *names + len(published.Items)
	if err := waitFor(ctx, *timeout, "the limit's writes in every watch", func() (bool, string) {
		_, all := seen.progress(want)
		return all == *watchers, fmt.Sprintf("%d of %d", all, *watchers)
	}); err != nil {
		return 0, err
	}
	limit := time.Since(start)
	fmt.Printf("limit: %s for the planner's %d writes made straight into the hub (%d QPS, %d writers) and seen by %d watchers; apiserver and etcd used %.1f s CPU\n",
		limit.Round(time.Millisecond), *names+len(published.Items), *apiQPS, *workers, *watchers, measure.CPUSeconds(serverPids...)-cpuBefore)
	return limit, nil
}

// watcherSet is the agents' watches of a plan namespace: each agent, with
// its own hub identity, watches the ServicePlans and the slices there, as
// the writing half's informers do, and counts the distinct objects seen.
type watcherSet struct {
	mu    sync.Mutex
	index map[string]int
	seen  []map[int]bool
	// firstAt is when any watcher saw its first object: for the
	// planner, its first write, after it has read the hub.
	firstAt time.Time
	cancel  context.CancelFunc
	stopped sync.WaitGroup
}

func startWatchers(ctx context.Context, admin *rest.Config, ns string) *watcherSet {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcherSet{index: map[string]int{}, cancel: cancel}
	for i := range *watchers {
		w.seen = append(w.seen, map[int]bool{})
		id := clusterID(i)
		cfg := identity(admin, fmt.Sprintf("system:serviceaccount:%s:%s", id, pull.AgentServiceAccount), id)
		kube := mustKube(cfg)
		dyn := dynamic.NewForConfigOrDie(cfg)
		for _, open := range []func(rv string) (watch.Interface, error){
			func(rv string) (watch.Interface, error) {
				return dyn.Resource(servicePlansGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			},
			func(rv string) (watch.Interface, error) {
				return kube.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelManagedBy, ResourceVersion: rv, AllowWatchBookmarks: true})
			},
		} {
			w.stopped.Add(1)
			go func() {
				defer w.stopped.Done()
				// A watch the apiserver ends (its timeout, or this
				// watcher too slow for its buffer on a busy machine)
				// goes on from the last event seen, as an informer's
				// does, rather than being sent every object again;
				// only a revision already compacted starts afresh.
				rv := ""
				for ctx.Err() == nil {
					wi, err := open(rv)
					if err != nil {
						time.Sleep(time.Second)
						continue
					}
					for ev := range wi.ResultChan() {
						if ev.Type == watch.Error {
							rv = ""
							continue
						}
						o, ok := ev.Object.(metav1.Object)
						if !ok {
							continue
						}
						rv = o.GetResourceVersion()
						if ev.Type == watch.Deleted || ev.Type == watch.Bookmark {
							continue
						}
						w.saw(i, fmt.Sprintf("%T/%s", ev.Object, o.GetName()))
					}
				}
			}()
		}
	}
	return w
}

func (w *watcherSet) saw(watcher int, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstAt.IsZero() {
		w.firstAt = time.Now()
	}
	k, ok := w.index[key]
	if !ok {
		k = len(w.index)
		w.index[key] = k
	}
	w.seen[watcher][k] = true
}

// progress says whether one watcher has seen want objects, and how many
// have.
func (w *watcherSet) progress(want int) (first bool, all int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.seen {
		if len(s) >= want {
			first = true
			all++
		}
	}
	return first, all
}

// first returns when any watcher saw its first object.
func (w *watcherSet) first() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstAt
}

func (w *watcherSet) stop() {
	w.cancel()
	w.stopped.Wait()
}

// withConditions counts the exports the plan gives conditions, a Valid
// condition among them.
func withConditions(ctx context.Context, dyn dynamic.Interface) (int, error) {
	list, err := dyn.Resource(servicePlansGVR).Namespace(pull.PlanNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, u := range list.Items {
		var sp hubv1alpha1.ServicePlan
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sp); err != nil {
			return 0, err
		}
		for _, o := range sp.Spec.ExportConditions {
			if slices.ContainsFunc(o.Conditions, func(c hubv1alpha1.PlannedCondition) bool {
				return c.Type == string(mcsv1beta1.ServiceExportConditionValid)
			}) {
				n += len(o.Clusters)
			}
		}
	}
	return n, nil
}

// count is how many objects a list returns, read as metadata only, in
// pages.
func count(ctx context.Context, r metadata.ResourceInterface, opts metav1.ListOptions) (int, error) {
	opts.Limit = 5000
	n := 0
	for {
		list, err := r.List(ctx, opts)
		if err != nil {
			return 0, err
		}
		n += len(list.Items)
		if opts.Continue = list.Continue; opts.Continue == "" {
			return n, nil
		}
	}
}

// identity is admin impersonating user, a ServiceAccount of namespace.
func identity(admin *rest.Config, user, namespace string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	return cfg
}

// mustKube is a client of cfg's built-in types as the planner and the
// agents make theirs.
func mustKube(cfg *rest.Config) kubernetes.Interface {
	kube, err := mcs.NewKubeClient(cfg)
	if err != nil {
		panic(err)
	}
	return kube
}

func writeKubeconfig(dir, name string, cfg *rest.Config) (string, error) {
	path := filepath.Join(dir, name+".kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["planner"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile, Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "planner"}
	kc.CurrentContext = "hub"
	return path, clientcmd.WriteToFile(*kc, path)
}

func clusterID(i int) string   { return fmt.Sprintf("member-%03d", i) }
func serviceName(n int) string { return fmt.Sprintf("svc-%03d", n) }

func uid(kind string, i, n int) types.UID { return types.UID(fmt.Sprintf("%s-%d-%d", kind, i, n)) }

func sum(fs []func() int64) int64 {
	var t int64
	for _, f := range fs {
		t += f()
	}
	return t
}

// waitFor polls cond every quarter second (lists every two seconds: a
// cond that lists is slower to answer) until it holds.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if state != last {
			fmt.Printf("  waiting for %s: %s\n", what, state)
			last = state
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, what, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// repoFile is a file of this repository, found from the working
// directory up.
func repoFile(parts ...string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(append([]string{dir}, parts...)...), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// profileCPU writes the planner's CPU profile of the next d to path,
// once its metrics port answers.
func profileCPU(ctx context.Context, port int, path string, d time.Duration) {
	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", port, int(d.Seconds()))
	for ctx.Err() == nil {
		resp, err := http.Get(url)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode == http.StatusOK {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintf(os.Stderr, "the planner's CPU profile: %v (HTTP %d)\n", err, resp.StatusCode)
		}
		return
	}
}

package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/crds"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/eventrecorder"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/kubectlmcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestPullPlannerPlans runs pull mode's first two hops between real
// apiservers: two members' agents publish into a real hub with their
// own hub identities, and the planner, with deploy/hub-pull's identity
// (no member credential), writes each name's plan: the import with its
// clusterset IP, which clusters serve it, which members hold it (those
// with the namespace, as their MemberCluster says), and each source's
// endpoints. It follows a second exporter, a namespace that appears in
// a member, endpoints outside the ranges the operator states for a
// member (withheld, said on its MemberExport and, by its agent, on its
// ServiceExport), a restarted planner (it
// writes nothing), a member whose apiserver goes down while its agent
// runs (the agent cannot vouch for what it published: it stops renewing
// its Lease, the member's endpoints leave the plan after the TTL, the
// clusterset IP stays; back, they return) and the unexports (the plan
// goes).
func TestPullPlannerPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := framework.StartTestEtcd(t)
	hub := startPullHub(t, etcd, "cluster-a", "cluster-b")
	a := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "cluster-a"}), "cluster-a")
	b := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "cluster-b"}), "cluster-b")
	for _, m := range []*testMember{a, b} {
		createNamespace(t, m, "demo")
	}
	createNamespace(t, a, "solo")

	startPullAgent(t, hub, a)
	startPullAgent(t, hub, b)

	const ttl = 6 * time.Second
	planner, stopPlanner, _ := startPullPlanner(t, hub, ttl)

	hubDyn := dynamic.NewForConfigOrDie(hub.cluster.RESTConfig())
	plan := func(ns, name string) (*hubv1alpha1.ServicePlan, error) {
		u, err := hubDyn.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("serviceplans")).Namespace(pull.PlanNamespace).Get(ctx, pull.PlanName(ns, name), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		sp := &hubv1alpha1.ServicePlan{}
		return sp, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sp)
	}
	// planSays is what the plan of ns/name says, in one line: its type,
	// whether it has a clusterset IP, the serving clusters, the members
	// that hold it, and each source's addresses.
	planSays := func(ns, name string) string {
		sp, err := plan(ns, name)
		if err != nil {
			return err.Error()
		}
		if sp.Spec.Import == nil {
			return "no import"
		}
		list, err := hub.kube.DiscoveryV1().EndpointSlices(pull.PlanNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: hubv1alpha1.LabelServiceNamespace + "=" + ns + "," + hubv1alpha1.LabelServiceName + "=" + name})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s ips=%d clusters=%s in=%s endpoints=%s", sp.Spec.Import.Spec.Type, len(sp.Spec.Import.Spec.IPs),
			strings.Join(sp.Spec.Import.Clusters, ","), strings.Join(sp.Spec.ImportedIn, ","), sourcesOf(list.Items, hubv1alpha1.LabelSourceCluster))
	}
	waitPlan := func(ns, name, want string) *hubv1alpha1.ServicePlan {
		t.Helper()
		eventually(t, 30*time.Second, "the plan of "+ns+"/"+name+": "+want, func() (bool, string) {
			got := planSays(ns, name)
			return got == want, got
		})
		sp, _ := plan(ns, name)
		return sp
	}
	export := func(m *testMember, ns, name string, addrs ...string) {
		t.Helper()
		svc := createSelectedService(t, m, ns, name)
		endpointsOf(t, m, svc, addrs...)
		if _, err := m.mcs.MulticlusterV1beta1().ServiceExports(ns).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// One exporter: planned for both members, which have the namespace.
	export(a, "demo", "web", "10.1.0.1")
	first := waitPlan("demo", "web", "ClusterSetIP ips=1 clusters=cluster-a in=cluster-a,cluster-b endpoints=cluster-a=10.1.0.1")
	ip := first.Spec.Import.Spec.IPs[0]
	if !netip.MustParsePrefix("10.250.0.0/24").Contains(netip.MustParseAddr(ip)) {
		t.Errorf("clusterset IP %s is outside the configured range", ip)
	}

	// A second exporter serves too; the clusterset IP stays.
	export(b, "demo", "web", "10.2.0.1", "10.2.0.2")
	sp := waitPlan("demo", "web", "ClusterSetIP ips=1 clusters=cluster-a,cluster-b in=cluster-a,cluster-b endpoints=cluster-a=10.1.0.1;cluster-b=10.2.0.1,10.2.0.2")
	if sp.Spec.Import.Spec.IPs[0] != ip {
		t.Errorf("the clusterset IP moved from %s to %s when cluster-b exported", ip, sp.Spec.Import.Spec.IPs[0])
	}

	// Where the namespace is: only cluster-a has solo, until cluster-b
	// makes it too (its MemberCluster says so).
	export(a, "solo", "api", "10.1.0.7")
	waitPlan("solo", "api", "ClusterSetIP ips=1 clusters=cluster-a in=cluster-a endpoints=cluster-a=10.1.0.7")
	createNamespace(t, b, "solo")
	waitPlan("solo", "api", "ClusterSetIP ips=1 clusters=cluster-a in=cluster-a,cluster-b endpoints=cluster-a=10.1.0.7")

	// cluster-a publishes an endpoint outside the ranges the operator
	// states for it: withheld from the plan, said on its MemberExport.
	leak := endpointsOf(t, a, mustService(t, a, "demo", "web"), "192.168.9.9")
	waitPlan("demo", "web", "ClusterSetIP ips=1 clusters=cluster-a,cluster-b in=cluster-a,cluster-b endpoints=cluster-a=;cluster-a=10.1.0.1;cluster-b=10.2.0.1,10.2.0.2")
	eventually(t, 30*time.Second, "an event on cluster-a's MemberExport about "+leak.Name, func() (bool, string) {
		list, err := hub.kube.EventsV1().Events("cluster-a").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "MemberExport" && e.Regarding.Name == pull.MemberExportName("demo", "web") && e.Reason == mcs.ReasonEndpointsOutsidePodRanges && strings.Contains(e.Note, "192.168.9.9") {
				return true, ""
			}
			seen = append(seen, e.Reason+" "+e.Note)
		}
		return false, strings.Join(seen, "; ")
	})
	// And, relayed by its agent, on its ServiceExport in cluster-a, where
	// the exporter looks.
	eventually(t, 30*time.Second, "the same event on cluster-a's ServiceExport demo/web", func() (bool, string) {
		list, err := a.kube.EventsV1().Events("demo").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "ServiceExport" && e.Regarding.Name == "web" && e.Reason == mcs.ReasonEndpointsOutsidePodRanges && strings.Contains(e.Note, "192.168.9.9") {
				return true, ""
			}
			seen = append(seen, e.Regarding.Kind+" "+e.Reason+" "+e.Note)
		}
		return false, strings.Join(seen, "; ")
	})
	if err := a.kube.DiscoveryV1().EndpointSlices("demo").Delete(ctx, leak.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPlan("demo", "web", "ClusterSetIP ips=1 clusters=cluster-a,cluster-b in=cluster-a,cluster-b endpoints=cluster-a=10.1.0.1;cluster-b=10.2.0.1,10.2.0.2")

	// A restarted planner writes nothing that is already right.
	stopPlanner()
	var reg metrics.KubeRegistry
	planner, stopPlanner, reg = startPullPlanner(t, hub, ttl)
	time.Sleep(5 * time.Second)
	if w := planner.Writes(); w != 0 {
		t.Errorf("a restarted planner wrote %d times, want none", w)
	}
	waitPlan("demo", "web", "ClusterSetIP ips=1 clusters=cluster-a,cluster-b in=cluster-a,cluster-b endpoints=cluster-a=10.1.0.1;cluster-b=10.2.0.1,10.2.0.2")

	// cluster-a's apiserver goes down, its agent running: after the TTL
	// its endpoints leave the plan; it still counts for the import,
	// whose IP stays.
	a.cluster.Crash()
	start := time.Now()
	sp = waitPlan("demo", "web", "ClusterSetIP ips=1 clusters=cluster-a,cluster-b in=cluster-a,cluster-b endpoints=cluster-b=10.2.0.1,10.2.0.2")
	if since := time.Since(start); since < ttl-2*time.Second {
		t.Errorf("cluster-a's endpoints left the plan %s after its agent stopped, before the TTL (%s)", since, ttl)
	}
	if sp.Spec.Import.Spec.IPs[0] != ip {
		t.Errorf("the clusterset IP moved from %s to %s when cluster-a expired", ip, sp.Spec.Import.Spec.IPs[0])
	}
	// solo/api's only source is cluster-a: with no source alive, its
	// endpoints are kept and marked stale (push mode's fail-static).
	sp = waitPlan("solo", "api", "ClusterSetIP ips=1 clusters=cluster-a in=cluster-a,cluster-b endpoints=cluster-a=10.1.0.7")
	if !slices.Equal(sp.Spec.Stale, []string{"cluster-a"}) {
		t.Errorf("solo/api's only source expired: stale %v, want cluster-a", sp.Spec.Stale)
	}
	// What an operator's alert reads: one member expired, one alive.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcs_planner_members [ALPHA] Member namespaces of the hub, by state: alive (its agent renewed its Lease within the endpoint TTL), expired (it did not), unsynced (its agent has published no MemberCluster yet).
# TYPE mcs_planner_members gauge
mcs_planner_members{state="alive"} 1
mcs_planner_members{state="expired"} 1
mcs_planner_members{state="unsynced"} 0
`), "mcs_planner_members"); err != nil {
		t.Errorf("the planner's members gauge with cluster-a expired: %v", err)
	}
	// And what kubectl mcs hub members says of the hub.
	var out bytes.Buffer
	cmd := kubectlmcs.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: io.Discard})
	cmd.SetArgs([]string{"--kubeconfig=" + hub.cluster.Kubeconfig(), "hub", "members", "--endpoint-ttl=" + ttl.String(), "--no-headers"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "(expired)") || !strings.HasPrefix(lines[0], "cluster-a ") ||
		strings.Contains(lines[1], "expired") || !strings.HasPrefix(lines[1], "cluster-b ") {
		t.Errorf("kubectl mcs hub members with cluster-a expired:\n%s", out.String())
	}
	// cluster-a's API back: its agent vouches again, its endpoints return.
	if err := a.cluster.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitPlan("demo", "web", "ClusterSetIP ips=1 clusters=cluster-a,cluster-b in=cluster-a,cluster-b endpoints=cluster-a=10.1.0.1;cluster-b=10.2.0.1,10.2.0.2")

	// The unexports: the plan goes.
	for _, m := range []*testMember{a, b} {
		if err := m.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "demo/web's plan to go", func() (bool, string) {
		_, err := plan("demo", "web")
		got := planSays("demo", "web")
		return apierrors.IsNotFound(err), got
	})
	list, err := hub.kube.DiscoveryV1().EndpointSlices(pull.PlanNamespace).List(ctx, metav1.ListOptions{LabelSelector: hubv1alpha1.LabelServiceName + "=web"})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("demo/web's plan slices after the unexports: %d %v", len(list.Items), err)
	}
}

// startPullPlanner runs pull mode's planner in hub with deploy/hub-pull's
// identity for it, members expiring after ttl, cluster-a's endpoints
// within 10.1.0.0/16 and cluster-b's within 10.2.0.0/16 (the operator's
// word); the returned func stops it.
func startPullPlanner(t *testing.T, hub *testMember, ttl time.Duration) (*mcs.HubPlanner, func(), metrics.KubeRegistry) {
	t.Helper()
	return startPullPlannerWith(t, hub, ttl, nil)
}

// startPullPlannerWith is startPullPlanner with its configuration changed
// by configure.
func startPullPlannerWith(t *testing.T, hub *testMember, ttl time.Duration, configure func(*mcs.HubPlannerConfig)) (*mcs.HubPlanner, func(), metrics.KubeRegistry) {
	t.Helper()
	plannerCfg := impersonateRESTConfig(t, hub.cluster, "system:serviceaccount:mcs-system:mcs-planner", "system:serviceaccounts", "system:serviceaccounts:mcs-system")
	hubKube := kubernetes.NewForConfigOrDie(plannerCfg)
	recorder, stopRecorder := eventrecorder.New(hubKube)
	reg := metrics.NewKubeRegistry()
	cfg := mcs.HubPlannerConfig{
		Config: mcs.Config{
			ManagedBy:          pullManagedBy,
			ClusterSetIPRanges: []netip.Prefix{netip.MustParsePrefix("10.250.0.0/24")},
			EndpointTTL:        ttl,
			MemberPodCIDRs: map[string][]netip.Prefix{
				"cluster-a": {netip.MustParsePrefix("10.1.0.0/16")},
				"cluster-b": {netip.MustParsePrefix("10.2.0.0/16")},
			},
		},
		Hub: hubKube, HubDynamic: dynamic.NewForConfigOrDie(plannerCfg),
		Recorder: recorder, Registry: reg,
	}
	if configure != nil {
		configure(&cfg)
	}
	planner, err := mcs.NewHubPlanner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := planner.Run(ctx); err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	}()
	stop := sync.OnceFunc(func() { cancel(); <-done; stopRecorder() })
	t.Cleanup(stop)
	return planner, stop, reg
}

// TestPullPlannerProfiles: with the hub's Cluster Inventory
// (--inventory-namespace), the region a ClusterProfile states for a member
// (its cluster manager's word) is what cluster selection matches in the
// plan, whatever the member's administrator publishes; a change of the
// profile moves the results; of two profiles of one member the oldest is
// taken, and the next one once it goes; with no profile left the member's
// own word counts. The planner reads the profiles with deploy/hub-pull's
// identity and RBAC.
func TestPullPlannerProfiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := framework.StartTestEtcd(t)
	hub := startPullHub(t, etcd, "cluster-a", "cluster-b")
	crd, err := crds.ClusterProfile()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(hub.cluster.RESTConfig()), crd); err != nil {
		t.Fatal(err)
	}
	applyRBAC(t, hub.kube, repoPath(t, "deploy", "hub-pull", "planner-profiles-rbac.yaml"))
	a := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "cluster-a"}), "cluster-a")
	b := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "cluster-b"}), "cluster-b")
	for i, m := range []*testMember{a, b} {
		createNamespace(t, m, "demo")
		// Both administrators say their cluster is in eu.
		setProperty(t, m, regionKey, "eu")
		exportService(t, m, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, fmt.Sprintf("10.%d.0.1", i+1)))
		setSelectors(t, m, "demo", "web", storySelectors)
		startPullAgent(t, hub, m)
	}
	profiles := dynamic.NewForConfigOrDie(hub.cluster.RESTConfig()).Resource(inventoryv1alpha1.Resource).Namespace("fleet")
	profile := func(name, id, region string) {
		t.Helper()
		putProfileAt(t, profiles, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": inventoryv1alpha1.SchemeGroupVersion.String(), "kind": "ClusterProfile",
			"metadata": map[string]any{"name": name, "namespace": "fleet"},
			"spec":     map[string]any{"displayName": id, "clusterManager": map[string]any{"name": "ocm"}},
			"status": map[string]any{"properties": []any{
				map[string]any{"name": aboutv1alpha1.ClusterIDProperty, "value": id},
				map[string]any{"name": regionKey, "value": region},
			}},
		}})
	}
	// cluster-a's cluster manager says us.
	profile("ocm-a", "cluster-a", "us")
	startPullPlannerWith(t, hub, time.Minute, func(c *mcs.HubPlannerConfig) {
		c.Config.ClusterSelection = true
		c.Profiles = &mcs.HubProfiles{Resource: inventoryv1alpha1.Resource, Namespace: "fleet", Selector: labels.Everything()}
	})
	hubDyn := dynamic.NewForConfigOrDie(hub.cluster.RESTConfig())
	// waitResults waits until the plan of demo/web gives importer its
	// results (each selector's clusters, space separated).
	waitResults := func(importer, want string) {
		t.Helper()
		eventually(t, 30*time.Second, "demo/web's selector results for "+importer+": "+want, func() (bool, string) {
			u, err := hubDyn.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("serviceplans")).Namespace(pull.PlanNamespace).Get(ctx, pull.PlanName("demo", "web"), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			sp := &hubv1alpha1.ServicePlan{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sp); err != nil || sp.Spec.Import == nil {
				return false, fmt.Sprint("no import ", err)
			}
			for _, o := range sp.Spec.Import.SelectorResults {
				if slices.Contains(o.Importers, importer) {
					var got []string
					for _, r := range o.Results {
						got = append(got, fmt.Sprint(r.Clusters))
					}
					return strings.Join(got, " ") == want, strings.Join(got, " ") + o.Failed
				}
			}
			return false, "no outcome for " + importer
		})
	}

	// My cluster, then my region: cluster-a is in us by its profile,
	// however its administrator says eu.
	waitResults("cluster-b", "[cluster-b] [cluster-b]")
	waitResults("cluster-a", "[cluster-a] [cluster-a]")
	// The cluster manager moves it to eu.
	profile("ocm-a", "cluster-a", "eu")
	waitResults("cluster-b", "[cluster-b] [cluster-a cluster-b]")
	// A second manager's newer profile says us: the first one's word
	// stands until it goes.
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a resolution of a second
	profile("second-a", "cluster-a", "us")
	waitResults("cluster-b", "[cluster-b] [cluster-a cluster-b]")
	if err := profiles.Delete(ctx, "ocm-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitResults("cluster-b", "[cluster-b] [cluster-b]")
	// No profile left: the administrator's eu counts.
	if err := profiles.Delete(ctx, "second-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitResults("cluster-b", "[cluster-b] [cluster-a cluster-b]")
}

// pullManagedBy is the manager the planner labels imports with, and the
// agents' writing halves write as.
const pullManagedBy = "mcs-controller.test"

// startPullAgent runs m's member agent, publishing into hub with m's hub
// identity, its Lease renewed every second; the returned func stops it.
func startPullAgent(t *testing.T, hub, m *testMember) func() {
	t.Helper()
	return startPullAgentWorkers(t, hub, m, 2)
}

// startPullAgentWorkers is startPullAgent with workers publishing at once.
func startPullAgentWorkers(t *testing.T, hub, m *testMember, workers int) func() {
	t.Helper()
	hubCfg := impersonateRESTConfig(t, hub.cluster, fmt.Sprintf("system:serviceaccount:%s:%s", m.id, pull.AgentServiceAccount), "system:serviceaccounts", "system:serviceaccounts:"+m.id)
	recorder, stopRecorder := eventrecorder.New(m.kube)
	t.Cleanup(stopRecorder)
	agent, err := pull.NewAgent(pull.AgentConfig{
		ClusterID: m.id,
		Member:    m.kube, MemberDynamic: dynamic.NewForConfigOrDie(m.cluster.RESTConfig()),
		Hub: kubernetes.NewForConfigOrDie(hubCfg), HubDynamic: dynamic.NewForConfigOrDie(hubCfg),
		SourceManagers: []string{"endpointslice-controller.k8s.io"},
		LeaseRenewal:   time.Second,
		Recorder:       recorder,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := agent.Run(ctx, workers); err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	}()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return stop
}

// endpointsOf creates a slice of svc as the EndpointSlice controller
// writes it (its manager, owned by svc), one ready Pod endpoint per
// address.
func endpointsOf(t *testing.T, m *testMember, svc *v1.Service, addrs ...string) *discoveryv1.EndpointSlice {
	t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    svc.Name + "-",
			Labels:          map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, v1.SchemeGroupVersion.WithKind("Service"))},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for i, addr := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: podOf(svc.Namespace, svc.Name, i)})
	}
	out, err := m.kube.DiscoveryV1().EndpointSlices(svc.Namespace).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustService(t *testing.T, m *testMember, ns, name string) *v1.Service {
	t.Helper()
	svc, err := m.kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// startPullAgentWriting runs both halves of m's member agent: the
// publishing half (startPullAgent) and the writing half, a controller
// whose one member is m, reached as the member's controller identity
// (deploy/member's RBAC), that writes what the hub's plan gives m, read
// with m's hub identity.
func startPullAgentWriting(t *testing.T, hub, m *testMember) func() {
	t.Helper()
	stopPublishing := startPullAgent(t, hub, m)
	hubCfg := impersonateRESTConfig(t, hub.cluster, fmt.Sprintf("system:serviceaccount:%s:%s", m.id, pull.AgentServiceAccount), "system:serviceaccounts", "system:serviceaccounts:"+m.id)
	memberCfg := impersonateRESTConfig(t, m.cluster, "system:serviceaccount:mcs-system:mcs-controller", "system:serviceaccounts", "system:serviceaccounts:mcs-system")
	ctrl, err := mcs.New(mcs.Config{
		Members:        []topology.Member{{ClusterID: m.id, Config: memberCfg}},
		ManagedBy:      pullManagedBy,
		EndpointTTL:    time.Minute,
		LeaseNamespace: "kube-system",
		Identity:       "agent-" + m.id,
		Workers:        2,
		HubPlan:        &mcs.HubPlanSource{Hub: kubernetes.NewForConfigOrDie(hubCfg), HubDynamic: dynamic.NewForConfigOrDie(hubCfg)},
	}, mcs.NewMetrics(metrics.NewKubeRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithValues("agent", m.id)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ctrl.Run(ctx); err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	}()
	stop := sync.OnceFunc(func() { stopPublishing(); cancel(); <-done })
	t.Cleanup(stop)
	return stop
}

// TestPullModeWritesEachMember runs pull mode whole between real
// apiservers: each member's agent publishes its exports and writes, with
// its own cluster's credentials only, what the hub's planner planned for
// it: the import with the clusterset IP the planner allocated and every
// source's endpoints, in every member with the namespace. A hub that
// is gone for longer than the endpoint TTL changes nothing in the
// members; the unexports take it all away.
func TestPullModeWritesEachMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := framework.StartTestEtcd(t)
	hub := startPullHub(t, etcd, "cluster-a", "cluster-b")
	a := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "cluster-a"}), "cluster-a")
	b := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "cluster-b"}), "cluster-b")
	for _, m := range []*testMember{a, b} {
		createNamespace(t, m, "demo")
		startPullAgentWriting(t, hub, m)
	}
	const ttl = 6 * time.Second
	_, _, _ = startPullPlanner(t, hub, ttl)

	// holds is what m holds of demo/web: the import's type, IPs and
	// clusters, and each source's addresses, in one line.
	holds := func(m *testMember) string {
		si, err := m.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		var clusters []string
		for _, c := range si.Status.Clusters {
			clusters = append(clusters, c.Cluster)
		}
		list, err := m.kube.DiscoveryV1().EndpointSlices("demo").List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=web"})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s %s clusters=%s endpoints=%s", si.Spec.Type, strings.Join(si.Spec.IPs, ","), strings.Join(clusters, ","), sourcesOf(list.Items, mcsv1beta1.LabelSourceCluster))
	}
	waitHolds := func(want string, members ...*testMember) {
		t.Helper()
		for _, m := range members {
			eventually(t, 30*time.Second, m.id+" to hold demo/web: "+want, func() (bool, string) {
				got := holds(m)
				return got == want, got
			})
		}
	}
	hubDyn := dynamic.NewForConfigOrDie(hub.cluster.RESTConfig())
	planIP := func() string {
		t.Helper()
		var ip string
		eventually(t, 30*time.Second, "the plan of demo/web to have a clusterset IP", func() (bool, string) {
			u, err := hubDyn.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("serviceplans")).Namespace(pull.PlanNamespace).Get(ctx, pull.PlanName("demo", "web"), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ips, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "import", "spec", "ips")
			if len(ips) == 1 {
				ip = ips[0]
			}
			return ip != "", fmt.Sprint(ips)
		})
		return ip
	}

	svcA := createSelectedService(t, a, "demo", "web")
	endpointsOf(t, a, svcA, "10.1.0.1")
	if _, err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip := planIP()
	waitHolds("ClusterSetIP "+ip+" clusters=cluster-a endpoints=cluster-a=10.1.0.1", a, b)
	// The conditions the planner gave cluster-a's export, on its
	// ServiceExport.
	eventually(t, 30*time.Second, "cluster-a's export to be Valid and Ready", func() (bool, string) {
		se, err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		valid := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid))
		ready := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
		return valid != nil && valid.Status == metav1.ConditionTrue && ready != nil && ready.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", se.Status.Conditions)
	})

	svcB := createSelectedService(t, b, "demo", "web")
	endpointsOf(t, b, svcB, "10.2.0.1")
	if _, err := b.mcs.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	both := "ClusterSetIP " + ip + " clusters=cluster-a,cluster-b endpoints=cluster-a=10.1.0.1;cluster-b=10.2.0.1"
	waitHolds(both, a, b)

	// The hub goes away for longer than the TTL: the members keep what
	// they hold, untouched.
	before := map[string]string{}
	for _, m := range []*testMember{a, b} {
		before[m.id] = resourceVersionsOf(t, m)
	}
	hub.cluster.Crash()
	time.Sleep(2 * ttl)
	for _, m := range []*testMember{a, b} {
		if got := holds(m); got != both {
			t.Errorf("%s with the hub down for %s: %s, want %s", m.id, 2*ttl, got, both)
		}
		if got := resourceVersionsOf(t, m); got != before[m.id] {
			t.Errorf("%s's import and slices were written while the hub was down: %s, were %s", m.id, got, before[m.id])
		}
	}
	if err := hub.cluster.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl)
	waitHolds(both, a, b)

	// The unexports: every member's import and slices go.
	for _, m := range []*testMember{a, b} {
		if err := m.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*testMember{a, b} {
		eventually(t, 30*time.Second, m.id+"'s import of demo/web to go", func() (bool, string) {
			got := holds(m)
			return strings.Contains(got, "not found"), got
		})
	}
}

// sourcesOf says, sorted, each slice's source cluster (its label
// sourceLabel) and addresses: "cluster-a=10.1.0.1;cluster-b=10.2.0.1,...".
func sourcesOf(list []discoveryv1.EndpointSlice, sourceLabel string) string {
	var sources []string
	for _, s := range list {
		var addrs []string
		for _, ep := range s.Endpoints {
			addrs = append(addrs, ep.Addresses...)
		}
		sources = append(sources, s.Labels[sourceLabel]+"="+strings.Join(addrs, ","))
	}
	slices.Sort(sources)
	return strings.Join(sources, ";")
}

// resourceVersionsOf are the resourceVersions of m's import of demo/web
// and of the slices imported with it.
func resourceVersionsOf(t *testing.T, m *testMember) string {
	t.Helper()
	ctx := context.Background()
	si, err := m.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := m.kube.DiscoveryV1().EndpointSlices("demo").List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=web"})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"import=" + si.ResourceVersion}
	for _, s := range list.Items {
		out = append(out, s.Name+"="+s.ResourceVersion)
	}
	slices.Sort(out[1:])
	return strings.Join(out, " ")
}

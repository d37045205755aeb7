package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestMCSControllerClusterProfilesAtStartup: a controller whose members
// are given only as ClusterProfiles of a hub (not itself a member) starts
// with the clusters its profiles name as it starts with contexts: it is
// ready only once their caches have synced, and a restart withdraws none
// of their endpoints from the others. With the hub unreachable at start it
// runs without them and they join once the hub answers, as members whose
// context did not answer at start-up do.
func TestMCSControllerClusterProfilesAtStartup(t *testing.T) {
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	webhook := newTokenWebhook(t, "test-signing-key")
	plugin := buildPlugin(t)
	hub := startMember(t, etcd, dir, "hub")
	b := startPluginMember(t, etcd, dir, "cluster-b", webhook)
	c := startPluginMember(t, etcd, dir, "cluster-c", webhook)
	for _, m := range []*testMember{b, c} {
		createNamespace(t, m, "demo")
	}
	profiles, providers := installInventory(t, hub, dir, plugin, true)
	// The hub is reached through a link the test can cut.
	kubeconfig := writeControllerKubeconfig(t, dir, []*testMember{hub})
	start := func(identity string) *runningController {
		// A TTL no restart of this test outlasts: each replica must
		// keep what the one before it wrote.
		return startControllerWith(t, kubeconfig, identity, 30*time.Second, func(o *app.Options) {
			o.Contexts = nil
			o.HubContext = "hub"
			o.InventoryNamespace = "fleet"
			o.InventoryAccessProviders = providers
			o.MemberRecheckPeriod = time.Second
			// The leader election Lease would be in the hub, which
			// this test takes away.
			o.LeaderElect = false
		})
	}

	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	exportService(t, c, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.3.0.1"))
	putProfile(t, profiles, clusterProfile(t, "b", b, metav1.ConditionTrue))
	putProfile(t, profiles, clusterProfile(t, "c", c, metav1.ConditionTrue))
	const both = "cluster-b=10.2.0.1 ports http:8080;cluster-c=10.3.0.1 ports http:8080"

	// Every deletion of an imported slice (from either cluster: an
	// import carries its own cluster's endpoints too), in b and in c,
	// from the first controller's start to the end.
	withdrawn := watchImportedDeletions(t, b, c)

	t.Run("profiles present at start-up are members before the controller is ready", func(t *testing.T) {
		r := start("replica-1")
		r.waitReady(t)
		// Ready means every member's caches synced: the members named
		// by profiles are among them the moment it says so.
		out, err := httpGet("http://" + r.metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "\nmcs_controller_clusters 2\n") {
			t.Errorf("ready with %q, want both profiles' clusters", metricLine(out, "mcs_controller_clusters"))
		}
		for _, m := range []*testMember{b, c} {
			waitSlices(t, m, "demo", "web", both)
		}
		waitEventOn(t, hub, "ClusterProfile", "fleet", "b", "MemberJoined")
		waitMemberCondition(t, profiles, "c", "True/Joined")
		r.stop()
	})

	t.Run("a restart withdraws no endpoint of a profile's cluster", func(t *testing.T) {
		r := start("replica-2")
		r.waitReady(t)
		// The restarted controller has worked its queues: a new export
		// reaches the other member.
		exportService(t, b, "demo", "api", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.2.0.9"))
		waitSlices(t, c, "demo", "api", "cluster-b=10.2.0.9 ports grpc:9000")
		for _, m := range []*testMember{b, c} {
			waitSlices(t, m, "demo", "web", both)
		}
		if got := withdrawn(); got != "" {
			t.Errorf("the restart withdrew imported endpoints: %s", got)
		}
		r.stop()
	})

	t.Run("with the hub unreachable at start, the profiles' clusters join once it answers", func(t *testing.T) {
		hub.link.cut()
		r := start("replica-3")
		r.waitMetric(t, "no member while the hub is away", "\nmcs_controller_clusters 0\n")
		setEndpoints(t, c, "demo", "web", "10.3.0.2")
		hub.link.restore()
		r.waitMetric(t, "both members once the hub answers", "\nmcs_controller_clusters 2\n")
		waitSlices(t, b, "demo", "web", "cluster-b=10.2.0.1 ports http:8080;cluster-c=10.3.0.2 ports http:8080")
		waitSlices(t, c, "demo", "web", "cluster-b=10.2.0.1 ports http:8080;cluster-c=10.3.0.2 ports http:8080")
		waitMemberCondition(t, profiles, "b", "True/Joined")
		// The clusters join one by one once the hub answers. None loses
		// an endpoint on the way: the first keeps the others' (their
		// source Leases, which it holds, are fresh) until they join
		// too, and none acts on a plan made before it joined.
		if got := withdrawn(); got != "" {
			t.Errorf("joining after the hub's outage withdrew imported endpoints: %s", got)
		}
	})
}

// watchImportedDeletions records every deletion of an imported
// EndpointSlice in members; the returned function says which so far (""
// for none).
func watchImportedDeletions(t *testing.T, members ...*testMember) func() string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mu sync.Mutex
	var deleted []string
	for _, m := range members {
		f := informers.NewSharedInformerFactoryWithOptions(m.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = mcsv1beta1.LabelSourceCluster
		}))
		inf := f.Discovery().V1().EndpointSlices().Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if s, ok := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); ok == nil {
				mu.Lock()
				deleted = append(deleted, m.id+":"+s)
				mu.Unlock()
			}
		}})
		f.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatalf("watching %s's slices", m.id)
		}
	}
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(deleted, ", ")
	}
}

// waitMemberCondition waits until profile name of the hub's fleet says
// "<status>/<reason>" in the controller's ClusterSetMember condition.
func waitMemberCondition(t *testing.T, profiles dynamic.Interface, name, want string) {
	t.Helper()
	eventually(t, 30*time.Second, "the ClusterSetMember condition of profile "+name, func() (bool, string) {
		u, err := profiles.Resource(inventoryv1alpha1.Resource).Namespace("fleet").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == inventory.ConditionMember {
				got := fmt.Sprintf("%v/%v", m["status"], m["reason"])
				return got == want, got
			}
		}
		return false, "no condition"
	})
}

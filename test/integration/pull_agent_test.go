package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/export"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/eventrecorder"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestPullAgentPublishes runs a member agent's publishing half between a
// real member apiserver and a real hub, with the agent's hub identity
// (cluster-a's ServiceAccount there, RBAC as deploy/hub-pull gives it): an
// export is published as a MemberExport with its Service's spec and the
// Service's trusted endpoints; slices Kubernetes did not write for the
// Service stay in the member, said on its export; changes follow; a
// restarted agent writes nothing that is already right; an unexport
// takes everything published of it away.
func TestPullAgentPublishes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := framework.StartTestEtcd(t)
	hub := startPullHub(t, etcd, "cluster-a")
	a := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "cluster-a"}), "cluster-a")
	createNamespace(t, a, "demo")

	web := createSelectedService(t, a, "demo", "web")
	sliceOf(t, a, web, "web-abcde", "endpointslice-controller.k8s.io", "10.1.0.1", "10.1.0.2")
	// Not Kubernetes' for this Service: another manager, and the
	// EndpointSlice controller's label on a slice no Service owns.
	forged := sliceOf(t, a, nil, "web-by-hand", "someone", "10.1.0.66")
	unowned := sliceOf(t, a, nil, "web-unowned", "endpointslice-controller.k8s.io", "10.1.0.67")
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"tier": "front"}}}
	se, err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, se, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	agentUser := fmt.Sprintf("system:serviceaccount:cluster-a:%s", pull.AgentServiceAccount)
	hubCfg := impersonateRESTConfig(t, hub.cluster, agentUser, "system:serviceaccounts", "system:serviceaccounts:cluster-a")
	hubDyn := dynamic.NewForConfigOrDie(hub.cluster.RESTConfig())
	// In the member, the agent's own identity, the member's mcs-controller
	// (deploy/member's RBAC, as prepareMember applies it) and
	// deploy/member-agent's Lease, nothing more.
	createNamespace(t, a, "mcs-system")
	applyRBAC(t, a.kube, repoPath(t, "deploy", "member-agent", "member-agent-rbac.yaml"))
	memberCfg := impersonateRESTConfig(t, a.cluster, "system:serviceaccount:mcs-system:mcs-controller", "system:serviceaccounts", "system:serviceaccounts:mcs-system")
	memberKube := kubernetes.NewForConfigOrDie(memberCfg)
	start := func() (*pull.Agent, context.CancelFunc) {
		recorder, stopRecorder := eventrecorder.New(memberKube)
		agent, err := pull.NewAgent(pull.AgentConfig{
			ClusterID: "cluster-a",
			Member:    memberKube, MemberDynamic: dynamic.NewForConfigOrDie(memberCfg),
			Hub: kubernetes.NewForConfigOrDie(hubCfg), HubDynamic: dynamic.NewForConfigOrDie(hubCfg),
			SourceManagers: []string{"endpointslice-controller.k8s.io", "endpointslice-mirroring-controller.k8s.io"},
			Recorder:       recorder,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := agent.Run(ctx, 1); err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		}()
		stop := sync.OnceFunc(func() { cancel(); <-done; stopRecorder() })
		t.Cleanup(stop)
		return agent, stop
	}
	agent, stop := start()

	published := func(ns, name string) (*hubv1alpha1.MemberExport, error) {
		u, err := hubDyn.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("memberexports")).Namespace("cluster-a").Get(ctx, pull.MemberExportName(ns, name), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		me := &hubv1alpha1.MemberExport{}
		return me, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, me)
	}
	publishedSlices := func(ns, name string) string {
		list, err := hub.kube.DiscoveryV1().EndpointSlices("cluster-a").List(ctx, metav1.ListOptions{
			LabelSelector: hubv1alpha1.LabelServiceNamespace + "=" + ns + "," + hubv1alpha1.LabelServiceName + "=" + name})
		if err != nil {
			return err.Error()
		}
		var out []string
		for _, s := range list.Items {
			var addrs []string
			for _, ep := range s.Endpoints {
				addrs = append(addrs, ep.Addresses...)
			}
			owner := "no owner"
			if len(s.OwnerReferences) == 1 {
				owner = s.OwnerReferences[0].Kind + " " + s.OwnerReferences[0].Name
			}
			out = append(out, fmt.Sprintf("%s=%s (%s, %s)", s.Name, strings.Join(addrs, ","), s.Labels[discoveryv1.LabelManagedBy], owner))
		}
		slices.Sort(out)
		return strings.Join(out, ";")
	}
	waitPublished := func(ns, name, what string, ok func(*hubv1alpha1.MemberExport) bool) *hubv1alpha1.MemberExport {
		t.Helper()
		var me *hubv1alpha1.MemberExport
		eventually(t, 30*time.Second, "the hub to hold "+ns+"/"+name+" "+what, func() (bool, string) {
			var err error
			me, err = published(ns, name)
			return err == nil && ok(me), fmt.Sprintf("%+v %v", me, err)
		})
		return me
	}
	waitSlicesPublished := func(ns, name, want string) {
		t.Helper()
		eventually(t, 30*time.Second, "the hub to hold "+ns+"/"+name+"'s endpoints "+want, func() (bool, string) {
			got := publishedSlices(ns, name)
			return got == want, got
		})
	}

	// Published: the export's spec and time, the Service's spec, the
	// trusted slice alone, owned by the MemberExport.
	me := waitPublished("demo", "web", "with the Service's spec", func(me *hubv1alpha1.MemberExport) bool { return me.Spec.ServiceSpec != nil })
	if !me.Spec.ExportCreated.Equal(&se.CreationTimestamp) || me.Spec.ExportedLabels["tier"] != "front" || me.Spec.NamespaceCreated == nil ||
		me.Spec.Service != (hubv1alpha1.ServiceName{Namespace: "demo", Name: "web"}) ||
		me.Spec.ServiceSpec.SessionAffinity != v1.ServiceAffinityClientIP || len(me.Spec.ServiceSpec.Ports) != 1 || me.Spec.ServiceSpec.Ports[0].TargetPort != intstr.FromInt32(8080) {
		t.Errorf("published export: %+v, want demo/web created %v, tier=front, ClientIP affinity, port 80->8080", me.Spec, se.CreationTimestamp)
	}
	trusted := "demo.web-abcde=10.1.0.1,10.1.0.2 (" + pull.AgentManager + ", MemberExport demo.web)"
	waitSlicesPublished("demo", "web", trusted)
	waitEventFor(t, a, forged, string(export.SourceUntrustedManager))
	waitEventFor(t, a, unowned, string(export.SourceNotOwned))

	// Changes follow: an endpoint more, a port changed.
	s, err := a.kube.DiscoveryV1().EndpointSlices("demo").Get(ctx, "web-abcde", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: podOf("demo", "web", 3)})
	if _, err := a.kube.DiscoveryV1().EndpointSlices("demo").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	trusted = "demo.web-abcde=10.1.0.1,10.1.0.2,10.1.0.3 (" + pull.AgentManager + ", MemberExport demo.web)"
	waitSlicesPublished("demo", "web", trusted)
	if _, err := a.kube.CoreV1().Services("demo").Patch(ctx, "web", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/ports/0/port","value":8080}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPublished("demo", "web", "with port 8080", func(me *hubv1alpha1.MemberExport) bool {
		return me.Spec.ServiceSpec != nil && me.Spec.ServiceSpec.Ports[0].Port == 8080
	})

	// A restart writes nothing that is already right: a second export,
	// published after the restart, is all the new agent writes (one
	// worker takes the keys in order, web's first).
	stop()
	agent, _ = start()
	db := createSelectedService(t, a, "demo", "db")
	sliceOf(t, a, db, "db-xyzzy", "endpointslice-controller.k8s.io", "10.1.0.9")
	if _, err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlicesPublished("demo", "db", "demo.db-xyzzy=10.1.0.9 ("+pull.AgentManager+", MemberExport demo.db)")
	if got := agent.Writes(); got != 2 {
		t.Errorf("the restarted agent wrote %d times, want 2 (db's MemberExport and slice), nothing of web's", got)
	}

	// The Service goes: the export stays published, without a spec (the
	// planner finds it invalid) and without endpoints.
	if err := a.kube.CoreV1().Services("demo").Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPublished("demo", "db", "without a Service", func(me *hubv1alpha1.MemberExport) bool { return me.Spec.ServiceSpec == nil })
	waitSlicesPublished("demo", "db", "")

	// An unexport takes everything published of it away.
	if err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "demo/web unpublished", func() (bool, string) {
		_, err := published("demo", "web")
		got := publishedSlices("demo", "web")
		return apierrors.IsNotFound(err) && got == "", fmt.Sprintf("%v, slices %q", err, got)
	})
}

// TestPullAgentPublishesMemberClusterLast: a new member's agent publishes
// its MemberCluster, which makes the planner count the member in, only
// once it has published every export its cluster had when it started, so
// that a planner starting beside it plans each name once with all of them.
// As many workers as exports (as many as the member's quota admits)
// publish them at once; the MemberCluster, taken from the queue right
// after them by the first worker free, would otherwise be written while
// the others are still publishing. The order is read from the hub's
// resourceVersions: opaque to clients, but one etcd revision counter
// here, and nothing else writes these objects in this test.
func TestPullAgentPublishesMemberClusterLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := framework.StartTestEtcd(t)
	hub := startPullHub(t, etcd, "cluster-a")
	a := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "cluster-a"}), "cluster-a")
	createNamespace(t, a, "demo")
	exports := int(testMemberLimits.Exports)
	for i := range exports {
		name := fmt.Sprintf("web%d", i)
		svc := createSelectedService(t, a, "demo", name)
		endpointsOf(t, a, svc, fmt.Sprintf("10.1.0.%d", i+1))
		if _, err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startPullAgentWorkers(t, hub, a, exports)
	hubDyn := dynamic.NewForConfigOrDie(hub.cluster.RESTConfig())
	var member *unstructured.Unstructured
	eventually(t, 60*time.Second, "cluster-a's MemberCluster", func() (bool, string) {
		var err error
		member, err = hubDyn.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("memberclusters")).Namespace("cluster-a").Get(ctx, hubv1alpha1.MemberClusterName, metav1.GetOptions{})
		return err == nil, errString(err)
	})
	list, err := hubDyn.Resource(hubv1alpha1.SchemeGroupVersion.WithResource("memberexports")).Namespace("cluster-a").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != exports {
		t.Fatalf("%d MemberExports when the MemberCluster was published, want every one of the %d exports", len(list.Items), exports)
	}
	memberRV, err := strconv.ParseUint(member.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, me := range list.Items {
		rv, err := strconv.ParseUint(me.GetResourceVersion(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if rv > memberRV {
			t.Errorf("MemberExport %s written at %d, after the MemberCluster (%d)", me.GetName(), rv, memberRV)
		}
	}
}

// createSelectedService creates a Service with a selector, port 80 to
// 8080 and ClientIP affinity in m.
func createSelectedService(t *testing.T, m *testMember, ns, name string) *v1.Service {
	t.Helper()
	svc, err := m.kube.CoreV1().Services(ns).Create(context.Background(), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": name}, SessionAffinity: v1.ServiceAffinityClientIP,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// sliceOf creates a slice labelled with the Service name its name starts
// with, written by manager, owned by owner (nil: by nobody), one Pod
// endpoint per address.
func sliceOf(t *testing.T, m *testMember, owner *v1.Service, name, manager string, addrs ...string) *discoveryv1.EndpointSlice {
	t.Helper()
	service, _, _ := strings.Cut(name, "-")
	s := slice(name, map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: manager})
	if owner != nil {
		s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, v1.SchemeGroupVersion.WithKind("Service"))}
	}
	s.Endpoints = nil
	for i, addr := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: podOf("demo", service, i)})
	}
	out, err := m.kube.DiscoveryV1().EndpointSlices("demo").Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitEventFor waits for an event in m about (related to) slice s, of one
// of reasons.
func waitEventFor(t *testing.T, m *testMember, s *discoveryv1.EndpointSlice, reasons ...string) {
	t.Helper()
	eventually(t, 30*time.Second, "an event on "+s.Name+" ("+strings.Join(reasons, " or ")+")", func() (bool, string) {
		list, err := m.kube.EventsV1().Events(s.Namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Related != nil && e.Related.UID == s.UID && slices.Contains(reasons, e.Reason) {
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
		return false, strings.Join(seen, ",")
	})
}

// TestPullAgentCommand runs `mcs-controller member-agent` as a member runs
// it: with a hub identity that is another member's agent (a renamed
// cluster, or another's token) it does not start and says which is which;
// with its own, it publishes; with `mcs-controller planner` running in the
// hub, it writes the plan into its cluster.
func TestPullAgentCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := framework.StartTestEtcd(t)
	hub := startPullHub(t, etcd, "cluster-a", "cluster-b")
	a := prepareMember(t, framework.StartTestCluster(t, etcd, framework.ClusterOptions{Name: "cluster-a"}), "cluster-a")
	createNamespace(t, a, "demo")
	web := createSelectedService(t, a, "demo", "web")
	sliceOf(t, a, web, "web-abcde", "endpointslice-controller.k8s.io", "10.1.0.1")
	if _, err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agentOf := func(id string) string {
		return impersonateConfig(t, hub.cluster, fmt.Sprintf("system:serviceaccount:%s:%s", id, pull.AgentServiceAccount), "system:serviceaccounts", "system:serviceaccounts:"+id)
	}
	o := app.NewAgentOptions()
	o.Kubeconfig, o.LeaderElect, o.ClusterIDWait = a.cluster.Kubeconfig(), false, 10*time.Second
	// It serves what the controller serves, on addresses of its own here.
	metricsPort, healthPort := mustFreePort(t), mustFreePort(t)
	o.MetricsBindAddress, o.HealthzBindAddress, o.SecureServing.BindPort = fmt.Sprintf("127.0.0.1:%d", metricsPort), fmt.Sprintf("127.0.0.1:%d", healthPort), 0

	o.HubKubeconfig = agentOf("cluster-b")
	err := app.RunAgent(ctx, o)
	if err == nil || !strings.Contains(err.Error(), `says it is "cluster-a"`) || !strings.Contains(err.Error(), `cluster "cluster-b"'s agent`) {
		t.Errorf("cluster-a with cluster-b's hub identity: %v, want refused, naming both", err)
	}
	if list, err := hub.kube.DiscoveryV1().EndpointSlices("cluster-b").List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) > 0 {
		t.Errorf("cluster-b's hub namespace holds %v (%v), want nothing", list, err)
	}

	o.HubKubeconfig = agentOf("cluster-a")
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.RunAgent(runCtx, o) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the agent: %v", err)
		}
	}()
	eventually(t, 30*time.Second, "cluster-a's export published by the command", func() (bool, string) {
		list, err := hub.kube.DiscoveryV1().EndpointSlices("cluster-a").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 1 && list.Items[0].Name == "demo.web-abcde", fmt.Sprint(len(list.Items))
	})

	// `mcs-controller planner` in the hub, with its identity there: the
	// agent command writes the plan into cluster-a.
	po := app.NewOptions()
	po.Kubeconfig = impersonateConfig(t, hub.cluster, "system:serviceaccount:mcs-system:mcs-planner", "system:serviceaccounts", "system:serviceaccounts:mcs-system")
	po.LeaderElect, po.ClusterSetIPCIDRs = false, []string{"10.250.0.0/24"}
	plannerHealthPort := mustFreePort(t)
	po.MetricsBindAddress, po.HealthzBindAddress, po.SecureServing.BindPort = "0", fmt.Sprintf("127.0.0.1:%d", plannerHealthPort), 0
	// cluster-b's agent never comes: the planner waits this long for its
	// MemberCluster (as push mode's controller for a member's caches),
	// then plans without it.
	po.InitialSyncTimeout = 3 * time.Second
	plannerDone := make(chan error, 1)
	go func() { plannerDone <- app.RunPlanner(runCtx, po) }()
	defer func() {
		cancel()
		if err := <-plannerDone; err != nil {
			t.Errorf("the planner: %v", err)
		}
	}()
	eventually(t, 30*time.Second, "cluster-a to hold the import the planner planned", func() (bool, string) {
		si, err := a.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(si.Spec.IPs) == 1 && strings.HasPrefix(si.Spec.IPs[0], "10.250.0."), fmt.Sprint(si.Spec.IPs)
	})
	// The planner is ready once it plans: a member whose agent never came
	// (cluster-b) does not hold its rollouts (mcs_planner_members says it
	// is unsynced, and MCSPlannerMemberUnsynced alerts).
	eventually(t, 30*time.Second, "the planner's /readyz without cluster-b's agent", func() (bool, string) {
		out, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/readyz", plannerHealthPort))
		return err == nil && strings.TrimSpace(out) == "ok", out + errString(err)
	})
	// Its health and its writing half's metrics, as an operator's probes
	// and Prometheus read them: ready with both halves synced, and the
	// controller's metrics of the writes into cluster-a.
	eventually(t, 30*time.Second, "the agent's /readyz", func() (bool, string) {
		out, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort))
		return err == nil && strings.TrimSpace(out) == "ok", out + errString(err)
	})
	eventually(t, 30*time.Second, "the agent's /metrics to count its writes into cluster-a", func() (bool, string) {
		out, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		return err == nil && strings.Contains(out, `mcs_controller_member_sync_duration_seconds_count{cluster="cluster-a",result="success"}`), errString(err)
	})
}

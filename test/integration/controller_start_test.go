package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestMCSControllerWithAMemberDownAtStart starts the controller while one
// member cannot be reached: the others work without it (an export of
// cluster-a is imported in cluster-a), the unreachable context is counted
// as pending, and once the member answers it joins the running controller
// and is imported into.
func TestMCSControllerWithAMemberDownAtStart(t *testing.T) {
	ms, kubeconfig := membersWithDemo(t, "cluster-a", "cluster-b")
	a, b := ms[0], ms[1]
	b.link.cut()

	const ttl = 8 * time.Second
	first := startController(t, kubeconfig, "replica-1", ttl)
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	waitImport(t, a, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		return len(si.Spec.IPs) == 1 && clustersString(si) == "cluster-a"
	})
	waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
	first.waitMetric(t, "the unreachable member in the controller's metrics", `mcs_controller_inventory_members{source="context",state="pending"} 1`)

	// cluster-b answers: it joins the running controller, no restart.
	b.link.restore()
	waitImport(t, b, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		return len(si.Spec.IPs) == 1 && clustersString(si) == "cluster-a"
	})
	waitSlices(t, b, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
	first.waitMetric(t, "both members joined", `mcs_controller_inventory_members{source="context",state="joined"} 2`)
	select {
	case <-first.exited:
		t.Fatalf("the controller exited when cluster-b came back: %v", first.err)
	default:
	}
}

// TestMCSControllerRefusesClusterSetRangesOverlappingServices: a member
// whose Service range overlaps the clusterset ranges would have clusterset
// IPs that are some Service's IPs. The controller refuses to run, saying
// which range of which member.
func TestMCSControllerRefusesClusterSetRangesOverlappingServices(t *testing.T) {
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	a := startMember(t, etcd, dir, "cluster-a")
	_, err := a.kube.NetworkingV1().ServiceCIDRs().Create(context.Background(), &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "overlap"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.250.16.0/24"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeControllerKubeconfig(t, dir, []*testMember{a})
	r := startController(t, kubeconfig, "replica-1", 8*time.Second)
	select {
	case <-r.exited:
		if r.err == nil || !strings.Contains(r.err.Error(), "ServiceCIDR overlap of cluster cluster-a 10.250.16.0/24") {
			t.Errorf("the controller exited with %v, want an error naming the overlapping range", r.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the controller runs with a clusterset range inside a member's Service range")
	}
}

// TestMCSControllerNamedIDsNeedAStatement, an attack: cluster-c's
// administrator sets its ClusterProperty to cluster-b, an ID whose
// cluster is away and which --export-namespaces lets export from any
// namespace, and waits for the controller to restart (an upgrade, a
// drain, a leader change), which forgets what cluster-c first joined as.
// cluster-c's context states no ID: it is refused, never served as
// cluster-b; given its own ID back it is served as cluster-c, confined
// as the operator confines a cluster it does not name.
func TestMCSControllerNamedIDsNeedAStatement(t *testing.T) {
	ms, kubeconfig := membersWithDemo(t, "cluster-a", "cluster-c")
	a, c := ms[0], ms[1]
	setClusterID(t, c, "cluster-b")
	startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, func(o *app.Options) {
		o.ExportNamespaces = []string{"cluster-a=*", "cluster-b=*"}
		o.MemberClusterIDs = []string{"cluster-a=cluster-a"}
		o.MemberRecheckPeriod = 2 * time.Second
	})
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	exportService(t, c, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.3.0.66"))
	waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
	waitImport(t, a, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a" })
	// Told on its own ClusterProperty, with why and what to do.
	eventually(t, 30*time.Second, "a MemberRefused event in cluster-c saying why", func() (bool, string) {
		events, err := c.kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "ClusterProperty" && e.Reason == "MemberRefused" {
				if strings.Contains(e.Message, `holds "cluster-b", which the operator's --export-namespaces names`) && strings.Contains(e.Message, "--member-cluster-ids") {
					return true, ""
				}
				got = append(got, e.Message)
			}
		}
		return false, strings.Join(got, "; ")
	})
	// Nothing of it was served as cluster-b meanwhile.
	waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")

	// Its own ID back: a member again, and confined: --export-namespaces
	// names others, not cluster-c.
	setClusterID(t, c, "cluster-c")
	se := waitExportConditions(t, c, "demo", "web", "Valid=False/NamespaceNotAllowed Ready=False/Failed Conflict=False/NoConflicts")
	if msg := conditionMessage(se, "Valid"); !strings.Contains(msg, "cluster-c") {
		t.Errorf("cluster-c's export says %q, want its confinement", msg)
	}
	waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
}

// TestMCSControllerExportNamespacesPerMember: the operator lets cluster-b
// (another team's) export only from its own namespace. Its export of a
// name in a shared namespace is refused and publishes nothing; its export
// from its own namespace is imported everywhere.
func TestMCSControllerExportNamespacesPerMember(t *testing.T) {
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	a := startMember(t, etcd, dir, "cluster-a")
	b := startMember(t, etcd, dir, "cluster-b")
	for _, m := range []*testMember{a, b} {
		createNamespace(t, m, "demo")
		createNamespace(t, m, "team-b")
	}
	kubeconfig := writeControllerKubeconfig(t, dir, []*testMember{a, b})
	startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, func(o *app.Options) {
		o.ExportNamespaces = []string{"cluster-a=*", "cluster-b=team-b"}
		// The IDs the confinement names are stated (NamedIDs).
		o.MemberClusterIDs = []string{"cluster-a=cluster-a", "cluster-b=cluster-b"}
	})
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.66"))
	exportService(t, b, "team-b", "api", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	se := waitExportConditions(t, b, "demo", "web", "Valid=False/NamespaceNotAllowed Ready=False/Failed Conflict=False/NoConflicts")
	if msg := meta.FindStatusCondition(se.Status.Conditions, "Valid").Message; !strings.Contains(msg, "cluster-b may export only from namespaces [team-b]") {
		t.Errorf("Valid message does not say why: %s", msg)
	}
	waitExportConditions(t, a, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
	for _, m := range []*testMember{a, b} {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a" })
		waitSlices(t, m, "team-b", "api", "cluster-b=10.2.0.1 ports http:8080")
	}

	// Consumer clusters: team-b/api is imported only where its exporter
	// says; changing the list converges without a restart.
	ctx := context.Background()
	setExported(t, b, "team-b", "api", nil, map[string]string{"multiclusterservices.k8s.io/consumer-clusters": "cluster-b"})
	eventually(t, 30*time.Second, "team-b/api gone from cluster-a, a non-consumer", func() (bool, string) {
		_, err := a.mcs.MulticlusterV1beta1().ServiceImports("team-b").Get(ctx, "api", metav1.GetOptions{})
		n := len(importedSlices(t, a, "team-b", "api"))
		return apierrors.IsNotFound(err) && n == 0, fmt.Sprintf("import err %v, %d slices", err, n)
	})
	waitSlices(t, b, "team-b", "api", "cluster-b=10.2.0.1 ports http:8080")
	setExported(t, b, "team-b", "api", nil, map[string]string{"multiclusterservices.k8s.io/consumer-clusters": "cluster-a,cluster-b"})
	waitSlices(t, a, "team-b", "api", "cluster-b=10.2.0.1 ports http:8080")

	// Provider clusters: a exports team-b/api too, and serves it, until
	// b's export (the oldest, whose annotations count) names b alone.
	exportService(t, a, "team-b", "api", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.8"))
	for _, m := range []*testMember{a, b} {
		waitSlices(t, m, "team-b", "api", "cluster-a=10.1.0.8 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
	}
	setExported(t, b, "team-b", "api", nil, map[string]string{"multiclusterservices.k8s.io/provider-clusters": "cluster-b"})
	for _, m := range []*testMember{a, b} {
		waitSlices(t, m, "team-b", "api", "cluster-b=10.2.0.1 ports http:8080")
		waitImport(t, m, "team-b", "api", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-b" })
	}
	se = waitExportConditions(t, a, "team-b", "api", "Valid=True/Valid Ready=False/NotAProvider Conflict=True/AnnotationsConflict")
	if msg := meta.FindStatusCondition(se.Status.Conditions, "Ready").Message; !strings.Contains(msg, "[cluster-b]") {
		t.Errorf("Ready message does not name the providers: %s", msg)
	}
}

// TestMCSControllerStartsWhateverAMemberSaysOfItself: a member's
// administrator can delete the member's ClusterProperty, set it to
// another member's ID, or forbid the controller to read it. None of it
// keeps the controller from starting (an upgrade, a drain, a leader
// change would otherwise stop the clusterset's control plane until an
// operator stepped in): the member is refused and counted, the others
// are served. A disputed ID goes to the member the operator states it
// for, and to neither claimant without a statement.
func TestMCSControllerStartsWhateverAMemberSaysOfItself(t *testing.T) {
	ctx := context.Background()
	ms, kubeconfig := membersWithDemo(t, "cluster-a", "cluster-b", "cluster-c")
	a, b, c := ms[0], ms[1], ms[2]
	const ttl = 8 * time.Second
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	servedFromB := func(si *mcsv1beta1.ServiceImport) bool {
		return len(si.Spec.IPs) == 1 && clustersString(si) == "cluster-b"
	}
	runs := func(r *runningController) {
		t.Helper()
		select {
		case <-r.exited:
			t.Fatalf("the controller exited: %v", r.err)
		case <-time.After(2 * time.Second):
		}
	}
	cProperty := dynamic.NewForConfigOrDie(c.cluster.RESTConfig()).Resource(aboutv1alpha1.Resource)

	// c deletes its ClusterProperty.
	if err := cProperty.Delete(ctx, aboutv1alpha1.ClusterIDProperty, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := startController(t, kubeconfig, "replica-1", ttl)
	waitImport(t, a, "demo", "web", servedFromB)
	r.waitMetric(t, "c refused for its missing ID", `mcs_controller_inventory_members{source="context",state="refused"} 1`)
	r.waitMetric(t, "a and b joined", `mcs_controller_inventory_members{source="context",state="joined"} 2`)
	runs(r)
	r.stop()

	// c says it is cluster-b, the exporter. Stated for neither, the ID
	// is disputed: neither is served as cluster-b, and nothing of c is
	// served under it; a still is.
	if _, err := cProperty.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": aboutv1alpha1.SchemeGroupVersion.String(), "kind": "ClusterProperty",
		"metadata": map[string]any{"name": aboutv1alpha1.ClusterIDProperty},
		"spec":     map[string]any{"value": "cluster-b"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = startController(t, kubeconfig, "replica-2", ttl)
	r.waitMetric(t, "b and c refused over the disputed ID", `mcs_controller_inventory_members{source="context",state="refused"} 2`)
	r.waitMetric(t, "a joined", `mcs_controller_inventory_members{source="context",state="joined"} 1`)
	runs(r)
	if _, err := c.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("c, refused, has an import of demo/web: %v", err)
	}
	r.stop()

	// The operator states cluster-b for b's context: b keeps its ID, c
	// stays refused, and a imports b's export again.
	r = startControllerWith(t, kubeconfig, "replica-3", ttl, func(o *app.Options) { o.MemberClusterIDs = []string{"cluster-b=cluster-b"} })
	waitImport(t, a, "demo", "web", servedFromB)
	r.waitMetric(t, "c refused for the ID stated for b", `mcs_controller_inventory_members{source="context",state="refused"} 1`)
	r.waitMetric(t, "a and b joined", `mcs_controller_inventory_members{source="context",state="joined"} 2`)
	runs(r)
	r.stop()

	// c forbids the controller to read its ClusterProperty.
	role, err := c.kube.RbacV1().ClusterRoles().Get(ctx, "multicluster:mcs-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "clusterproperties") })
	if _, err := c.kube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = startController(t, kubeconfig, "replica-4", ttl)
	waitImport(t, a, "demo", "web", servedFromB)
	r.waitMetric(t, "c refused for the ID it will not show", `mcs_controller_inventory_members{source="context",state="refused"} 1`)
	runs(r)
}

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestMCSControllerInventory: members listed by kubeconfig Secrets in the
// hub join and leave a running controller. A member added is served with
// no writes into the others beyond what it exports; a Secret whose
// kubeconfig would run a command is refused; a member removed leaves no
// endpoints anywhere and nothing of the controller's in itself; a cluster
// whose ID changes is refused, never served under an ID it chose.
func TestMCSControllerInventory(t *testing.T) {
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	a := startMember(t, etcd, dir, "cluster-a")
	b := startMember(t, etcd, dir, "cluster-b")
	c := startMember(t, etcd, dir, "cluster-c")
	for _, m := range []*testMember{a, b, c} {
		createNamespace(t, m, "demo")
	}
	createNamespace(t, a, "mcs-system")
	applyRBAC(t, a.kube, repoPath(t, "deploy", "mcs-controller", "inventory-rbac.yaml"))
	// The hub, cluster-a, is also a member, given as a context.
	kubeconfig := writeControllerKubeconfig(t, dir, []*testMember{a})
	r := startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, func(o *app.Options) {
		o.Contexts = []string{"cluster-a"}
		o.MemberSecretsNamespace = "mcs-system"
		o.HubContext = "cluster-a"
		o.MemberRecheckPeriod = time.Second
	})
	r.waitReady(t)
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
	const both = "cluster-a=10.1.0.1 ports http:8080;cluster-b=10.2.0.1 ports http:8080"

	t.Run("a Secret added is a member joining", func(t *testing.T) {
		start := time.Now()
		memberSecret(t, a, "cluster-b", memberKubeconfig(t, b, nil))
		waitSlices(t, a, "demo", "web", both)
		waitSlices(t, b, "demo", "web", both)
		t.Logf("cluster-b served %s after its Secret was created", time.Since(start).Round(time.Millisecond))
		waitEventOn(t, a, "Secret", "mcs-system", "cluster-b", "MemberJoined")
		r.waitMetric(t, "one joined Secret", `mcs_controller_inventory_members{source="secret",state="joined"} 1`)
		r.waitMetric(t, "two members", "\nmcs_controller_clusters 2\n")
	})

	t.Run("a member joining writes nothing into the others", func(t *testing.T) {
		before := snapshot(t, []*testMember{a, b}, "demo", "web")
		memberSecret(t, a, "cluster-c", memberKubeconfig(t, c, nil))
		waitSlices(t, c, "demo", "web", both)
		waitImport(t, c, "demo", "web", importReady)
		r.waitMetric(t, "three members", "\nmcs_controller_clusters 3\n")
		// Absence of writes needs a window: the others' queues were
		// worked for every name when c joined.
		time.Sleep(2 * time.Second)
		if after := snapshot(t, []*testMember{a, b}, "demo", "web"); after != before {
			t.Errorf("cluster-c joining changed the others:\nbefore %s\n after %s", before, after)
		}
	})

	t.Run("a kubeconfig that would run a command is refused", func(t *testing.T) {
		pwned := filepath.Join(t.TempDir(), "pwned")
		memberSecret(t, a, "evil", memberKubeconfig(t, b, func(u *clientcmdapi.AuthInfo) {
			u.Token = ""
			u.Exec = &clientcmdapi.ExecConfig{Command: "touch", Args: []string{pwned}, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		}))
		waitEventOn(t, a, "Secret", "mcs-system", "evil", "MemberRefused")
		r.waitMetric(t, "one refused Secret", `mcs_controller_inventory_members{source="secret",state="refused"} 1`)
		if _, err := os.Stat(pwned); err == nil {
			t.Fatal("the controller ran the exec plugin of a member Secret")
		}
		r.waitMetric(t, "still three members", "\nmcs_controller_clusters 3\n")
	})

	t.Run("a Secret deleted is a member leaving", func(t *testing.T) {
		if err := a.kube.CoreV1().Secrets("mcs-system").Delete(context.Background(), "cluster-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, m := range []*testMember{a, c} {
			waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
			waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a" })
			eventually(t, 30*time.Second, "cluster-b's source Lease gone from "+m.id, func() (bool, string) {
				_, err := m.kube.CoordinationV1().Leases("kube-system").Get(context.Background(), "mcs-source-cluster-b", metav1.GetOptions{})
				return apierrors.IsNotFound(err), errString(err)
			})
		}
		eventually(t, 30*time.Second, "nothing of the controller's left in cluster-b", func() (bool, string) {
			imports, err := b.mcs.MulticlusterV1beta1().ServiceImports("").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			slices := importedSlices(t, b, "demo", "web")
			return len(imports.Items) == 0 && len(slices) == 0, slicesString(slices)
		})
		se := waitExportConditions(t, b, "demo", "web", "Valid=True/Valid Ready=False/Failed Conflict=False/NoConflicts")
		if msg := conditionMessage(se, "Ready"); !strings.Contains(msg, "no longer a member") {
			t.Errorf("b's export after leaving says %q", msg)
		}
		waitEventOn(t, a, "Secret", "mcs-system", "cluster-b", "MemberLeft")
		r.waitMetric(t, "two members", "\nmcs_controller_clusters 2\n")
	})

	t.Run("attack: a member renames itself and is refused, never served under the new ID", func(t *testing.T) {
		exportService(t, c, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.3.0.1"))
		waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080;cluster-c=10.3.0.1 ports http:8080")
		// cluster-c's administrator changes its ClusterProperty, e.g. to
		// escape --export-namespaces: it leaves, and nothing of it is
		// published as cluster-d.
		setClusterID(t, c, "cluster-d")
		waitEventOn(t, a, "Secret", "mcs-system", "cluster-c", "MemberRefused")
		// Told in the member too: on its ClusterProperty, and in its
		// export's Ready condition.
		waitEventOn(t, c, "ClusterProperty", "default", "cluster.clusterset.k8s.io", "MemberRefused")
		se := waitExportConditions(t, c, "demo", "web", "Valid=True/Valid Ready=False/Failed Conflict=False/NoConflicts")
		if msg := conditionMessage(se, "Ready"); !strings.Contains(msg, `joined as cluster "cluster-c"`) || !strings.Contains(msg, `holds "cluster-d"`) {
			t.Errorf("c's export after its refusal says %q", msg)
		}
		waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
		waitImport(t, a, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a" })
		r.waitMetric(t, "cluster-c refused beside evil", `mcs_controller_inventory_members{source="secret",state="refused"} 2`)
		// Back to the ID it joined as: served again.
		setClusterID(t, c, "cluster-c")
		waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080;cluster-c=10.3.0.1 ports http:8080")
		waitImport(t, a, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a,cluster-c" })
	})
}

// memberSecret creates a member Secret in the hub's mcs-system.
func memberSecret(t *testing.T, hub *testMember, name string, kubeconfig []byte) {
	t.Helper()
	_, err := hub.kube.CoreV1().Secrets("mcs-system").Create(context.Background(), &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{inventory.DefaultSelector: "true"}},
		Data:       map[string][]byte{inventory.KubeconfigKey: kubeconfig},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// memberKubeconfig returns a kubeconfig reaching m as the controller's
// user, changed by mutate, as a Secret holds it.
func memberKubeconfig(t *testing.T, m *testMember, mutate func(*clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	kc := controllerKubeconfig(t, m)
	for _, u := range kc.AuthInfos {
		if mutate != nil {
			mutate(u)
		}
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// setClusterID changes a member's cluster ID (its ClusterProperty).
func setClusterID(t *testing.T, m *testMember, id string) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(m.cluster.RESTConfig())
	prop, err := dyn.Resource(aboutv1alpha1.Resource).Get(context.Background(), aboutv1alpha1.ClusterIDProperty, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(prop.Object, id, "spec", "value"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(aboutv1alpha1.Resource).Update(context.Background(), prop, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func conditionMessage(se *mcsv1beta1.ServiceExport, typ string) string {
	for _, c := range se.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

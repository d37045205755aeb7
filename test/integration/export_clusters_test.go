package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/features"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestExportClusters: with the MultiClusterServiceExportClusters gate on,
// each export's status.clusters names the members the service is
// imported in (those with its namespace), follows a namespace created
// later, and an invalid export names none; with the gate off
// the field is never written (TestClusterSelectionGateOff's controller
// runs without it).
func TestExportClusters(t *testing.T) {
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	a := startMember(t, etcd, dir, "cluster-a")
	b := startMember(t, etcd, dir, "cluster-b")
	c := startMember(t, etcd, dir, "cluster-c")
	for _, m := range []*testMember{a, b} {
		createNamespace(t, m, "demo")
	}
	startControllerWith(t, writeControllerKubeconfig(t, dir, []*testMember{a, b, c}), "replica-1", 8*time.Second, func(o *app.Options) {
		if err := o.FeatureGates.SetFromMap(map[string]bool{string(features.MultiClusterServiceExportClusters): true}); err != nil {
			t.Fatal(err)
		}
	})
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	for _, m := range []*testMember{a, b} {
		waitExportedTo(t, m, "demo", "web", "cluster-a,cluster-b")
		waitExportConditions(t, m, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
	}
	createNamespace(t, c, "demo")
	for _, m := range []*testMember{a, b} {
		waitExportedTo(t, m, "demo", "web", "cluster-a,cluster-b,cluster-c")
	}
	// b's Service gone: its export is invalid and exported nowhere; a's
	// still goes to the three.
	if err := b.kube.CoreV1().Services("demo").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitExportConditions(t, b, "demo", "web", "Valid=False/NoService Ready=False/Failed Conflict=False/NoConflicts")
	waitExportedTo(t, a, "demo", "web", "cluster-a,cluster-b,cluster-c")
	waitExportedTo(t, b, "demo", "web", "")
}

// waitExportedTo waits until m's export ns/name says, in status.clusters,
// want (comma separated).
func waitExportedTo(t *testing.T, m *testMember, ns, name, want string) {
	t.Helper()
	api := dynamic.NewForConfigOrDie(m.cluster.RESTConfig()).Resource(csv1beta1.SchemeGroupVersion.WithResource("serviceexports")).Namespace(ns)
	eventually(t, 30*time.Second, fmt.Sprintf("status.clusters of export %s/%s in %s", ns, name, m.id), func() (bool, string) {
		u, err := api.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := strings.Join(statusClustersOf(u.Object), ",")
		return got == want, fmt.Sprintf("%q (status %v)", got, u.Object["status"])
	})
}

func statusClustersOf(obj map[string]any) []string {
	status, _ := obj["status"].(map[string]any)
	entries, _ := status["clusters"].([]any)
	var out []string
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok {
			out = append(out, fmt.Sprint(m["cluster"]))
		}
	}
	return out
}

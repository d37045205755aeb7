package framework_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestClusters starts one etcd and two clusters sharing it, and checks that
// they are isolated, that extra users and kubeconfigs work, and (when
// kube-controller-manager is built) that a ready Pod becomes an endpoint.
func TestClusters(t *testing.T) {
	framework.SkipUnlessBuilt(t, "etcd", "kube-apiserver")
	ctx := t.Context()

	etcd, err := framework.StartEtcd(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	dumpLogOnFailure(t, etcd.LogFile())

	// Start both apiservers at once: each spends most of its start-up
	// waiting, so this nearly halves the wait.
	names := []string{"cluster-a", "cluster-b"}
	clusters := make([]*framework.Cluster, len(names))
	errs := make([]error, len(names))
	started := time.Now()
	var wg sync.WaitGroup
	for i, name := range names {
		dir := t.TempDir()
		wg.Go(func() {
			clusters[i], errs[i] = framework.StartCluster(ctx, framework.ClusterOptions{
				Name:        name,
				Etcd:        etcd,
				ServiceCIDR: "10.96.0.0/16",
				Dir:         dir,
				ExtraUsers:  []framework.User{{Name: "viewer", Groups: []string{"viewers"}}},
			})
		})
	}
	wg.Wait()
	for i, c := range clusters {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(c.Stop)
		dumpLogOnFailure(t, c.LogFile())
	}
	t.Logf("two apiservers ready in %v", time.Since(started).Round(time.Millisecond))
	a, b := clusters[0], clusters[1]

	t.Run("isolated", func(t *testing.T) {
		createNamespace(t, a.Client(), "only-in-a")
		createNamespace(t, b.Client(), "only-in-b")
		if _, err := b.Client().CoreV1().Namespaces().Get(ctx, "only-in-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace of cluster-a seen in cluster-b: err=%v", err)
		}
		if _, err := a.Client().CoreV1().Namespaces().Get(ctx, "only-in-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace of cluster-b seen in cluster-a: err=%v", err)
		}
	})

	t.Run("kubeconfigs", func(t *testing.T) {
		// The admin kubeconfig verifies the apiserver's certificate.
		admin := clientFromKubeconfig(t, a.Kubeconfig())
		if _, err := admin.CoreV1().Namespaces().Get(ctx, "only-in-a", metav1.GetOptions{}); err != nil {
			t.Errorf("admin kubeconfig: %v", err)
		}
		// A token user is authenticated but RBAC grants it nothing.
		path, err := a.KubeconfigFor("viewer")
		if err != nil {
			t.Fatal(err)
		}
		_, err = clientFromKubeconfig(t, path).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("viewer listing namespaces: want Forbidden, got %v", err)
		}
		path, err = a.ImpersonatingKubeconfig("someone", []string{"system:masters"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := clientFromKubeconfig(t, path).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("impersonating a system:masters member: %v", err)
		}
		if _, err := a.KubeconfigFor("nobody"); err == nil {
			t.Error("KubeconfigFor an undeclared user succeeded")
		}
	})

	t.Run("start failure shows log", func(t *testing.T) {
		_, err := framework.StartCluster(ctx, framework.ClusterOptions{
			Name:      "broken",
			Etcd:      etcd,
			Dir:       t.TempDir(),
			ExtraArgs: []string{"--no-such-flag"},
		})
		if err == nil || !strings.Contains(err.Error(), "unknown flag: --no-such-flag") {
			t.Errorf("want an error quoting the apiserver's log, got %v", err)
		}
	})

	t.Run("endpointslices", func(t *testing.T) {
		if _, err := framework.Binary("kube-controller-manager"); err != nil {
			t.Skipf("skipping: kube-controller-manager is not built; run hack/build-tools.sh kube-controller-manager (%v)", err)
		}
		kcm, err := framework.StartControllerManager(ctx, a, framework.ControllerManagerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(kcm.Stop)
		dumpLogOnFailure(t, kcm.LogFile())
		testEndpointSlice(ctx, t, a.Client())
	})
}

// testEndpointSlice binds a Pod to a fake Node, marks it Running and Ready
// with an IP as a kubelet would, and waits for the Service's EndpointSlice
// to list it as a ready endpoint.
func testEndpointSlice(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	const ns, podIP = "web", "198.51.100.10" // a documentation address: never dialled
	createNamespace(t, client, ns)

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	node, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:   node.Name,
			Containers: []corev1.Container{{Name: "web", Image: "web", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}},
		},
	}
	// Pod admission needs the namespace's default ServiceAccount, which the
	// serviceaccount controller creates shortly after the namespace.
	var createErr error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			createErr = err
			return false, nil
		}
		pod = created
		return true, nil
	})
	if err != nil {
		t.Fatalf("creating pod: %v (last error: %v)", err, createErr)
	}
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  podIP,
		PodIPs: []corev1.PodIP{{IP: podIP}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		},
	}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	var slices *discoveryv1.EndpointSliceList
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		slices, err = client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return false, err
		}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if len(ep.Addresses) == 1 && ep.Addresses[0] == podIP && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no ready endpoint %s for Service web: %v; slices: %+v", podIP, err, slices)
	}
}

func createNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func clientFromKubeconfig(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// dumpLogOnFailure prints the end of a component's log if the test fails,
// since the temporary directory holding it is removed afterwards.
func dumpLogOnFailure(t *testing.T, path string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Logf("reading %s: %v", path, err)
			return
		}
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		t.Logf("--- end of %s ---\n%s", path, data)
	})
}

// TestClusterCrashAndRestart: after a crash the apiserver does not answer;
// restarted, it answers the same clients and kubeconfigs with the state it
// had.
func TestClusterCrashAndRestart(t *testing.T) {
	framework.SkipUnlessBuilt(t, "etcd", "kube-apiserver")
	ctx := t.Context()
	c := framework.StartTestCluster(t, framework.StartTestEtcd(t), framework.ClusterOptions{Name: "crash"})
	client := c.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx); err == nil {
		t.Errorf("Restart of a running apiserver succeeded")
	}
	c.Crash()
	if _, err := client.CoreV1().Namespaces().Get(ctx, "kept", metav1.GetOptions{}); err == nil {
		t.Fatal("the apiserver answers after Crash")
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("after Restart, the old client: %v", err)
	}
	kubeconfig, err := c.KubeconfigFor(framework.AdminUser)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("after Restart, the kubeconfig written before: %v", err)
	}
}

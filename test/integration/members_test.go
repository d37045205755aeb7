package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crds"
	"k8s.io/utils/ptr"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

func startMember(t *testing.T, etcd *framework.Etcd, dir, id string) *testMember {
	t.Helper()
	ctx := context.Background()
	cluster, err := framework.StartCluster(ctx, framework.ClusterOptions{Name: id, Etcd: etcd, Dir: filepath.Join(dir, id)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	return prepareMember(t, cluster, id)
}

// prepareMember makes a started cluster a member as the controller's
// tests need it: the CRDs, its ClusterProperty cluster.clusterset.k8s.io
// stating id, and the controller's RBAC.
func prepareMember(t *testing.T, cluster *framework.Cluster, id string) *testMember {
	t.Helper()
	ctx := context.Background()
	cfg := cluster.RESTConfig()
	m := &testMember{id: id, cluster: cluster, kube: cluster.Client(), mcs: mcsclientset.NewForConfigOrDie(cfg)}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(cfg), all...); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	prop := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": aboutv1alpha1.SchemeGroupVersion.String(), "kind": "ClusterProperty",
		"metadata": map[string]any{"name": aboutv1alpha1.ClusterIDProperty},
		"spec":     map[string]any{"value": id},
	}}
	eventually(t, 30*time.Second, "ClusterProperty in "+id, func() (bool, string) {
		_, err := dyn.Resource(aboutv1alpha1.Resource).Create(ctx, prop, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), errString(err)
	})
	applyControllerRBAC(t, m.kube)
	return m
}

// membersWithDemo starts a member per id, on one etcd, each with
// namespace demo, and returns them with the controller's kubeconfig of
// them all.
func membersWithDemo(t *testing.T, ids ...string) ([]*testMember, string) {
	t.Helper()
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	var ms []*testMember
	for _, id := range ids {
		m := startMember(t, etcd, dir, id)
		createNamespace(t, m, "demo")
		ms = append(ms, m)
	}
	return ms, writeControllerKubeconfig(t, dir, ms)
}

// applyControllerRBAC creates the objects of kind-config/mcs-controller-rbac.yaml.
func applyControllerRBAC(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	applyRBAC(t, kube, repoPath(t, "kind-config", "mcs-controller-rbac.yaml"))
}

// applyRBAC creates the RBAC objects of a manifest.
func applyRBAC(t *testing.T, kube kubernetes.Interface, path string) {
	t.Helper()
	ctx := context.Background()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	decoder := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj unstructured.Unstructured
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		data, _ := obj.MarshalJSON()
		switch obj.GetKind() {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			mustUnmarshal(t, data, &o)
			_, err = kube.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			mustUnmarshal(t, data, &o)
			_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			mustUnmarshal(t, data, &o)
			_, err = kube.RbacV1().Roles(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			mustUnmarshal(t, data, &o)
			_, err = kube.RbacV1().RoleBindings(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		case "Namespace":
			var o v1.Namespace
			mustUnmarshal(t, data, &o)
			if _, err = kube.CoreV1().Namespaces().Create(ctx, &o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				err = nil
			}
		case "ServiceAccount":
			var o v1.ServiceAccount
			mustUnmarshal(t, data, &o)
			// Its namespace is another package's; here it is made.
			if _, err = kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}, metav1.CreateOptions{}); err == nil || apierrors.IsAlreadyExists(err) {
				_, err = kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
			}
		default:
			t.Fatalf("unexpected kind %q in the RBAC manifest", obj.GetKind())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func mustUnmarshal(t *testing.T, data []byte, into any) {
	t.Helper()
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}

// writeControllerKubeconfig writes one kubeconfig with a context per
// member, acting as controllerUser and reaching each member through a
// tcpLink.
func writeControllerKubeconfig(t *testing.T, dir string, members []*testMember) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for _, m := range members {
		one := controllerKubeconfig(t, m)
		m.link = newTCPLink(t, strings.TrimPrefix(m.cluster.URL(), "https://"))
		for name, cl := range one.Clusters {
			cl.Server = "https://" + m.link.addr()
			kc.Clusters[name] = cl
		}
		for name, u := range one.AuthInfos {
			kc.AuthInfos[name] = u
		}
		for name, c := range one.Contexts {
			kc.Contexts[name] = c
		}
	}
	kc.CurrentContext = members[0].id
	path := filepath.Join(dir, "clusterset.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// controllerKubeconfig returns a kubeconfig reaching m directly as the
// controller's user (impersonated by the admin).
func controllerKubeconfig(t *testing.T, m *testMember) *clientcmdapi.Config {
	t.Helper()
	path, err := m.cluster.ImpersonatingKubeconfig(controllerUser, []string{"system:authenticated"})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

type runningController struct {
	cancel context.CancelFunc
	// exited is closed when app.Run has returned err.
	exited  chan struct{}
	err     error
	health  string
	metrics string
}

func startController(t *testing.T, kubeconfig, identity string, ttl time.Duration, contexts ...string) *runningController {
	t.Helper()
	return startControllerWith(t, kubeconfig, identity, ttl, func(o *app.Options) { o.Contexts = contexts })
}

// startControllerWith starts a controller whose options mutate changes.
func startControllerWith(t *testing.T, kubeconfig, identity string, ttl time.Duration, mutate func(*app.Options)) *runningController {
	t.Helper()
	o := app.NewOptions()
	o.Kubeconfig = kubeconfig
	o.Identity = identity
	o.EndpointTTL = ttl
	o.InitialSyncTimeout = 20 * time.Second
	o.LeaderElectLeaseDuration = 4 * time.Second
	o.LeaderElectRenewDeadline = 3 * time.Second
	o.LeaderElectRetryPeriod = 500 * time.Millisecond
	o.ClusterIDTimeout = 3 * time.Second
	o.HealthzBindAddress = fmt.Sprintf("127.0.0.1:%d", mustFreePort(t))
	o.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", mustFreePort(t))
	// Several replicas run in one test: the secure port is the one test's
	// that asks for it (TestMCSControllerSecurePort).
	o.SecureServing.BindPort = 0
	mutate(o)
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningController{cancel: cancel, exited: make(chan struct{}), health: o.HealthzBindAddress, metrics: o.MetricsBindAddress}
	go func() {
		r.err = app.Run(ctx, o)
		close(r.exited)
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *runningController) stop() {
	r.cancel()
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
	}
}

func (r *runningController) waitReady(t *testing.T) {
	t.Helper()
	eventually(t, 60*time.Second, "the controller's /readyz", func() (bool, string) {
		out, err := httpGet("http://" + r.health + "/readyz")
		return err == nil && strings.TrimSpace(out) == "ok", out + errString(err)
	})
}

func waitLeader(t *testing.T, m *testMember, identity string) {
	t.Helper()
	eventually(t, 60*time.Second, identity+" to lead", func() (bool, string) {
		lease, err := m.kube.CoordinationV1().Leases("kube-system").Get(context.Background(), "mcs-controller", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		return holder == identity, holder
	})
}

func createNamespace(t *testing.T, m *testMember, name string) {
	t.Helper()
	_, err := m.kube.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func servicePorts(nameAndPort ...any) []v1.ServicePort {
	var out []v1.ServicePort
	for i := 0; i < len(nameAndPort); i += 2 {
		out = append(out, v1.ServicePort{Name: nameAndPort[i].(string), Port: int32(nameAndPort[i+1].(int)), Protocol: v1.ProtocolTCP})
	}
	return out
}

// slicePorts and addresses of a member's own EndpointSlice.
type localSlice struct {
	ports []discoveryv1.EndpointPort
	addrs []string
}

func endpoints(port string, number int32, addrs ...string) localSlice {
	return localSlice{ports: []discoveryv1.EndpointPort{{Name: ptr.To(port), Port: ptr.To(number), Protocol: ptr.To(v1.ProtocolTCP)}}, addrs: addrs}
}

func endpoints2(addr, p1 string, n1 int32, p2 string, n2 int32) localSlice {
	return localSlice{ports: []discoveryv1.EndpointPort{
		{Name: ptr.To(p1), Port: ptr.To(n1), Protocol: ptr.To(v1.ProtocolTCP)},
		{Name: ptr.To(p2), Port: ptr.To(n2), Protocol: ptr.To(v1.ProtocolTCP)},
	}, addrs: []string{addr}}
}

// exportService creates a Service selecting app=name (unless it exists),
// its EndpointSlice as the member's EndpointSlice controller would write
// it for Pods (owned by the Service, an endpoint per Pod: no
// kube-controller-manager runs here), and its export.
func exportService(t *testing.T, m *testMember, ns, name string, ports []v1.ServicePort, eps localSlice) {
	t.Helper()
	ctx := context.Background()
	svc, err := m.kube.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		svc, err = m.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-local", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, v1.SchemeGroupVersion.WithKind("Service"))},
			Annotations: map[string]string{
				// What the EndpointSlice controller records: when the change
				// the slice carries happened.
				v1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano),
			}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       eps.ports,
	}
	for i, addr := range eps.addrs {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To("node-1"),
			TargetRef: podOf(ns, name, i),
		})
	}
	if _, err := m.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	createExport(t, m, ns, name)
}

// podOf is the target the EndpointSlice controller writes for the i-th
// Pod of Service name.
func podOf(ns, name string, i int) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i)}
}

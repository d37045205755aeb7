// Package integration runs the project's binaries against real
// kube-apiservers and real kernels.
package integration

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/multiclusterservices/crds"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

const vip = "10.250.0.10"

// TestKubeProxyFollowsTheServiceImportCRD runs the built kube-proxy in a
// node namespace against a real apiserver: a ServiceImport whose endpoints
// are in two source clusters (pod namespaces behind the node) answers on
// its clusterset IP from both; deleting the CRD stops it answering and
// recreating it brings it back, with the same kube-proxy process.
func TestKubeProxyFollowsTheServiceImportCRD(t *testing.T) {
	netns.Require(t, "nft")
	cluster := startControlPlane(t)
	ctx := context.Background()
	kube := cluster.Client()
	ext := apiextensionsclient.NewForConfigOrDie(cluster.RESTConfig())
	mcs := mcsclientset.NewForConfigOrDie(cluster.RESTConfig())

	n := newNode(t, cluster, "mcs-it-node", "192.168.77.1")
	createNode(t, kube, n.name, "192.168.77.1")
	podNamespace(t, n, "mcs-it-pod-a", "10.1.0.5", "10.1.0.1")
	podNamespace(t, n, "mcs-it-pod-b", "10.2.0.5", "10.2.0.1")
	for ns, name := range map[string]string{"mcs-it-pod-a": "pod-a", "mcs-it-pod-b": "pod-b"} {
		addr := map[string]string{"pod-a": "10.1.0.5:8080", "pod-b": "10.2.0.5:8080"}[name]
		l, err := netns.Listen(ns, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go echoserver.ServeListener(l, name)
	}

	// The clusterset range is configured to overlap the Service CIDR, a
	// mistake an operator can make: then only the collision check stands
	// between an import and a local Service's traffic.
	proxy := startKubeProxy(t, "kube-proxy", n, "--proxy-mode=nftables", "--feature-gates=MultiClusterServices=true",
		"--clusterset-ip-cidrs=10.250.0.0/16,10.96.0.0/16")

	if _, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A local Service that an import will try to take over.
	local, err := kube.CoreV1().Services("demo").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	install := func() {
		t.Helper()
		crd, err := crds.ServiceImport()
		if err != nil {
			t.Fatal(err)
		}
		if err := crds.Install(ctx, ext, crd); err != nil {
			t.Fatal(err)
		}
		// A fresh CRD takes a moment before its resource is served.
		eventually(t, 30*time.Second, "ServiceImport API", func() (bool, string) {
			si := &mcsv1beta1.ServiceImport{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
				Spec: mcsv1beta1.ServiceImportSpec{
					Type:  mcsv1beta1.ClusterSetIP,
					IPs:   []string{vip},
					Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
				},
			}
			_, err := mcs.MulticlusterV1beta1().ServiceImports("demo").Create(ctx, si, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			return err == nil, errString(err)
		})
	}
	for _, c := range []struct{ cluster, ip string }{{"cluster-a", "10.1.0.5"}, {"cluster-b", "10.2.0.5"}} {
		createMCSSlice(t, kube, "demo", "web", c.cluster, c.ip)
	}
	install()

	who := func() []string { return answers(n.name, vip+":80", 30) }
	eventually(t, 60*time.Second, "the clusterset IP to be answered by both source clusters", func() (bool, string) {
		got := who()
		return strings.Join(got, ",") == "pod-a,pod-b", strings.Join(got, ",")
	})
	eventually(t, 30*time.Second, "the programmed-imports metric", func() (bool, string) {
		m, err := metricsOf(n.name)
		return strings.Contains(m, "kubeproxy_multicluster_programmed_service_imports 1"), errString(err)
	})

	// An import on a local Service's ClusterIP is refused, with an event,
	// and the Service keeps its traffic (no endpoints: the kernel rejects).
	hijack := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "hijack", Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type: mcsv1beta1.ClusterSetIP, IPs: []string{local.Spec.ClusterIP},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
	if _, err := mcs.MulticlusterV1beta1().ServiceImports("demo").Create(ctx, hijack, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createMCSSlice(t, kube, "demo", "hijack", "cluster-a", "10.1.0.5")
	eventually(t, 30*time.Second, "an event on the refused ServiceImport", func() (bool, string) {
		evs, err := kube.EventsV1().Events("demo").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "ServiceImport" && e.Regarding.Name == "hijack" && e.Reason == string(mcsproxy.ReasonIPInUseByService) {
				return true, ""
			}
		}
		return false, "no event yet"
	})
	if got := answers(n.name, local.Spec.ClusterIP+":80", 5); len(got) != 0 {
		t.Errorf("an import took over local Service %s: answered by %v", local.Spec.ClusterIP, got)
	}

	// The CRD goes: its ServiceImports go with it, and kube-proxy removes
	// every clusterset IP without restarting.
	if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, "serviceimports.multicluster.x-k8s.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the clusterset IP to stop answering", func() (bool, string) {
		got := who()
		return len(got) == 0 && !strings.Contains(nftRuleset(t, n.name), vip), strings.Join(got, ",")
	})
	if !proxy.alive() {
		t.Fatalf("kube-proxy exited when the CRD was deleted")
	}

	install()
	eventually(t, 60*time.Second, "the clusterset IP to answer again", func() (bool, string) {
		got := who()
		return strings.Join(got, ",") == "pod-a,pod-b", strings.Join(got, ",")
	})
	if !proxy.alive() {
		t.Fatalf("kube-proxy restarted")
	}
}

func createMCSSlice(t *testing.T, kube kubernetes.Interface, ns, importName, cluster, ip string) {
	t.Helper()
	ready := true
	port, proto, name := int32(8080), v1.ProtocolTCP, "http"
	_, err := kube.DiscoveryV1().EndpointSlices(ns).Create(context.Background(), &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: importName + "-" + cluster, Labels: map[string]string{
			mcsv1beta1.LabelServiceName:   importName,
			mcsv1beta1.LabelSourceCluster: cluster,
			discoveryv1.LabelManagedBy:    mcsproxy.DefaultManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// answers connects n times from inside a namespace and returns the sorted
// distinct names that answered.
func answers(ns, addr string, n int) []string {
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		c, err := netns.Dial(ns, "tcp", addr, 300*time.Millisecond)
		if err != nil {
			continue
		}
		if name, err := echoserver.AskOn(c, "tcp", time.Second); err == nil {
			seen[name] = true
		}
	}
	out := []string{}
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

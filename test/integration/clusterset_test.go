package integration

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset/standin"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

const csNamespace = "it"

// TestClusterSet brings up two clusters of the local clusterset harness and
// checks what the harness promises: the fake kubelet's pods become real
// EndpointSlices and follow their processes, kube-proxy carries traffic to
// a Service's pods and, for an import, to pods of both clusters, CoreDNS
// answers for cluster.local and clusterset.local, and tearing down leaves
// no namespace, interface, nftables table or process behind.
func TestClusterSet(t *testing.T) {
	cs, before := upClusterSet(t, clusterset.Options{Clusters: 2, NodesPerCluster: 2, Prefix: "csit"})
	a, b := cs.Clusters[0], cs.Clusters[1]
	ctx := t.Context()

	for _, c := range []*clusterset.Cluster{a, b} {
		csCreateNamespace(t, c)
		csCreateService(t, c, "echo", 8080)
		csCreatePod(t, c, csClientPod())
	}
	csCreatePod(t, a, csEchoPod("echo-a-1"))
	csCreatePod(t, a, csEchoPod("echo-a-2"))
	csCreatePod(t, b, csEchoPod("echo-b-1"))
	ipsA := csWaitPodsReady(t, a, "echo-a-1", "echo-a-2", "client")
	csWaitPodsReady(t, b, "echo-b-1", "client")

	t.Run("fake kubelet makes real EndpointSlices", func(t *testing.T) {
		csWaitEndpoints(t, a, "echo", ipsA["echo-a-1"], ipsA["echo-a-2"])
		// The scheduler stand-in spreads pods over both nodes.
		nodes := map[string]bool{}
		for _, name := range []string{"echo-a-1", "echo-a-2", "client"} {
			pod, err := a.API.Client().CoreV1().Pods(csNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			nodes[pod.Spec.NodeName] = true
		}
		if len(nodes) != 2 {
			t.Errorf("pods landed on %v, want both nodes of %s", nodes, a.Name)
		}
	})

	t.Run("readiness follows the process", func(t *testing.T) {
		csCreateService(t, a, "quitter", 8080)
		pod := csNetexecPod("quitter")
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
		csCreatePod(t, a, pod)
		ip := csWaitPodsReady(t, a, "quitter")["quitter"]
		csWaitEndpoints(t, a, "quitter", ip)
		// agnhost's /exit ends the process; the pod fails and leaves the
		// endpoints.
		if _, err := csHTTPGet(a.Nodes[0].Netns, "http://"+ip+":8080/exit?code=3"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the pod to fail with exit code 3", func() (bool, string) {
			p, err := a.API.Client().CoreV1().Pods(csNamespace).Get(ctx, "quitter", metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false, errString(err)
			}
			term := p.Status.ContainerStatuses[0].State.Terminated
			return p.Status.Phase == v1.PodFailed && term != nil && term.ExitCode == 3, fmt.Sprintf("%s %+v", p.Status.Phase, p.Status.ContainerStatuses[0].State)
		})
		csWaitEndpoints(t, a, "quitter")
	})

	t.Run("kube-proxy carries traffic to a Service", func(t *testing.T) {
		client := csPodNetns(t, cs, a, "client")
		svc, err := a.API.Client().CoreV1().Services(csNamespace).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
		eventually(t, 30*time.Second, "the ClusterIP to reach both pods", func() (bool, string) {
			got := answers(client, addr, 20)
			return slices.Equal(got, []string{"echo-a-1", "echo-a-2"}), strings.Join(got, ",")
		})
		// The network is flat: a pod of cluster-b reaches a pod of
		// cluster-a by its IP.
		if got := answers(csPodNetns(t, cs, b, "client"), net.JoinHostPort(ipsA["echo-a-1"], "8080"), 1); !slices.Equal(got, []string{"echo-a-1"}) {
			t.Errorf("pod-to-pod across clusters: got %v", got)
		}
	})

	t.Run("a clusterset IP reaches pods of both clusters", func(t *testing.T) {
		for _, c := range []*clusterset.Cluster{a, b} {
			csExport(t, c, "echo")
		}
		members, err := standin.MembersFromKubeconfig(cs.ControllerKubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := standin.Sync(ctx, members); err != nil {
			t.Fatal(err)
		}
		vip := csImportIP(t, b, "echo")
		want := []string{"echo-a-1", "echo-a-2", "echo-b-1"}
		for _, c := range []*clusterset.Cluster{a, b} {
			client := csPodNetns(t, cs, c, "client")
			eventually(t, 30*time.Second, "the clusterset IP seen from "+c.Name+" to reach every exporting pod", func() (bool, string) {
				got := answers(client, net.JoinHostPort(vip, "80"), 30)
				return slices.Equal(got, want), strings.Join(got, ",")
			})
		}
	})

	t.Run("CoreDNS answers for cluster.local and clusterset.local", func(t *testing.T) {
		client := csPodNetns(t, cs, b, "client")
		svc, err := b.API.Client().CoreV1().Services(csNamespace).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vip := csImportIP(t, b, "echo")
		for name, want := range map[string]string{
			"echo." + csNamespace + ".svc.cluster.local":    svc.Spec.ClusterIP,
			"echo." + csNamespace + ".svc.clusterset.local": vip,
		} {
			eventually(t, 30*time.Second, name+" to resolve to "+want, func() (bool, string) {
				got, err := csLookup(client, b.DNSIP, name)
				return err == nil && slices.Equal(got, []string{want}), fmt.Sprintf("%v %v", got, err)
			})
		}
		// And the pod's own resolver (resolv.conf from the fake kubelet)
		// goes through the same kube-dns Service.
		out, err := netns.Output("ip", "netns", "exec", client, "getent", "hosts", "echo."+csNamespace+".svc.clusterset.local")
		if err != nil || !strings.Contains(out, vip) {
			t.Errorf("getent inside the pod: %v %q", err, out)
		}
	})

	t.Run("kubectl exec, logs, attach and port-forward", func(t *testing.T) { csKubeletAPI(t, cs, a) })
	t.Run("StatefulSets and Jobs", func(t *testing.T) { csWorkloads(t, cs, b) })
	t.Run("pods reach the apiserver through the kubernetes Service", func(t *testing.T) { csKubernetesService(t, cs, a) })
	t.Run("the host refuses every clusterset address", func(t *testing.T) { csHostRefusesClustersetRanges(t, cs, a) })

	t.Run("deleting a pod stops it and finishes the deletion", func(t *testing.T) {
		ns := csPodNetns(t, cs, a, "echo-a-2")
		if err := a.API.Client().CoreV1().Pods(csNamespace).Delete(ctx, "echo-a-2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the pod object to go", func() (bool, string) {
			_, err := a.API.Client().CoreV1().Pods(csNamespace).Get(ctx, "echo-a-2", metav1.GetOptions{})
			return apierrors.IsNotFound(err), errString(err)
		})
		if _, err := os.Stat(filepath.Join("/var/run/netns", ns)); !os.IsNotExist(err) {
			t.Errorf("network namespace %s of the deleted pod still exists (%v)", ns, err)
		}
		csWaitEndpoints(t, a, "echo", ipsA["echo-a-1"])
	})

	t.Run("teardown leaves nothing behind", func(t *testing.T) {
		cs.Down()
		csCheckNothingLeft(t, cs, before)
	})
}

// TestClusterSetThreeClustersIPTables checks that three clusters come up,
// with kube-proxy in iptables mode, and that the mcs-controller (when
// built) imports a Service exported from all three into each of them.
func TestClusterSetThreeClustersIPTables(t *testing.T) {
	framework.SkipUnlessBuilt(t, "mcs-controller")
	cs, before := upClusterSet(t, clusterset.Options{Clusters: 3, Prefix: "csit3", ProxyMode: "iptables"})
	var want []string
	for _, c := range cs.Clusters {
		csCreateNamespace(t, c)
		csCreateService(t, c, "echo", 8080)
		name := "echo-" + strings.TrimPrefix(c.Name, "cluster-")
		csCreatePod(t, c, csEchoPod(name))
		csCreatePod(t, c, csClientPod())
		csWaitPodsReady(t, c, name, "client")
		csExport(t, c, "echo")
		want = append(want, name)
	}
	controller, err := cs.StartController()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		controller.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", controller.LogFile(), process.Tail(controller.LogFile(), 30))
		}
	})
	for _, c := range cs.Clusters {
		vip := csImportIP(t, c, "echo")
		client := csPodNetns(t, cs, c, "client")
		eventually(t, 60*time.Second, "the clusterset IP seen from "+c.Name+" to reach all three clusters", func() (bool, string) {
			got := answers(client, net.JoinHostPort(vip, "80"), 40)
			return slices.Equal(got, want), strings.Join(got, ",")
		})
	}
	controller.Stop(5 * time.Second)
	cs.Down()
	csCheckNothingLeft(t, cs, before)
}

// TestClusterSetIPv6Only checks an IPv6-only clusterset: pods, Services,
// kube-proxy, CoreDNS and the `kubernetes` Service in IPv6 alone, and the
// host refusing its IPv6 ranges.
func TestClusterSetIPv6Only(t *testing.T) {
	cs, before := upClusterSet(t, clusterset.Options{Clusters: 1, Prefix: "csit6", IPFamily: clusterset.IPv6})
	c := cs.Clusters[0]
	csCreateNamespace(t, c)
	csCreateService(t, c, "echo", 8080)
	csCreatePod(t, c, csEchoPod("echo-1"))
	csCreatePod(t, c, csClientPod())
	ips := csWaitPodsReady(t, c, "echo-1", "client")
	for name, ip := range ips {
		if addr, err := netip.ParseAddr(ip); err != nil || !addr.Is6() || !netip.MustParsePrefix(c.PodCIDR).Contains(addr) {
			t.Errorf("pod %s has IP %s, want an IPv6 address of %s", name, ip, c.PodCIDR)
		}
	}
	svc, err := c.API.Client().CoreV1().Services(csNamespace).Get(t.Context(), "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !netip.MustParsePrefix(c.ServiceCIDR).Contains(netip.MustParseAddr(svc.Spec.ClusterIP)) {
		t.Errorf("ClusterIP %s outside %s", svc.Spec.ClusterIP, c.ServiceCIDR)
	}
	client := csPodNetns(t, cs, c, "client")
	eventually(t, 30*time.Second, "the IPv6 ClusterIP to reach the pod", func() (bool, string) {
		got := answers(client, net.JoinHostPort(svc.Spec.ClusterIP, "80"), 5)
		return slices.Equal(got, []string{"echo-1"}), strings.Join(got, ",")
	})
	name := "echo." + csNamespace + ".svc.cluster.local"
	eventually(t, 30*time.Second, name+" to resolve to its IPv6 ClusterIP", func() (bool, string) {
		got, err := csLookup(client, c.DNSIP, name)
		return err == nil && slices.Equal(got, []string{svc.Spec.ClusterIP}), fmt.Sprintf("%v %v", got, err)
	})
	csKubernetesService(t, cs, c)
	for _, addr := range []string{c.Nodes[0].IP, ips["echo-1"], svc.Spec.ClusterIP} {
		// IPv6 says "No route to host" where IPv4 prints the unreachable
		// route; without it, the default route would show.
		if out, _ := exec.Command("ip", "route", "get", addr).CombinedOutput(); !strings.HasPrefix(string(out), "unreachable") && !strings.Contains(string(out), "No route to host") {
			t.Errorf("host route to %s: %q, want unreachable", addr, out)
		}
	}
	cs.Down()
	csCheckNothingLeft(t, cs, before)
}

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/multiclusterservices/crds"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// dropUnallocatedClusterIPs is the comment of the nftables rule that
// drops traffic to ClusterIPs no Service holds, written once the proxier
// knows the ServiceCIDRs.
const dropUnallocatedClusterIPs = "Drop traffic to unallocated ClusterIPs"

// TestGateOffMatchesUpstream feeds the same Services, EndpointSlices and
// ServiceImports to upstream kube-proxy v1.37.2 and to this build with the
// MultiClusterServices gate off, each in its own node namespace, and
// requires identical rulesets: with the gate off this build is upstream.
func TestGateOffMatchesUpstream(t *testing.T) {
	netns.Require(t, "nft", "iptables-save", "ip6tables-save")
	cluster := startControlPlane(t)
	kube := cluster.Client()
	createGateOffWorkload(t, cluster.Client(), apiextensionsclient.NewForConfigOrDie(cluster.RESTConfig()), mcsclientset.NewForConfigOrDie(cluster.RESTConfig()))
	createNode(t, kube, "node-x", "192.168.77.1")

	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			upstreamNode := newNode(t, cluster, "mcs-up-"+mode[:2], "192.168.77.1")
			oursNode := newNode(t, cluster, "mcs-ours-"+mode[:2], "192.168.77.1")
			args := []string{"--proxy-mode=" + mode, "--hostname-override=node-x"}
			procs := map[string]*kubeProxy{
				upstreamNode.name: startKubeProxy(t, "kube-proxy-upstream", upstreamNode, args...),
				oursNode.name:     startKubeProxy(t, "kube-proxy", oursNode, args...),
			}
			ours := procs[oursNode.name]
			// The ServiceCIDRs reach a proxier through an informer of their
			// own that races its first sync, and the nftables rule that drops
			// unallocated ClusterIPs is written at a full sync only (at
			// start, then hourly): upstream's behaviour in every release,
			// whichever binary runs it. A process whose first sync lost that
			// race is started again (a new first sync), at most three times
			// each, so that two complete rulesets are compared.
			restarts := map[string]int{}
			restartIfCIDRsMissed := func(n *node, binary, ruleset string) bool {
				if mode != "nftables" || strings.Contains(ruleset, dropUnallocatedClusterIPs) || restarts[n.name] >= 3 {
					return false
				}
				restarts[n.name]++
				t.Logf("%s synced before it knew the ServiceCIDRs; starting it again (%d)", binary, restarts[n.name])
				old := procs[n.name]
				_ = old.cmd.Process.Kill()
				_ = old.cmd.Wait()
				// Its rules go with it: the comparison waits for the new
				// process's.
				netns.Run(t, "ip", "netns", "exec", n.name, "nft", "flush", "ruleset")
				procs[n.name] = startKubeProxy(t, binary, n, args...)
				if n == oursNode {
					ours = procs[n.name]
				}
				return true
			}

			dump := func(ns string) string {
				if mode == "nftables" {
					out, err := netns.Output("ip", "netns", "exec", ns, "nft", "-j", "list", "ruleset")
					if err != nil {
						t.Fatalf("nft -j list ruleset: %v\n%s", err, out)
					}
					canonical, err := canonicalNFT(out)
					if err != nil {
						t.Fatal(err)
					}
					return canonical
				}
				out, err := netns.Output("ip", "netns", "exec", ns, "sh", "-c", "iptables-save; ip6tables-save")
				if err != nil {
					t.Fatalf("iptables-save: %v\n%s", err, out)
				}
				return canonicalIPTables(out)
			}
			var upstream, gateOff string
			eventually(t, 90*time.Second, "both rulesets to hold every Service and agree", func() (bool, string) {
				upstream, gateOff = dump(upstreamNode.name), dump(oursNode.name)
				complete := strings.Contains(upstream, "10.96.100.9") && strings.Contains(upstream, "10.1.0.13")
				if complete && strings.Contains(gateOff, "10.96.100.9") && strings.Contains(gateOff, "10.1.0.13") {
					restarted := restartIfCIDRsMissed(upstreamNode, "kube-proxy-upstream", upstream)
					if restartIfCIDRsMissed(oursNode, "kube-proxy", gateOff) || restarted {
						return false, "started again"
					}
				}
				return complete && upstream == gateOff, cmp.Diff(upstream, gateOff)
			})
			if strings.Contains(gateOff, "10.250.0.") {
				t.Errorf("gate off, but a clusterset IP is programmed")
			}
			m, err := metricsOf(oursNode.name)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(m, "kubeproxy_multicluster_") {
				t.Errorf("gate off, but multi-cluster metrics are registered")
			}
			log, _ := os.ReadFile(ours.log)
			if strings.Contains(string(log), `logger="multicluster"`) || strings.Contains(string(log), "ServiceImport") {
				t.Errorf("gate off, but kube-proxy logged about ServiceImports")
			}
			t.Logf("%s: identical rulesets of %d lines", mode, strings.Count(gateOff, "\n"))
		})
	}
}

// createGateOffWorkload creates Services of every kind kube-proxy
// programs, their EndpointSlices, and a ServiceImport with MCS slices that
// a gate-off kube-proxy must ignore.
func createGateOffWorkload(t *testing.T, kube kubernetes.Interface, ext apiextensionsclient.Interface, mcs mcsclientset.Interface) {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	local := v1.ServiceInternalTrafficPolicyLocal
	timeout := int32(600)
	services := []*v1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.100.1", Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}, {Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nodeport"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ClusterIP: "10.96.100.2", Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sticky"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.100.3", SessionAffinity: v1.ServiceAffinityClientIP, SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}, Ports: []v1.ServicePort{{Name: "http", Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "external"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.100.4", ExternalIPs: []string{"203.0.113.10"}, Ports: []v1.ServicePort{{Name: "http", Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "lb"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.100.5", ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: 30999, Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30081}}, LoadBalancerSourceRanges: []string{"198.51.100.0/24"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nodelocal"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.100.6", InternalTrafficPolicy: &local, Ports: []v1.ServicePort{{Name: "http", Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dns"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.100.7", Ports: []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.100.8", Ports: []v1.ServicePort{{Name: "http", Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "headless"}, Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Ports: []v1.ServicePort{{Name: "http", Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "last"}, Spec: v1.ServiceSpec{ClusterIP: "10.96.100.9", Ports: []v1.ServicePort{{Name: "http", Port: 80}}}},
	}
	for _, svc := range services {
		created, err := kube.CoreV1().Services("work").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating Service %s: %v", svc.Name, err)
		}
		if svc.Name == "lb" {
			created.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.20"}}
			if _, err := kube.CoreV1().Services("work").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sliceFor := func(service string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) {
		t.Helper()
		_, err := kube.DiscoveryV1().EndpointSlices("work").Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: service + "-1", Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   eps,
			Ports:       ports,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	p := func(name string, proto *v1.Protocol, port int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: &name, Protocol: proto, Port: &port}
	}
	ep := func(ip, node string, ready, serving, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating}}
	}
	sliceFor("web", []discoveryv1.EndpointPort{p("http", &tcp, 8080), p("https", &tcp, 8443)}, ep("10.1.0.1", "node-x", true, true, false), ep("10.1.0.2", "node-y", true, true, false), ep("10.1.0.3", "node-y", false, true, true))
	sliceFor("nodeport", []discoveryv1.EndpointPort{p("http", &tcp, 80)}, ep("10.1.0.4", "node-y", true, true, false))
	sliceFor("sticky", []discoveryv1.EndpointPort{p("http", &tcp, 80)}, ep("10.1.0.5", "node-x", true, true, false), ep("10.1.0.6", "node-y", true, true, false))
	sliceFor("external", []discoveryv1.EndpointPort{p("http", &tcp, 80)}, ep("10.1.0.7", "node-y", true, true, false))
	sliceFor("lb", []discoveryv1.EndpointPort{p("http", &tcp, 80)}, ep("10.1.0.8", "node-x", true, true, false), ep("10.1.0.9", "node-y", true, true, false))
	sliceFor("nodelocal", []discoveryv1.EndpointPort{p("http", &tcp, 80)}, ep("10.1.0.10", "node-x", true, true, false), ep("10.1.0.11", "node-y", true, true, false))
	sliceFor("dns", []discoveryv1.EndpointPort{p("dns", &udp, 53), p("dns-tcp", &tcp, 53)}, ep("10.1.0.12", "node-y", true, true, false))
	sliceFor("last", []discoveryv1.EndpointPort{p("http", &tcp, 80)}, ep("10.1.0.13", "node-y", true, true, false))

	// An import and its slices: a gate-off kube-proxy must not see them.
	crd, err := crds.ServiceImport()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, ext, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a ServiceImport to be created", func() (bool, string) {
		_, err := mcs.MulticlusterV1beta1().ServiceImports("work").Create(ctx, &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: "remote", Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.1"},
				Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		}, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	createMCSSlice(t, kube, "work", "remote", "cluster-b", "10.2.0.1")
}

package multicluster_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// dataplane is upstream's proxier for one mode, wrapped by the
// multi-cluster Proxier, programming the kernel of the test's own network
// namespace. Endpoints are echo servers on addresses of the loopback
// device, so a connection to a clusterset IP is answered by the name of
// the endpoint the rules chose.
type dataplane struct {
	t       *testing.T
	ctx     context.Context
	mode    kubeproxyconfig.ProxyMode
	proxier *multicluster.Proxier
	canary  int
	// withdrawn counts the clusterset IPs the Proxier took back from the
	// data plane: a synthetic Service deleted, or updated without an IP it
	// had.
	withdrawn atomic.Int64
}

// withdrawals sits between the multi-cluster Proxier and upstream's, and
// counts in d.withdrawn every clusterset IP handed over and then taken back.
type withdrawals struct {
	proxy.Provider
	d *dataplane
}

func (w withdrawals) OnServiceUpdate(old, svc *v1.Service) {
	if _, synthetic := mcsproxy.ImportName(old.Name); synthetic {
		for _, ip := range old.Spec.ClusterIPs {
			if !slices.Contains(svc.Spec.ClusterIPs, ip) {
				w.d.withdrawn.Add(1)
			}
		}
	}
	w.Provider.OnServiceUpdate(old, svc)
}

func (w withdrawals) OnServiceDelete(svc *v1.Service) {
	if _, synthetic := mcsproxy.ImportName(svc.Name); synthetic {
		w.d.withdrawn.Add(int64(len(svc.Spec.ClusterIPs)))
	}
	w.Provider.OnServiceDelete(svc)
}

func defaultConfig(t testing.TB, mode kubeproxyconfig.ProxyMode) *kubeproxyconfig.KubeProxyConfiguration {
	versioned := &kubeproxyconfigv1alpha1.KubeProxyConfiguration{}
	proxyconfigscheme.Scheme.Default(versioned)
	internal, err := proxyconfigscheme.Scheme.ConvertToVersion(versioned, kubeproxyconfig.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	cfg := internal.(*kubeproxyconfig.KubeProxyConfiguration)
	cfg.Mode = mode
	cfg.MinSyncPeriod.Duration = 0
	cfg.SyncPeriod.Duration = time.Hour
	return cfg
}

func newDataplane(t *testing.T, mode kubeproxyconfig.ProxyMode) *dataplane {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// A "node" with an uplink whose gateway never answers: traffic the
	// rules do not redirect goes nowhere.
	netns.Run(t, "ip", "link", "add", "mcs0", "type", "veth", "peer", "name", "mcs1")
	netns.Run(t, "ip", "link", "set", "mcs0", "up")
	netns.Run(t, "ip", "link", "set", "mcs1", "up")
	netns.Run(t, "ip", "addr", "add", "192.168.99.1/24", "dev", "mcs0")
	netns.Run(t, "ip", "-6", "addr", "add", "fd00:99::1/64", "dev", "mcs0", "nodad")
	netns.Run(t, "ip", "route", "add", "default", "via", "192.168.99.2")
	netns.Run(t, "ip", "-6", "route", "add", "default", "via", "fd00:99::2")

	cfg := defaultConfig(t, mode)
	detectors := map[v1.IPFamily]proxyutil.LocalTrafficDetector{v1.IPv4Protocol: proxyutil.NewNoOpLocalDetector(), v1.IPv6Protocol: proxyutil.NewNoOpLocalDetector()}
	nodeIPs := map[v1.IPFamily]net.IP{v1.IPv4Protocol: net.ParseIP("192.168.99.1"), v1.IPv6Protocol: net.ParseIP("fd00:99::1")}
	recorder := &events.FakeRecorder{}
	provider, err := newDualStackProxier(ctx, cfg, detectors, nodeName, nodeIPs, recorder)
	if err != nil {
		t.Fatalf("creating the %s proxier: %v", mode, err)
	}
	opts := &mcsproxy.Options{
		ClusterSetIPCIDRs: []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16"), netip.MustParsePrefix("fd00:10:250::/108")},
		TrustedManagers:   []string{mcsproxy.DefaultManagedBy},
		LocalClusterID:    localClusterID,
	}
	d := &dataplane{t: t, ctx: ctx, mode: mode}
	// As kube-proxy does before building its proxier with the gate on
	// (before 1.37, component-base panics on a metric not registered).
	multicluster.RegisterMetrics()
	d.proxier = multicluster.NewProxier(klog.Background(), withdrawals{Provider: provider, d: d}, opts, nil)
	d.proxier.OnServiceSynced()
	d.proxier.OnEndpointSlicesSynced()
	d.proxier.MultiClusterSynced()
	// As kube-proxy does with the gate on.
	d.proxier.SweepConntrack(ctx)
	go d.proxier.SyncLoop()
	return d
}

// endpoint starts an echo server for an endpoint address.
func (d *dataplane) endpoint(name, ip string, ports ...string) {
	d.t.Helper()
	args := []string{"ip", "addr", "add", ip + "/32", "dev", "lo"}
	if strings.Contains(ip, ":") {
		// nodad: a tentative address cannot be bound yet.
		args = []string{"ip", "-6", "addr", "add", ip + "/128", "dev", "lo", "nodad"}
	}
	netns.Run(d.t, args[0], args[1:]...)
	for _, p := range ports {
		network, port, _ := strings.Cut(p, "/")
		if err := echoserver.Serve(d.ctx, network, net.JoinHostPort(ip, port), name); err != nil {
			d.t.Fatal(err)
		}
	}
}

// settle waits until every change made so far is in the kernel: it adds a
// fresh local Service and waits for its IP to appear in the rules, which
// are always written whole.
func (d *dataplane) settle() {
	d.t.Helper()
	d.canary++
	// Each IP family has its own proxier with its own sync loop: the canary
	// has an address of each, and the change has reached both only when
	// both addresses are in the rules.
	v4, v6 := fmt.Sprintf("10.96.200.%d", d.canary), fmt.Sprintf("fd00:10:96::c:%x", d.canary)
	svc := localService("canary", fmt.Sprintf("canary-%d", d.canary), v4)
	svc.Spec.ClusterIPs = []string{v4, v6}
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	d.proxier.OnServiceAdd(svc)
	deadline := time.Now().Add(30 * time.Second)
	for rules := d.rules(); !strings.Contains(rules, v4) || !strings.Contains(rules, v6); rules = d.rules() {
		if time.Now().After(deadline) {
			d.t.Fatalf("rules did not pick up a change within 30s:\n%s", d.rules())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *dataplane) rules() string {
	var cmd *exec.Cmd
	if d.mode == kubeproxyconfig.ProxyModeNFTables {
		cmd = exec.Command("nft", "list", "ruleset")
	} else {
		// A Service without endpoints only has a REJECT rule in the filter table.
		cmd = exec.Command("sh", "-c", "iptables-save; ip6tables-save")
	}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// answers makes n connections to addr and returns who answered, sorted
// and deduplicated; failed connections are not counted.
func (d *dataplane) answers(network, addr string, n int) []string {
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		if name, err := echoserver.Ask(network, addr, 300*time.Millisecond); err == nil {
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

func localService(ns, name, ip string) *v1.Service {
	family := v1.IPv4Protocol
	if strings.Contains(ip, ":") {
		family = v1.IPv6Protocol
	}
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, IPFamilies: []v1.IPFamily{family},
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
}

func serviceImport(name string, ips []string, ports ...mcsv1beta1.ServicePort) *mcsv1beta1.ServiceImport {
	if len(ports) == 0 {
		ports = []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}
	}
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.Now(), Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: ips, Ports: ports},
	}
}

type ep struct {
	ip                          string
	ready, serving, terminating bool
	node                        string
	// zone is the endpoint's zone; it gets the zone hint the controller
	// writes for trafficDistribution PreferClose.
	zone string
}

func readyEP(ip string) ep { return ep{ip: ip, ready: true, serving: true} }

func slice(importName, cluster string, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: importName + "-" + cluster, Labels: map[string]string{
			mcsv1beta1.LabelServiceName:   importName,
			mcsv1beta1.LabelSourceCluster: cluster,
			discoveryv1.LabelManagedBy:    mcsproxy.DefaultManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, e := range eps {
		if strings.Contains(e.ip, ":") {
			s.AddressType = discoveryv1.AddressTypeIPv6
		}
		endpoint := discoveryv1.Endpoint{
			Addresses:  []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: &e.ready, Serving: &e.serving, Terminating: &e.terminating},
		}
		if e.node != "" {
			endpoint.NodeName = &e.node
		}
		if e.zone != "" {
			endpoint.Zone = &e.zone
			endpoint.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: e.zone}}}
		}
		s.Endpoints = append(s.Endpoints, endpoint)
	}
	return s
}

func port(name string, protocol v1.Protocol, n int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Protocol: &protocol, Port: &n}
}

var httpPort = []discoveryv1.EndpointPort{port("http", v1.ProtocolTCP, 8080)}

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/prometheus"
)

// TestMonitoring runs deploy/monitoring as an operator would meet it, on
// a local clusterset of two clusters (a in eu, b in us; cluster selection
// on): a real Prometheus configured from the shipped PodMonitors (as
// prometheus-operator translates them: the controller's secure port with
// the mcs-metrics-scraper ServiceAccount's token, which scrape.yaml's RBAC
// lets read /metrics and nothing else; every node's kube-proxy, its node
// label from the PodMonitor's relabeling) and the shipped rules (their
// `for` shortened to seconds). On a healthy clusterset no alert fires.
// Then a type conflict, a local Service given a clusterset IP by its load
// balancer, an
// export whose selector matches no cluster and one whose selector chooses
// another cluster: each alert about them fires, and every query of the
// shipped dashboard returns data. A member's apiserver stopped fires the
// member alert.
func TestMonitoring(t *testing.T) {
	runBeside(t)
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" {
		t.Skipf("monitoring runs on a local clusterset of its own, not on MCS_E2E_PROVIDER=%s", p)
	}
	bin := prometheus.Tool(t, "prometheus")
	opts := clusterset.Options{Clusters: 2, Prefix: "e2emon",
		KubeProxyArgs: []string{"--feature-gates=MultiClusterServices=true,MultiClusterServiceClusterSelection=true"}}
	for _, p := range []string{"cluster-a=" + regionProperty + "=eu", "cluster-b=" + regionProperty + "=us"} {
		if err := opts.AddClusterProperty(p); err != nil {
			t.Fatal(err)
		}
	}
	gate := "--feature-gates=MultiClusterServiceClusterSelection=true"
	l := upLocalOpts(t, opts, false, gate)
	ms := l.members()
	a, b := ms[0], ms[1]
	// The controller's home is b, where its leader election Lease is
	// (the harness's choice, so that a's outage keeps its leadership): it
	// serves /metrics on its secure port to callers b authorizes, as in
	// its Deployment. (Were the cluster that authorizes the scrapes
	// stopped, Prometheus would see no controller at all: the
	// MCSControllerNoLeader alert, which also covers "none is scraped".)
	hub := l.cluster(b).API
	securePort, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l.restartController(t, gate, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", securePort),
		"--authentication-kubeconfig="+hub.Kubeconfig(), "--authorization-kubeconfig="+hub.Kubeconfig())
	scrape := filepath.Join("..", "..", "deploy", "monitoring", "scrape.yaml")
	token := scraperToken(t, hub, scrape)

	// Each node's kube-proxy serves its metrics on the node's loopback
	// (127.0.0.1:10249, as by default): a forwarder on a loopback address
	// of the host of its own stands for the node's address, so that the
	// PodMonitor's relabeling (the pod IP, port 10249) finds it.
	var proxies []prometheus.Pod
	for i, c := range l.clusters {
		for j, n := range c.Nodes {
			ip := fmt.Sprintf("127.0.%d.%d", 100+i, 1+j)
			if err := netns.Expose(t.Context(), n.Netns, "127.0.0.1:10249", ip+":10249"); err != nil {
				t.Fatal(err)
			}
			proxies = append(proxies, prometheus.Pod{Namespace: "kube-system", Name: "kube-proxy-" + n.Name, IP: ip, Node: n.Name})
		}
	}
	manifests, err := os.ReadFile(scrape)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := prometheus.ScrapeConfigs(manifests, prometheus.Discovery{
		Pods: map[string][]prometheus.Pod{
			"mcs-system/mcs-controller": {{Namespace: "mcs-system", Name: "mcs-controller", IP: "127.0.0.1", Ports: map[string]int{"https": securePort}}},
			"kube-system/kube-proxy":    proxies,
		},
		Secrets: map[string]string{"mcs-system/mcs-metrics-scraper-token/token": token},
	}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := prometheus.Rules(filepath.Join("..", "..", "deploy", "monitoring", "prometheusrule.yaml"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	prom := prometheus.Start(t, bin, t.TempDir(), jobs, rules)
	eventually(t, 60*time.Second, "Prometheus to scrape the controller and every kube-proxy", func() (bool, string) {
		targets, err := prom.Targets()
		if err != nil {
			return false, err.Error()
		}
		up := 0
		for _, h := range targets {
			if strings.HasPrefix(h, "up ") {
				up++
			}
		}
		return up == 1+len(proxies), fmt.Sprint(targets)
	})

	s := &suite{p: l, a: a, b: b, top: t}
	sp := s.space(t, "e2e-monitoring")
	// Healthy: a name exported from both clusters, served.
	sp.service(a, "web", nil)
	sp.service(b, "web", nil)
	sp.echoPods(a, "web", "web-a-1")
	sp.echoPods(b, "web", "web-b-1")
	sp.export(a, "web")
	sp.export(b, "web")
	sp.vip(b, "web")
	eventually(t, 60*time.Second, "the rules evaluated over the controller's and kube-proxies' series", func() (bool, string) {
		v, err := prom.Value(`count(mcs:clusterset_ips:utilization) + count(kubeproxy_multicluster_programmed_service_imports > 0)`)
		return err == nil && v == "3", fmt.Sprintf("query gave %q (%v)", v, err)
	})
	time.Sleep(6 * time.Second) // longer than every shortened `for`
	if firing, err := prom.Alerts("firing"); err != nil || len(firing) > 0 {
		t.Errorf("alerts firing on a healthy clusterset: %v (%v)", firing, err)
	}

	// A type conflict: a exports a ClusterSetIP Service first, b a
	// headless one of the same name.
	sp.service(a, "db", nil)
	sp.service(b, "db", func(spec *v1.ServiceSpec) { spec.ClusterIP = v1.ClusterIPNone })
	sp.export(a, "db")
	sp.vip(b, "db")
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a one-second resolution
	sp.export(b, "db")
	// A load balancer of b (of a class of its own, which the harness's
	// leaves alone) gives a local Service an address inside the
	// clusterset range, twice (the alert is about rejections that keep
	// coming). The admission policy keeps cluster and external IPs out of
	// the range; a Service's status is written by whoever implements its
	// class, and kube-proxy refuses it there.
	squatter := sp.service(b, "squatter", func(spec *v1.ServiceSpec) {
		spec.Type = v1.ServiceTypeLoadBalancer
		spec.LoadBalancerClass = ptr.To("example.com/elsewhere")
	})
	setIngress := func(ip string) {
		t.Helper()
		squatter.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
		updated, err := b.Client.CoreV1().Services(sp.name).UpdateStatus(t.Context(), squatter, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		squatter = updated
	}
	setIngress("10.250.255.250")
	eventually(t, 60*time.Second, "b's kube-proxy to count the refused load-balancer IP", func() (bool, string) {
		v, err := prom.Value(`kubeproxy_multicluster_rejections_total{kind="Service",reason="ClusterSetIPReserved"}`)
		return err == nil && v == "1", fmt.Sprintf("%q (%v)", v, err)
	})
	setIngress("10.250.255.251")
	// An export whose selector matches no cluster: every source cluster
	// serves (the fallback); one whose selector chooses a's: b's
	// kube-proxy changes to a's endpoints.
	sp.service(a, "lonely", nil)
	exportSelected(t, sp, a, "lonely", []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{MatchProperties: map[string]string{regionProperty: "mars"}}}})
	sp.service(a, "near", nil)
	sp.service(b, "near", nil)
	sp.echoPods(a, "near", "near-a-1")
	eu := []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{MatchProperties: map[string]string{regionProperty: "eu"}}}}
	exportSelected(t, sp, a, "near", eu)
	exportSelected(t, sp, b, "near", eu)

	nodeB := l.cluster(b).Nodes[0].Name
	for _, want := range []string{
		"MCSExportConflicts",
		"KubeProxyRejectingServiceImports{node=" + nodeB + "}",
		"KubeProxyClusterSelectionFallback",
	} {
		eventually(t, 90*time.Second, want+" firing", func() (bool, string) {
			firing, err := prom.Alerts("firing")
			return slices.Contains(firing, want), fmt.Sprintf("firing: %v (%v)", firing, err)
		})
	}
	// Every panel of the dashboard shows something.
	dashboard, err := prometheus.ReadDashboard(filepath.Join("..", "..", "deploy", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	exprs := dashboard.Queries()
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	eventually(t, 60*time.Second, "every dashboard query to return data", func() (bool, string) {
		var empty []string
		for _, q := range exprs {
			samples, err := prom.Query(q)
			if err != nil || len(samples) == 0 {
				empty = append(empty, fmt.Sprintf("%s (%v)", q, err))
			}
		}
		return len(empty) == 0, "no data: " + strings.Join(empty, "; ")
	})

	// A member stopped: the member alert fires, and once its endpoint
	// lease runs out (the local controller's 10 s), the alert that its
	// endpoints are withdrawn.
	restart := l.stopAPIServer(t, a)
	eventually(t, 90*time.Second, "MCSMemberUnreachable firing for the stopped member", func() (bool, string) {
		firing, err := prom.Alerts("firing")
		return slices.Contains(firing, "MCSMemberUnreachable"), fmt.Sprintf("firing: %v (%v)", firing, err)
	})
	withdrawn := "MCSSourceEndpointsWithdrawn{cluster=" + a.Name + "}"
	eventually(t, 90*time.Second, withdrawn+" firing once the stopped member's lease ran out", func() (bool, string) {
		firing, err := prom.Alerts("firing")
		return slices.Contains(firing, withdrawn), fmt.Sprintf("firing: %v (%v)", firing, err)
	})
	restart(t)
}

// scraperToken applies scrape.yaml's RBAC (all but the PodMonitors, whose
// CRD is prometheus-operator's) to the hub and returns a token of the
// mcs-metrics-scraper ServiceAccount, the identity its Secret gives
// Prometheus.
func scraperToken(t *testing.T, hub *framework.Cluster, path string) string {
	t.Helper()
	ctx := t.Context()
	// The controller's namespace, where the scraper's ServiceAccount lives.
	if _, err := hub.Client().CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mcs-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	applyManifest(t, hub.RESTConfig(), path, nil, func(obj *unstructured.Unstructured) bool { return obj.GetKind() == "PodMonitor" })
	tr, err := hub.Client().CoreV1().ServiceAccounts("mcs-system").CreateToken(ctx, "mcs-metrics-scraper",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

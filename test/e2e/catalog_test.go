package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/crds"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
	catalogclientset "k8s.io/multiclusterservices/client/catalog/clientset/versioned"
	catalogclient "k8s.io/multiclusterservices/client/catalog/clientset/versioned/typed/catalog/v1alpha1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
)

// TestCatalog runs the service catalog on a clusterset of three
// clusters whose hub is cluster-a, as federated teams use it: team A owns
// namespace frontend in cluster-a and apps in cluster-b, team B frontend in
// cluster-b and shop in cluster-c. It starts with the export model and
// switches to the catalog, then plays the catalog's stories: teams that cannot agree on names.
func TestCatalog(t *testing.T) {
	runBeside(t)
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" {
		t.Skipf("the catalog cases run on a local clusterset, not on MCS_E2E_PROVIDER=%s", p)
	}
	l := upLocalOpts(t, clusterset.Options{Clusters: 3, Prefix: "e2ecat"}, false)
	ms := l.members()
	catalogCases(t, &catalogSuite{suite: &suite{p: l, a: ms[0], b: ms[1], top: t}, l: l, c: ms[2], hubMember: ms[0]})
}

// TestCatalogPullMode runs TestCatalog's cases in pull mode, the catalog
// in the hub (cluster-c, doubling as a member): the planner switches to
// the catalog's model and back (--service-model), names in each member's
// MemberCluster the Services bindings name there, which its agent
// publishes, and plans each global service under each local name it is
// placed at; each agent writes its own cluster's part.
func TestCatalogPullMode(t *testing.T) {
	runBeside(t)
	if p := os.Getenv("MCS_E2E_PROVIDER"); p != "" && p != "local" {
		t.Skipf("the catalog cases run on a local clusterset, not on MCS_E2E_PROVIDER=%s", p)
	}
	l := upLocalPull(t, clusterset.Options{Clusters: 3, Prefix: "e2ecatp"})
	ms := l.members()
	catalogCases(t, &catalogSuite{suite: &suite{p: l, a: ms[0], b: ms[1], top: t}, l: l, c: ms[2], hubMember: ms[2]})
}

// catalogCases are the catalog's cases both modes share.
func catalogCases(t *testing.T, s *catalogSuite) {
	s.setUpHub(t)
	t.Run("the export model, then a switch to the catalog: the clusterset IP and the traffic stay", s.testSwitch)
	t.Run("independent names: team A's and team B's frontend/authz, each only where imported", s.testIndependentNames)
	t.Run("a shared service imported under another name where the namespace differs, changed at run time", s.testShared)
	t.Run("a machine outside Kubernetes served like a cluster's endpoints", s.testMachine)
	t.Run("a team denied another team's names", s.testDenied)
	t.Run("figure: catalog change to rules in the consumer, against an export", s.testFigure)
	t.Run("a switch back to the export model: exported names keep their clusterset IP, the catalog's others go", s.testSwitchBack)
}

type catalogSuite struct {
	*suite
	l *local
	c *member
	// hubMember is the member that holds the catalog: cluster-a, or in
	// pull mode the hub.
	hubMember *member
	hub       catalogclient.CatalogV1alpha1Interface
	clients   map[*member]*pod
	// exportLatencies are the export model's, measured before the switch.
	exportLatencies []time.Duration
}

// setUpHub installs the catalog in cluster-a (its CRDs and RBAC, the
// teams' namespaces) and the namespaces the teams own in the members.
func (s *catalogSuite) setUpHub(t *testing.T) {
	ctx := t.Context()
	hubCfg := s.l.cluster(s.hubMember).API.RESTConfig()
	all, err := crds.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, clientset.NewForConfigOrDie(hubCfg), all...); err != nil {
		t.Fatal(err)
	}
	s.hub = catalogclientset.NewForConfigOrDie(hubCfg).CatalogV1alpha1()
	applyManifest(t, hubCfg, filepath.Join("..", "..", "deploy", "catalog", "catalog-rbac.yaml"), nil, nil)
	for team, owns := range map[string]string{"team-a": "cluster-a/frontend,cluster-b/apps,e2e-cat-switch", "team-b": "cluster-b/frontend,cluster-c/shop"} {
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team, Annotations: map[string]string{catalogv1alpha1.AnnotationMemberNamespaces: owns}}}
		if _, err := s.hubMember.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for m, namespaces := range map[*member][]string{s.a: {"frontend"}, s.b: {"frontend", "apps"}, s.c: {"shop"}} {
		for _, ns := range namespaces {
			createCaseNamespace(t, m, ns)
		}
	}
	// Clients in every member.
	sp := s.space(t, "e2e-cat-clients")
	s.clients = map[*member]*pod{}
	for _, m := range []*member{s.a, s.b, s.c} {
		s.clients[m] = sp.client(m, "client")
	}
}

// switchModel restarts what plans the clusterset in the catalog's model
// (catalog) or the exports': the controller, with the hub as
// --hub-context, or in pull mode the planner, whose kubeconfig is the
// hub's.
func (s *catalogSuite) switchModel(t *testing.T, catalog bool) {
	t.Helper()
	var args []string
	if catalog {
		args = append(args, "--service-model=catalog")
	}
	if s.l.pull != nil {
		s.l.restartPlanner(t, args...)
		return
	}
	if catalog {
		args = append(args, "--hub-context="+s.hubMember.Name)
	}
	s.l.restartController(t, args...)
}

// createGlobal, createBinding and createImport write a catalog object
// into the hub as its administrator.
func (s *catalogSuite) createGlobal(t *testing.T, ns, name string, spec catalogv1alpha1.GlobalServiceSpec) {
	t.Helper()
	o := &catalogv1alpha1.GlobalService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if _, err := s.hub.GlobalServices(ns).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating GlobalService %s/%s: %v", ns, name, err)
	}
}

func (s *catalogSuite) createBinding(t *testing.T, ns, name string, spec catalogv1alpha1.ServiceBindingSpec) {
	t.Helper()
	o := &catalogv1alpha1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if _, err := s.hub.ServiceBindings(ns).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ServiceBinding %s/%s: %v", ns, name, err)
	}
}

func (s *catalogSuite) createImport(t *testing.T, ns, name string, spec catalogv1alpha1.GlobalServiceImportSpec) {
	t.Helper()
	o := &catalogv1alpha1.GlobalServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if _, err := s.hub.GlobalServiceImports(ns).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating GlobalServiceImport %s/%s: %v", ns, name, err)
	}
}

// condition returns "Status/Reason" of a catalog object's condition; kind
// is GlobalService, ServiceBinding or GlobalServiceImport.
func (s *catalogSuite) condition(t *testing.T, kind, ns, name, typ string) string {
	t.Helper()
	var conds []metav1.Condition
	var err error
	switch kind {
	case "GlobalService":
		var o *catalogv1alpha1.GlobalService
		if o, err = s.hub.GlobalServices(ns).Get(t.Context(), name, metav1.GetOptions{}); err == nil {
			conds = o.Status.Conditions
		}
	case "ServiceBinding":
		var o *catalogv1alpha1.ServiceBinding
		if o, err = s.hub.ServiceBindings(ns).Get(t.Context(), name, metav1.GetOptions{}); err == nil {
			conds = o.Status.Conditions
		}
	case "GlobalServiceImport":
		var o *catalogv1alpha1.GlobalServiceImport
		if o, err = s.hub.GlobalServiceImports(ns).Get(t.Context(), name, metav1.GetOptions{}); err == nil {
			conds = o.Status.Conditions
		}
	default:
		t.Fatalf("no catalog kind %s", kind)
	}
	if err != nil {
		return err.Error()
	}
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return fmt.Sprintf("%v/%v", c.Status, c.Reason)
	}
	return ""
}

func bindService(cluster, ns, name string) catalogv1alpha1.ServiceBindingSpec {
	return catalogv1alpha1.ServiceBindingSpec{GlobalService: name, Cluster: cluster, Service: &catalogv1alpha1.LocalName{Namespace: ns, Name: name}}
}

func catalogImport(globalNS, global, cluster, ns, name string) catalogv1alpha1.GlobalServiceImportSpec {
	return catalogv1alpha1.GlobalServiceImportSpec{GlobalService: catalogv1alpha1.GlobalServiceRef{Namespace: globalNS, Name: global}, Cluster: cluster,
		LocalName: catalogv1alpha1.LocalName{Namespace: ns, Name: name}}
}

// importIn waits for m's ServiceImport ns/name written for the catalog
// and returns its clusterset IP.
func (s *catalogSuite) importIn(t *testing.T, m *member, ns, name, global string) string {
	t.Helper()
	var ip string
	eventually(t, 60*time.Second, fmt.Sprintf("%s's import %s/%s of %s", m.Name, ns, name, global), func() (bool, string) {
		si, err := m.MCS.MulticlusterV1beta1().ServiceImports(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(si.Spec.IPs) > 0 {
			ip = si.Spec.IPs[0]
		}
		return si.Annotations[catalog.AnnotationGlobalService] == global && ip != "", fmt.Sprint(si.Annotations, si.Spec.IPs)
	})
	return ip
}

func (s *catalogSuite) noImport(t *testing.T, m *member, ns, name string) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("no import %s/%s in %s", ns, name, m.Name), func() (bool, string) {
		_, err := m.MCS.MulticlusterV1beta1().ServiceImports(ns).Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), errString(err)
	})
}

// servePods creates Service ns/name selecting app=name in m and echo pods.
func (s *catalogSuite) servePods(t *testing.T, m *member, ns, name string, pods ...string) []string {
	t.Helper()
	sp := &space{s: s.suite, t: t, name: ns}
	sp.service(m, name, nil)
	return podNames(sp.echoPods(m, name, pods...))
}

func (s *catalogSuite) testSwitch(t *testing.T) {
	sp := s.space(t, "e2e-cat-switch")
	sp.service(s.a, "web", nil)
	pods := podNames(sp.echoPods(s.a, "web", "web-a-1"))
	// The figure's export half: a Service exported, to its rules in b.
	for i := range 5 {
		name := fmt.Sprintf("fig-%d", i)
		sp.service(s.a, name, nil)
		start := time.Now()
		sp.export(s.a, name)
		s.exportLatencies = append(s.exportLatencies, s.untilRules(t, s.b, sp.name, name, start))
	}
	sp.export(s.a, "web")
	vip := sp.vip(s.b, "web")
	client := s.clients[s.b]
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 10, pods)

	// The same in the catalog, imported everywhere under the same name;
	// then the controller is switched.
	s.createGlobal(t, "team-a", "web", catalogv1alpha1.GlobalServiceSpec{
		ImportPolicy: catalogv1alpha1.ImportAll, DefaultName: &catalogv1alpha1.LocalName{Namespace: sp.name, Name: "web"}})
	s.createBinding(t, "team-a", "web-a", bindService("cluster-a", sp.name, "web"))
	s.switchModel(t, true)
	if ip := s.importIn(t, s.b, sp.name, "web", "team-a/web"); ip != vip {
		t.Errorf("the clusterset IP changed with the switch: %s, was %s", ip, vip)
	}
	waitAnswers(t, client, "tcp", hostPort(vip, 80), 10, pods)
	eventually(t, 30*time.Second, "global service web Ready", func() (bool, string) {
		got := s.condition(t, "GlobalService", "team-a", "web", "Ready")
		return got == "True/Ready", got
	})
}

func (s *catalogSuite) testIndependentNames(t *testing.T) {
	podsA := s.servePods(t, s.a, "frontend", "authz", "authz-a-1")
	podsB := s.servePods(t, s.b, "frontend", "authz", "authz-b-1")
	for team, m := range map[string]*member{"team-a": s.a, "team-b": s.b} {
		s.createGlobal(t, team, "authz", catalogv1alpha1.GlobalServiceSpec{})
		s.createBinding(t, team, "authz", bindService(m.Name, "frontend", "authz"))
		s.createImport(t, team, "authz", catalogImport("", "authz", m.Name, "frontend", "authz"))
	}
	ipA := s.importIn(t, s.a, "frontend", "authz", "team-a/authz")
	ipB := s.importIn(t, s.b, "frontend", "authz", "team-b/authz")
	if ipA == ipB {
		t.Errorf("team A's and team B's authz share the clusterset IP %s", ipA)
	}
	byName := hostPort("authz.frontend.svc.clusterset.local", 80)
	waitAnswers(t, s.clients[s.a], "tcp", byName, 10, podsA)
	waitAnswers(t, s.clients[s.b], "tcp", byName, 10, podsB)
	// Selective: nobody else has either, nor rules for them.
	s.noImport(t, s.c, "frontend", "authz")
	if _, err := s.a.MCS.MulticlusterV1beta1().ServiceImports("frontend").Get(t.Context(), "authz", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.ruleset(t.Context(), s.c)
	if err != nil {
		t.Fatal(err)
	}
	if hasIP(rs, ipA) || hasIP(rs, ipB) {
		t.Errorf("cluster-c, which imports neither, has rules for %s or %s", ipA, ipB)
	}
}

func (s *catalogSuite) testShared(t *testing.T) {
	podsA := podNames(map[string]string{"authz-a-1": ""})
	// A shares its authz with B, who imports it into cluster-c as
	// shop/authz-a: cluster-c has no namespace frontend.
	g, err := s.hub.GlobalServices("team-a").Get(t.Context(), "authz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g.Spec.Consumers = []string{"team-b"}
	if _, err := s.hub.GlobalServices("team-a").Update(t.Context(), g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.createImport(t, "team-b", "authz-a", catalogImport("team-a", "authz", "cluster-c", "shop", "authz-a"))
	ip := s.importIn(t, s.c, "shop", "authz-a", "team-a/authz")
	if ipA := s.importIn(t, s.a, "frontend", "authz", "team-a/authz"); ip != ipA {
		t.Errorf("one global service, two clusterset IPs: %s in c, %s in a", ip, ipA)
	}
	byName := hostPort("authz-a.shop.svc.clusterset.local", 80)
	waitAnswers(t, s.clients[s.c], "tcp", byName, 10, podsA)
	eventually(t, 30*time.Second, "team B's import Ready", func() (bool, string) {
		got := s.condition(t, "GlobalServiceImport", "team-b", "authz-a", "Ready")
		return got == "True/Imported", got
	})
	// Withdrawn and given again at run time.
	if err := s.hub.GlobalServiceImports("team-b").Delete(t.Context(), "authz-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.noImport(t, s.c, "shop", "authz-a")
	s.waitRules(t, s.c, 30*time.Second, nil, []string{ip})
	s.createImport(t, "team-b", "authz-a", catalogImport("team-a", "authz", "cluster-c", "shop", "authz-a"))
	s.importIn(t, s.c, "shop", "authz-a", "team-a/authz")
	waitAnswers(t, s.clients[s.c], "tcp", byName, 10, podsA)
}

func (s *catalogSuite) testMachine(t *testing.T) {
	vm, err := s.l.cs.AddMachine("db", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Start(s.l.echoserver, "--port=8080"); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	s.createGlobal(t, "team-a", "db", catalogv1alpha1.GlobalServiceSpec{})
	s.createBinding(t, "team-a", "db-vm", catalogv1alpha1.ServiceBindingSpec{
		GlobalService: "db", Cluster: "cluster-a",
		Endpoints: []catalogv1alpha1.BoundEndpoint{{Address: vm.IP}},
		Ports:     []catalogv1alpha1.BoundPort{{Name: "tcp", Port: 80, TargetPort: 8080}},
	})
	s.createImport(t, "team-a", "db", catalogImport("", "db", "cluster-b", "apps", "db"))
	ip := s.importIn(t, s.b, "apps", "db", "team-a/db")
	// The machine's echo server answers with the host's name (a network
	// namespace has no name of its own).
	waitAnswers(t, s.clients[s.b], "tcp", hostPort(ip, 80), 5, []string{host})
	waitAnswers(t, s.clients[s.b], "tcp", hostPort("db.apps.svc.clusterset.local", 80), 5, []string{host})
	eventually(t, 30*time.Second, "the machine's binding Ready", func() (bool, string) {
		got := s.condition(t, "ServiceBinding", "team-a", "db-vm", "Ready")
		return got == "True/EndpointsReady", got
	})

	// A health check the machine fails takes it out, and says why. (The
	// controller probes from the host, which the harness keeps off the
	// clusterset's network: its probes fail as against a machine down.)
	b, err := s.hub.ServiceBindings("team-a").Get(t.Context(), "db-vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.HealthCheck = &catalogv1alpha1.HealthCheck{Port: "tcp", PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1}
	if _, err := s.hub.ServiceBindings("team-a").Update(t.Context(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the failing machine's binding not Ready, with its probe's verdict", func() (bool, string) {
		got := s.condition(t, "ServiceBinding", "team-a", "db-vm", "Ready")
		b, err := s.hub.ServiceBindings("team-a").Get(t.Context(), "db-vm", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		eps := b.Status.Endpoints
		return got == "False/NoReadyEndpoints" && len(eps) == 1, fmt.Sprint(got, eps)
	})
	eventually(t, 30*time.Second, "no answer from the machine", func() (bool, string) {
		got := s.clients[s.b].answers("tcp", hostPort(ip, 80), 3)
		return len(got) == 0, fmt.Sprint(got)
	})
}

func (s *catalogSuite) testDenied(t *testing.T) {
	// Team B binds team A's Service in cluster-a under a global service of
	// its own, and imports into team A's namespace: both refused, and
	// neither reaches a cluster.
	s.createGlobal(t, "team-b", "steal", catalogv1alpha1.GlobalServiceSpec{})
	s.createBinding(t, "team-b", "steal", bindService("cluster-a", "frontend", "authz"))
	s.createImport(t, "team-b", "steal", catalogImport("", "steal", "cluster-a", "frontend", "steal"))
	eventually(t, 30*time.Second, "team B's binding and import refused", func() (bool, string) {
		b := s.condition(t, "ServiceBinding", "team-b", "steal", "Valid")
		i := s.condition(t, "GlobalServiceImport", "team-b", "steal", "Valid")
		return b == "False/"+catalog.ReasonNamespaceNotOwned && i == "False/"+catalog.ReasonNamespaceNotOwned, b + " " + i
	})
	s.noImport(t, s.a, "frontend", "steal")
	events, err := s.hubMember.Client.CoreV1().Events("team-b").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=steal"})
	if err != nil || len(events.Items) == 0 {
		t.Errorf("no event on team B's refused objects (%v)", err)
	}
}

func (s *catalogSuite) testFigure(t *testing.T) {
	var latencies []time.Duration
	for i := range 5 {
		name := fmt.Sprintf("fig-%d", i)
		s.servePods(t, s.a, "frontend", name)
		s.createGlobal(t, "team-a", name, catalogv1alpha1.GlobalServiceSpec{})
		s.createImport(t, "team-a", name, catalogImport("", name, "cluster-b", "apps", name))
		start := time.Now()
		s.createBinding(t, "team-a", name, bindService("cluster-a", "frontend", name))
		latencies = append(latencies, s.untilRules(t, s.b, "apps", name, start))
	}
	p := func(d []time.Duration, q float64) time.Duration {
		d = slices.Clone(d)
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[int(q*float64(len(d)-1)+0.5)].Round(time.Millisecond)
	}
	t.Logf("FIGURE catalog: change to rules in cluster-b's node over %d changes each: catalog (ServiceBinding created) p50 %v p99 %v; export (ServiceExport created) p50 %v p99 %v; p50 ratio %.2f",
		len(latencies), p(latencies, 0.5), p(latencies, 0.99), p(s.exportLatencies, 0.5), p(s.exportLatencies, 0.99),
		float64(p(latencies, 0.5))/float64(p(s.exportLatencies, 0.5)))
}

// untilRules returns the time from start until m's node has rules for
// import ns/name's clusterset IP (polled: the API for the IP, then the
// node's ruleset).
func (s *catalogSuite) untilRules(t *testing.T, m *member, ns, name string, start time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		si, err := m.MCS.MulticlusterV1beta1().ServiceImports(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && si.Spec.Type == mcsv1beta1.ClusterSetIP && len(si.Spec.IPs) > 0 {
			if rs, err := s.ruleset(ctx, m); err == nil && hasIP(rs, si.Spec.IPs[0]) {
				return time.Since(start)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no rules for %s/%s in %s", ns, name, m.Name)
	return 0
}

func (s *catalogSuite) testSwitchBack(t *testing.T) {
	vip := s.importIn(t, s.b, "e2e-cat-switch", "web", "team-a/web")
	s.switchModel(t, false)
	eventually(t, 60*time.Second, "b's import e2e-cat-switch/web written by the export model", func() (bool, string) {
		si, err := s.b.MCS.MulticlusterV1beta1().ServiceImports("e2e-cat-switch").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return si.Annotations[catalog.AnnotationGlobalService] == "" && len(si.Spec.IPs) > 0, fmt.Sprint(si.Annotations, si.Spec.IPs)
	})
	si, _ := s.b.MCS.MulticlusterV1beta1().ServiceImports("e2e-cat-switch").Get(t.Context(), "web", metav1.GetOptions{})
	if si.Spec.IPs[0] != vip {
		t.Errorf("the clusterset IP changed with the switch back: %s, was %s", si.Spec.IPs[0], vip)
	}
	waitAnswers(t, s.clients[s.b], "tcp", hostPort(vip, 80), 10, []string{"web-a-1"})
	// Nothing exports shop/authz-a: it goes.
	s.noImport(t, s.c, "shop", "authz-a")
}

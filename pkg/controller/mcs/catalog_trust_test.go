package mcs

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/component-base/metrics"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/utils/ptr"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/catalogmodel"
	catalogfake "k8s.io/multiclusterservices/client/catalog/clientset/versioned/fake"
)

// Attacks of a team on the catalog's controller, through objects its
// RBAC lets it write in its own hub namespace.

var trustEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func catalogGlobal(ns, name string) *catalogv1alpha1.GlobalService {
	return &catalogv1alpha1.GlobalService{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "GlobalService"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec:       catalogv1alpha1.GlobalServiceSpec{ImportPolicy: catalogv1alpha1.ImportSelected},
	}
}

// catalogAddresses is binding ns/name of addrs as cluster's, to global
// service db, made age minutes after trustEpoch, health-checked when hc.
func catalogAddresses(ns, name string, age int, cluster string, hc bool, addrs ...string) *catalogv1alpha1.ServiceBinding {
	b := &catalogv1alpha1.ServiceBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "ServiceBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1,
			CreationTimestamp: metav1.NewTime(trustEpoch.Add(time.Duration(age) * time.Minute))},
		Spec: catalogv1alpha1.ServiceBindingSpec{GlobalService: "db", Cluster: cluster,
			Ports: []catalogv1alpha1.BoundPort{{Name: "tcp", Port: 5432}}},
	}
	for _, a := range addrs {
		b.Spec.Endpoints = append(b.Spec.Endpoints, catalogv1alpha1.BoundEndpoint{Address: a})
	}
	if hc {
		b.Spec.HealthCheck = &catalogv1alpha1.HealthCheck{PeriodSeconds: 1, TimeoutSeconds: 1}
	}
	return b
}

// bindingStatus is a binding's status in the hub.
func bindingStatus(t *testing.T, hub *catalogfake.Clientset, ns, name string) catalogv1alpha1.ServiceBindingStatus {
	t.Helper()
	b, err := hub.CatalogV1alpha1().ServiceBindings(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b.Status
}

func conditionOf(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return "none"
	}
	return string(c.Status) + "/" + c.Reason
}

// A team lists a network's addresses in health-checked bindings to learn
// from the controller which hosts answer: at most its own share of
// addresses is probed, and all teams together at most the global limit;
// the others are not ready, and each binding says so in a condition and
// an event. The limits raised, every address is probed.
func TestCatalogHealthChecksAreBounded(t *testing.T) {
	c, _, hub := newCatalogClusterset(t,
		catalogGlobal("team-a", "db"), catalogGlobal("team-b", "db"),
		catalogAddresses("team-a", "sweep", 0, "cluster-a", true, "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5"),
		// team-b owns shop in cluster-c: it may bind addresses as
		// cluster-c's.
		catalogAddresses("team-b", "vms", 1, "cluster-c", true, "198.51.100.1", "198.51.100.2"),
	)
	c.catalog.cfg.HealthProbesPerTeam, c.catalog.cfg.HealthProbes = 2, 3
	reg := withMetrics(c)
	syncCatalogAll(t, c)

	if probed, over := metricValue(t, reg, probedAddresses, "probed"), metricValue(t, reg, probedAddresses, "over_limit"); probed != 3 || over != 4 {
		t.Errorf("%v addresses probed and %v over the limits, want 3 (team-a's 2, then team-b's 1 under the global limit) and 4", probed, over)
	}
	for _, tc := range []struct {
		team, name  string
		unprobed    int
		limit, want string
	}{
		{"team-a", "sweep", 3, "limit per team", "3 of 5 addresses are not probed"},
		{"team-b", "vms", 1, "probes 3 addresses", "1 of 2 addresses are not probed"},
	} {
		st := bindingStatus(t, hub, tc.team, tc.name)
		cond := meta.FindStatusCondition(st.Conditions, catalog.ConditionHealthChecked)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != catalog.ReasonProbeLimitReached || !strings.Contains(cond.Message, tc.want) || !strings.Contains(cond.Message, tc.limit) {
			t.Errorf("%s/%s: HealthChecked %+v, want False/ProbeLimitReached saying %q and the %q limit", tc.team, tc.name, cond, tc.want, tc.limit)
		}
		unprobed := 0
		for _, eh := range st.Endpoints {
			if eh.Healthy {
				t.Errorf("%s/%s: %s healthy before any probe", tc.team, tc.name, eh.Address)
			}
			if strings.HasPrefix(eh.Message, "not probed: ") {
				unprobed++
			}
		}
		if unprobed != tc.unprobed {
			t.Errorf("%s/%s: %d addresses say they are not probed, want %d: %+v", tc.team, tc.name, unprobed, tc.unprobed, st.Endpoints)
		}
	}
	waitCache(t, "a ProbeLimitReached event on team-a's binding", func() bool {
		// The controller records through the events API; a real
		// apiserver shows the same events as core/v1 Events, the fake
		// keeps the two apart.
		events, _ := c.catalog.cfg.HubKube.EventsV1().Events("team-a").List(context.Background(), metav1.ListOptions{})
		for _, e := range events.Items {
			if e.Regarding.Name == "sweep" && e.Reason == catalog.ReasonProbeLimitReached && e.Type == v1.EventTypeWarning {
				return true
			}
		}
		return false
	})

	c.catalog.cfg.HealthProbesPerTeam, c.catalog.cfg.HealthProbes = catalogmodel.DefaultHealthProbesPerTeam, catalogmodel.DefaultHealthProbes
	syncCatalogAll(t, c)
	for _, b := range []string{"team-a/sweep", "team-b/vms"} {
		ns, name, _ := strings.Cut(b, "/")
		if got := conditionOf(bindingStatus(t, hub, ns, name).Conditions, catalog.ConditionHealthChecked); got != "True/Probed" {
			t.Errorf("%s under the default limits: HealthChecked %s", b, got)
		}
	}
}

// probedAddresses counts the addresses health checks probe (state
// "probed") and those over the limits ("over_limit").
const probedAddresses = "mcs_controller_catalog_health_check_addresses"

// withMetrics gives c a registry of its own, returned.
func withMetrics(c *Controller) metrics.KubeRegistry {
	reg := metrics.NewKubeRegistry()
	c.metrics = NewMetrics(reg)
	return reg
}

// A team that owns every namespace of the members (member-namespaces
// "*") binds kube-system's DNS Service to a global service it imports
// into shop in cluster-c, and imports into kube-system: the controller's
// refused namespaces hold in catalog mode as in the export model
// (Valid=False/NamespaceNotAllowed), and nothing of it reaches a member.
func TestCatalogRefusedNamespaces(t *testing.T) {
	dns := catalogGlobal("ops", "dns")
	kubeDNS := &catalogv1alpha1.ServiceBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "ServiceBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "kube-dns", Generation: 1},
		Spec: catalogv1alpha1.ServiceBindingSpec{GlobalService: "dns", Cluster: "cluster-a",
			Service: &catalogv1alpha1.LocalName{Namespace: "kube-system", Name: "kube-dns"}},
	}
	importOf := func(name, cluster, ns, local string) *catalogv1alpha1.GlobalServiceImport {
		return &catalogv1alpha1.GlobalServiceImport{
			TypeMeta:   metav1.TypeMeta{APIVersion: catalogv1alpha1.SchemeGroupVersion.String(), Kind: "GlobalServiceImport"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: name, Generation: 1},
			Spec: catalogv1alpha1.GlobalServiceImportSpec{GlobalService: catalogv1alpha1.GlobalServiceRef{Name: "dns"},
				Cluster: cluster, LocalName: catalogv1alpha1.LocalName{Namespace: ns, Name: local}},
		}
	}
	c, ms, hub := newCatalogClusterset(t, dns, kubeDNS, importOf("dns-in-c", "cluster-c", "shop", "dns"), importOf("into-kube-system", "cluster-a", "kube-system", "evil"))
	c.cfg.RefusedNamespaces = []string{"kube-system", "default"}
	ctx := context.Background()
	if _, err := c.catalog.cfg.HubKube.CoreV1().Namespaces().Create(ctx, hubNamespace("ops", "*"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, cc := ms["cluster-a"], ms["cluster-c"]
	for _, o := range []runtime.Object{
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}, Spec: v1.ServiceSpec{
			Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports:    []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(53)}},
		}},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns-x1", Labels: map[string]string{
				discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(v1.ProtocolUDP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.200.0.10"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		},
	} {
		var err error
		switch o := o.(type) {
		case *v1.Namespace:
			_, err = a.kube.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *v1.Service:
			_, err = a.kube.CoreV1().Services("kube-system").Create(ctx, o, metav1.CreateOptions{})
		case *discoveryv1.EndpointSlice:
			_, err = a.kube.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	waitCache(t, "team ops and kube-system/kube-dns in the caches", func() bool {
		_, err := c.catalog.teams.Get("ops")
		_, err2 := a.namespaces.Get("kube-system")
		return err == nil && err2 == nil && len(indexed[*discoveryv1.EndpointSlice](a.localSlices, byService, "kube-system/kube-dns")) == 1
	})
	syncCatalogAll(t, c)

	for _, o := range []struct {
		what  string
		conds []metav1.Condition
	}{
		{"the binding of kube-system/kube-dns", bindingStatus(t, hub, "ops", "kube-dns").Conditions},
		{"the import into kube-system", func() []metav1.Condition {
			conds, _ := hubStatus(t, hub, "GlobalServiceImport", "ops", "into-kube-system")
			return conds
		}()},
	} {
		if got := conditionOf(o.conds, catalog.ConditionValid); got != "False/"+catalog.ReasonNamespaceNotAllowed {
			t.Errorf("%s: Valid %s, want False/%s", o.what, got, catalog.ReasonNamespaceNotAllowed)
		}
	}
	if si, err := cc.mcs.MulticlusterV1beta1().ServiceImports("shop").Get(ctx, "dns", metav1.GetOptions{}); err == nil {
		t.Errorf("cluster-c imports kube-system's DNS as shop/dns: %+v", si.Spec)
	}
	if _, err := a.mcs.MulticlusterV1beta1().ServiceImports("kube-system").Get(ctx, "evil", metav1.GetOptions{}); err == nil {
		t.Error("cluster-a got an import in kube-system")
	}
}

// A team binds, as a cluster's endpoints, addresses that are not its to
// name: other teams' pods and nodes of a member, the clusterset IPs, or
// anything as a cluster where it owns no namespace. Each binding is
// refused, so its addresses are neither served nor probed.
func TestCatalogAddressesATeamMayNotName(t *testing.T) {
	c, ms, hub := newCatalogClusterset(t,
		catalogGlobal("team-a", "db"), catalogGlobal("team-b", "db"),
		catalogAddresses("team-a", "pods", 0, "cluster-a", true, "192.0.2.10", "10.244.1.9"),
		catalogAddresses("team-a", "node", 1, "cluster-a", true, "172.18.0.3"),
		catalogAddresses("team-a", "vips", 2, "cluster-a", true, "10.250.0.7"),
		catalogAddresses("team-a", "vms", 3, "cluster-a", true, "192.0.2.10"),
		// team-b owns nothing in cluster-a.
		catalogAddresses("team-b", "as-a", 4, "cluster-a", true, "192.0.2.20"),
	)
	b := ms["cluster-b"]
	if _, err := b.kube.CoreV1().Nodes().Create(context.Background(), &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "b-1"},
		Spec:       v1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "172.18.0.3"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "cluster-b's node in its cache", func() bool {
		cidrs, addrs := b.nodeRanges()
		return len(cidrs) == 1 && len(addrs) == 1
	})
	reg := withMetrics(c)
	syncCatalogAll(t, c)

	for _, tc := range []struct{ team, name, want, says string }{
		{"team-a", "pods", "False/" + catalog.ReasonInvalidEndpoints, "lies in the clusterset's Kubernetes networks"},
		{"team-a", "node", "False/" + catalog.ReasonInvalidEndpoints, "lies in the clusterset's Kubernetes networks"},
		{"team-a", "vips", "False/" + catalog.ReasonInvalidEndpoints, "lies in the clusterset's Kubernetes networks"},
		{"team-a", "vms", "True/" + catalog.ReasonValid, ""},
		{"team-b", "as-a", "False/" + catalog.ReasonNamespaceNotOwned, "owns no namespace in cluster cluster-a"},
	} {
		cond := meta.FindStatusCondition(bindingStatus(t, hub, tc.team, tc.name).Conditions, catalog.ConditionValid)
		if cond == nil || string(cond.Status)+"/"+cond.Reason != tc.want || !strings.Contains(cond.Message, tc.says) {
			t.Errorf("%s/%s: Valid %+v, want %s saying %q", tc.team, tc.name, cond, tc.want, tc.says)
		}
		// The oracle: the message names no other cluster, range or node
		// the team could map the clusterset's networks with.
		for _, secret := range []string{"cluster-b", "10.244.1.0", "172.18.0.3/32", "pod range", "node address"} {
			if cond != nil && strings.Contains(cond.Message, secret) {
				t.Errorf("%s/%s: Valid tells the team %q: %s", tc.team, tc.name, secret, cond.Message)
			}
		}
	}
	// One address probed, and it is vms's, the one valid binding.
	if probed := metricValue(t, reg, probedAddresses, "probed"); probed != 1 {
		t.Errorf("%v addresses probed, want 1: team-a/vms's", probed)
	}
	if got := conditionOf(bindingStatus(t, hub, "team-a", "vms").Conditions, catalog.ConditionHealthChecked); got != "True/"+catalog.ReasonProbed {
		t.Errorf("team-a/vms: HealthChecked %s", got)
	}
}

// The oracle: a team lists an address of the network the controller
// dials from in a health-checked binding, to learn which hosts there
// answer. The controller's own networks are refused like the clusterset's:
// the binding is neither served nor probed.
func TestCatalogRefusesTheControllersOwnNetworks(t *testing.T) {
	c, _, hub := newCatalogClusterset(t,
		catalogGlobal("team-a", "db"),
		catalogAddresses("team-a", "probe-own", 0, "cluster-a", true, "198.51.100.7"),
		catalogAddresses("team-a", "vms", 1, "cluster-a", true, "192.0.2.10"),
	)
	c.catalog.cfg.OwnNetworks = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	reg := withMetrics(c)
	syncCatalogAll(t, c)
	for name, want := range map[string]string{"probe-own": "False/" + catalog.ReasonInvalidEndpoints, "vms": "True/" + catalog.ReasonValid} {
		cond := meta.FindStatusCondition(bindingStatus(t, hub, "team-a", name).Conditions, catalog.ConditionValid)
		if cond == nil || string(cond.Status)+"/"+cond.Reason != want {
			t.Errorf("team-a/%s: Valid %+v, want %s", name, cond, want)
		}
	}
	// One address probed: vms's, not the controller's own network's.
	if probed := metricValue(t, reg, probedAddresses, "probed"); probed != 1 {
		t.Errorf("%v addresses probed, want 1: team-a/vms's", probed)
	}
}

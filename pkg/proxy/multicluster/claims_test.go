package multicluster

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	mcsproxy "k8s.io/multiclusterservices/proxy"
)

func nn(s string) types.NamespacedName {
	ns, name, _ := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, x := range s {
		out = append(out, netip.MustParseAddr(x))
	}
	return out
}

// TestClaimRule is the ownership rule as a table: each step changes one
// claim, and the decision of every import is checked after it.
func TestClaimRule(t *testing.T) {
	type step struct {
		what string
		// one of:
		importKey string
		created   int64
		importIPs []string
		service   string
		svcIPs    []string
		// want maps each import to "" (programmed) or its rejection.
		want map[string]mcsproxy.Reason
		// affected, when set, is exactly the imports to decide again.
		affected []string
	}
	steps := []step{
		{what: "first import owns its IP", importKey: "ns/a", created: 10, importIPs: []string{"10.250.0.1"},
			want: map[string]mcsproxy.Reason{"ns/a": ""}, affected: []string{"ns/a"}},
		{what: "a younger import on the same IP loses", importKey: "ns/b", created: 20, importIPs: []string{"10.250.0.1"},
			want: map[string]mcsproxy.Reason{"ns/a": "", "ns/b": mcsproxy.ReasonIPInUseByImport}, affected: []string{"ns/a", "ns/b"}},
		{what: "a third, younger still, affects only itself and the owner", importKey: "ns/c", created: 30, importIPs: []string{"10.250.0.1"},
			want:     map[string]mcsproxy.Reason{"ns/a": "", "ns/b": mcsproxy.ReasonIPInUseByImport, "ns/c": mcsproxy.ReasonIPInUseByImport},
			affected: []string{"ns/a", "ns/c"}},
		{what: "an older import takes the IP", importKey: "ns/z", created: 5, importIPs: []string{"10.250.0.1"},
			want:     map[string]mcsproxy.Reason{"ns/a": mcsproxy.ReasonIPInUseByImport, "ns/z": ""},
			affected: []string{"ns/a", "ns/z"}},
		{what: "same second: the first by namespace/name", importKey: "aa/z", created: 5, importIPs: []string{"10.250.0.1"},
			want: map[string]mcsproxy.Reason{"aa/z": "", "ns/z": mcsproxy.ReasonIPInUseByImport}},
		{what: "a local Service on the IP beats every import", service: "kube-system/dns", svcIPs: []string{"10.250.0.1"},
			want:     map[string]mcsproxy.Reason{"aa/z": mcsproxy.ReasonIPInUseByService, "ns/z": mcsproxy.ReasonIPInUseByService},
			affected: []string{"aa/z"}},
		{what: "a second Service on the same IP", service: "default/web", svcIPs: []string{"10.250.0.1", "10.250.0.1"},
			want: map[string]mcsproxy.Reason{"aa/z": mcsproxy.ReasonIPInUseByService}, affected: []string{"aa/z"}},
		{what: "one Service leaves; the other keeps the IP", service: "kube-system/dns",
			want: map[string]mcsproxy.Reason{"aa/z": mcsproxy.ReasonIPInUseByService}, affected: []string{"aa/z"}},
		{what: "the last Service leaves; the owner comes back", service: "default/web",
			want: map[string]mcsproxy.Reason{"aa/z": ""}, affected: []string{"aa/z"}},
		{what: "the owner leaves; the next in rank owns the IP", importKey: "aa/z",
			want: map[string]mcsproxy.Reason{"ns/z": "", "ns/a": mcsproxy.ReasonIPInUseByImport}, affected: []string{"aa/z", "ns/z"}},
		{what: "a dual-stack import must own both IPs", importKey: "ns/d", created: 1, importIPs: []string{"10.250.0.2", "fd00:10:250::2"},
			want: map[string]mcsproxy.Reason{"ns/d": ""}},
		{what: "an older import on one of them takes it, and the dual-stack import loses both", importKey: "ns/e", created: 0, importIPs: []string{"fd00:10:250::2"},
			want: map[string]mcsproxy.Reason{"ns/d": mcsproxy.ReasonIPInUseByImport, "ns/e": ""}},
		{what: "an import moving to another IP frees the old one", importKey: "ns/e", created: 0, importIPs: []string{"fd00:10:250::3"},
			want: map[string]mcsproxy.Reason{"ns/d": "", "ns/e": ""}},
		{what: "an import ranked anew on an IP it keeps takes it", importKey: "ns/c", created: 2, importIPs: []string{"10.250.0.1"},
			want:     map[string]mcsproxy.Reason{"ns/c": "", "ns/z": mcsproxy.ReasonIPInUseByImport, "ns/a": mcsproxy.ReasonIPInUseByImport},
			affected: []string{"ns/c", "ns/z"}},
		{what: "an owner ranked anew, still first, affects only itself", importKey: "ns/c", created: 3, importIPs: []string{"10.250.0.1"},
			want:     map[string]mcsproxy.Reason{"ns/c": "", "ns/z": mcsproxy.ReasonIPInUseByImport},
			affected: []string{"ns/c"}},
	}
	x := newClaimIndex()
	records := map[string]*claimOf{}
	record := func(key string) *claimOf {
		if records[key] == nil {
			records[key] = &claimOf{}
		}
		return records[key]
	}
	for _, s := range steps {
		var list []types.NamespacedName
		if s.service != "" {
			list = x.setService(nn(s.service), addrs(s.svcIPs...), nil)
		} else {
			list = x.setImport(record(s.importKey), claim{key: nn(s.importKey), created: s.created}, addrs(s.importIPs...), nil)
		}
		affected := sets.New(list...)
		if affected.Len() != len(list) {
			t.Errorf("%s: affected %v lists an import twice", s.what, list)
		}
		for key, want := range s.want {
			var got mcsproxy.Reason
			if r := x.decide(record(key)); r != nil {
				got = r.Reason
			}
			if got != want {
				t.Errorf("%s: %s decided %q, want %q", s.what, key, got, want)
			}
		}
		if s.affected != nil {
			want := sets.New[types.NamespacedName]()
			for _, k := range s.affected {
				want.Insert(nn(k))
			}
			if !affected.Equal(want) {
				t.Errorf("%s: affected %v, want %v", s.what, sortedKeys(affected), sortedKeys(want))
			}
		}
	}
	// Every Service has left: the index keeps nothing of them.
	if len(x.service) != 0 || len(x.ipsOf) != 0 {
		t.Errorf("Services gone, but the index still holds %v and %v", x.service, x.ipsOf)
	}
}

// The attack of a user who may create ServiceImports in their own
// namespace: an import older than the victim's, with the victim's IP, that
// no trusted manager wrote. It never claims the IP, on any event order.
func TestUntrustedImportNeverClaimsAnIP(t *testing.T) {
	for _, attackerFirst := range []bool{true, false} {
		f := newFixture(t)
		p := f.proxier
		evil := serviceImport("attacker", "evil", 1000000000, "10.250.0.10") // far older
		evil.Labels = map[string]string{mcsproxy.LabelImportManagedBy: "attacker"}
		victim := serviceImport("prod", "db", 0, "10.250.0.10")
		if attackerFirst {
			p.OnServiceImportUpsert(evil)
			DeliverSlice(p, mcsSlice("attacker", "evil-a", "evil", "cluster-b", "10.2.0.66"))
			p.OnServiceImportUpsert(victim)
		} else {
			p.OnServiceImportUpsert(victim)
			p.OnServiceImportUpsert(evil)
			DeliverSlice(p, mcsSlice("attacker", "evil-a", "evil", "cluster-b", "10.2.0.66"))
		}
		if f.provider.services["attacker/evil.clusterset"] != nil || f.provider.slices["attacker/evil-a"] != nil {
			t.Errorf("attacker first %v: the untrusted import was programmed", attackerFirst)
		}
		if svc := f.provider.services["prod/db.clusterset"]; svc == nil || svc.Spec.ClusterIP != "10.250.0.10" {
			t.Errorf("attacker first %v: the victim's import lost its IP", attackerFirst)
		}
		if !slices.Contains(f.events.take(), "ServiceImport attacker/evil UntrustedManager") {
			t.Errorf("attacker first %v: no UntrustedManager event on the attacker's import", attackerFirst)
		}
	}
}

// Hole: a plain EndpointSlice labelled kubernetes.io/service-name with an
// import's synthetic Service name would reach the import's rules straight
// from kube-proxy's informer. It is dropped, whatever way it comes.
func TestPlainSliceNamingAnImportIsDropped(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.OnServiceImportUpsert(serviceImport("prod", "db", 0, "10.250.0.10"))
	DeliverSlice(p, mcsSlice("prod", "db-a", "db", "cluster-a", "10.1.0.1"))
	f.expectCalls("ServiceAdd prod/db.clusterset", "SliceAdd prod/db-a")

	forged := mcsSlice("prod", "forged", "db", "cluster-a", "10.2.0.66")
	forged.Labels = map[string]string{discoveryv1.LabelServiceName: "db.clusterset"}
	p.OnEndpointSliceAdd(forged)
	p.OnEndpointSliceUpdate(forged, forged.DeepCopy())
	f.expectCalls()
	f.expectEvents("EndpointSlice prod/forged ReservedServiceName")

	// Relabelled into a local Service's slice, it is an ordinary slice.
	local := forged.DeepCopy()
	local.Labels[discoveryv1.LabelServiceName] = "db"
	p.OnEndpointSliceUpdate(forged, local)
	f.expectCalls("SliceAdd prod/forged")
	// And back: it leaves the local Service and goes nowhere.
	p.OnEndpointSliceUpdate(local, forged)
	f.expectCalls("SliceDelete prod/forged")
	f.expectEvents("EndpointSlice prod/forged ReservedServiceName")
	p.OnEndpointSliceDelete(forged)
	f.expectCalls()

	// forged as a trusted MCS slice of import name.
	mcsOf := func(name string) *discoveryv1.EndpointSlice {
		s := forged.DeepCopy()
		s.Labels[discoveryv1.LabelManagedBy] = mcsproxy.DefaultManagedBy
		s.Labels["multicluster.kubernetes.io/service-name"] = name
		s.Labels["multicluster.kubernetes.io/source-cluster"] = "cluster-a"
		return s
	}
	// With the MCS label of another import it is still dropped: the two
	// names must agree.
	other := mcsOf("web")
	p.OnServiceImportUpsert(serviceImport("prod", "web", 0, "10.250.0.11"))
	f.expectCalls("ServiceAdd prod/web.clusterset")
	p.OnEndpointSliceAdd(other)
	f.expectCalls()
	f.expectEvents("EndpointSlice prod/forged ReservedServiceName")
	if got := f.provider.slices["prod/forged"]; got != nil {
		t.Errorf("a slice naming another import's Service reached the proxier: %v", got.Labels)
	}
	p.OnEndpointSliceDelete(other)
	f.expectCalls()

	// With db's own MCS label it is an MCS slice of db, trusted as every
	// MCS slice is (by its manager), and handed over as it is.
	own := mcsOf("db")
	p.OnEndpointSliceAdd(own)
	f.expectCalls("SliceAdd prod/forged")
	if got := f.provider.slices["prod/forged"]; got != own {
		t.Errorf("an MCS slice naming its own import's Service was not handed over as it is")
	}
	untrusted := own.DeepCopy()
	untrusted.Labels[discoveryv1.LabelManagedBy] = "someone"
	p.OnEndpointSliceUpdate(own, untrusted)
	f.expectCalls("SliceDelete prod/forged")
}

func TestImportNeverTakesALocalServiceIP(t *testing.T) {
	f := newFixture(t)
	p := f.proxier

	// Import first, then a local Service with the same IP: the local
	// Service wins, and the import leaves before the Service arrives.
	p.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.10"))
	DeliverSlice(p, mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	f.expectCalls("ServiceAdd ns/web.clusterset", "SliceAdd ns/web-a")
	p.OnServiceAdd(localService("other", "db", "10.250.0.10"))
	f.expectCalls("ServiceDelete ns/web.clusterset", "SliceDelete ns/web-a", "ServiceAdd other/db")
	f.expectEvents("ServiceImport ns/web ClusterSetIPInUseByService")
	if f.provider.services["other/db"] == nil || len(f.provider.services) != 1 {
		t.Errorf("local Service must be the only owner of its IP: %v", f.provider.services)
	}

	// The local Service moves to another IP: the import comes back after
	// the proxier has seen the move.
	p.OnServiceUpdate(localService("other", "db", "10.250.0.10"), localService("other", "db", "10.250.0.11"))
	f.expectCalls("ServiceUpdate other/db", "SliceAdd ns/web-a", "ServiceAdd ns/web.clusterset")

	// A Service that moves onto the import's IP takes it back first.
	p.OnServiceUpdate(localService("other", "db", "10.250.0.11"), localService("other", "db", "10.250.0.10"))
	f.expectCalls("ServiceDelete ns/web.clusterset", "SliceDelete ns/web-a", "ServiceUpdate other/db")

	// Deleted, it frees the IP.
	p.OnServiceDelete(localService("other", "db", "10.250.0.10"))
	f.expectCalls("ServiceDelete other/db", "SliceAdd ns/web-a", "ServiceAdd ns/web.clusterset")

}

// An attack: any user may set spec.externalIPs (unless
// DenyServiceExternalIPs is on) or, with a load-balancer controller, get a
// load-balancer IP. Inside the clusterset ranges those are reserved for
// imports: the Service is programmed without them, the import keeps its
// IP, and the Service gets an event.
func TestExternalIPsInTheClusterSetRangeDoNotEvictAnImport(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.10"))
	DeliverSlice(p, mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	f.expectCalls("ServiceAdd ns/web.clusterset", "SliceAdd ns/web-a")

	ext := localService("attacker", "lb", "10.96.0.20")
	ext.Spec.ExternalIPs = []string{"10.250.0.10", "203.0.113.7"}
	p.OnServiceAdd(ext)
	f.expectCalls("ServiceAdd attacker/lb")
	f.expectEvents("Service attacker/lb ClusterSetIPReserved")
	if got := f.provider.services["attacker/lb"].Spec.ExternalIPs; !slices.Equal(got, []string{"203.0.113.7"}) {
		t.Errorf("programmed externalIPs %v, want only the one outside the clusterset ranges", got)
	}
	if f.provider.services["ns/web.clusterset"] == nil {
		t.Errorf("the import lost its IP to an external IP")
	}

	// The same IP as a load-balancer IP: not programmed either, and not
	// reported again; the proxier sees old and new without it.
	lb := ext.DeepCopy()
	lb.Spec.ExternalIPs = nil
	lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.250.0.10"}}
	p.OnServiceUpdate(ext, lb)
	f.expectCalls("ServiceUpdate attacker/lb")
	p.OnServiceUpdate(lb, lb.DeepCopy())
	f.expectCalls("ServiceUpdate attacker/lb")
	f.expectEvents()
	if got := f.provider.services["attacker/lb"].Status.LoadBalancer.Ingress; len(got) != 0 {
		t.Errorf("programmed load-balancer ingress %v, want none", got)
	}
	if f.provider.services["ns/web.clusterset"] == nil {
		t.Errorf("the import lost its IP to a load-balancer IP")
	}
	p.OnServiceDelete(lb)
	f.expectCalls("ServiceDelete attacker/lb")
	if got := f.provider.services["attacker/lb"]; got != nil {
		t.Errorf("Service still programmed after delete")
	}
}

func TestLocalServiceFirstKeepsItsIP(t *testing.T) {
	f := newFixture(t)
	f.proxier.OnServiceAdd(localService("kube-system", "kube-dns", "10.250.0.10"))
	f.expectCalls("ServiceAdd kube-system/kube-dns")
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.10"))
	f.expectCalls()
	f.expectEvents("ServiceImport ns/web ClusterSetIPInUseByService")
}

func TestOldestImportOwnsASharedIP(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	young := serviceImport("team-b", "web", time.Minute, "10.250.0.10")
	old := serviceImport("team-a", "web", time.Hour, "10.250.0.10")

	p.OnServiceImportUpsert(young)
	f.expectCalls("ServiceAdd team-b/web.clusterset")
	p.OnServiceImportUpsert(old)
	f.expectCalls("ServiceDelete team-b/web.clusterset", "ServiceAdd team-a/web.clusterset")
	f.expectEvents("ServiceImport team-b/web ClusterSetIPInUseByImport")

	// The older import moves away: the younger one gets the IP.
	moved := old.DeepCopy()
	moved.Spec.IPs = []string{"10.250.0.20"}
	p.OnServiceImportUpsert(moved)
	f.expectCalls("ServiceUpdate team-a/web.clusterset", "ServiceAdd team-b/web.clusterset")

	// Back on the shared IP, then deleted: the younger one returns.
	p.OnServiceImportUpsert(old)
	f.expectCalls("ServiceDelete team-b/web.clusterset", "ServiceUpdate team-a/web.clusterset")
	p.OnServiceImportDelete(old)
	f.expectCalls("ServiceDelete team-a/web.clusterset", "ServiceAdd team-b/web.clusterset")
	if got := f.provider.services["team-b/web.clusterset"]; got == nil || got.Spec.ClusterIP != "10.250.0.10" {
		t.Errorf("younger import does not own the IP after the older one left: %v", f.provider.services)
	}
}

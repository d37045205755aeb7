package catalog

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func meta(ns, name string, age int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Minute))}
}

func global(ns, name string, age int, mutate ...func(*catalogv1alpha1.GlobalServiceSpec)) *catalogv1alpha1.GlobalService {
	g := &catalogv1alpha1.GlobalService{ObjectMeta: meta(ns, name, age), Spec: catalogv1alpha1.GlobalServiceSpec{ImportPolicy: catalogv1alpha1.ImportSelected}}
	for _, m := range mutate {
		m(&g.Spec)
	}
	return g
}

func bindService(ns, name string, age int, globalName, cluster, svcNS, svcName string) *catalogv1alpha1.ServiceBinding {
	return &catalogv1alpha1.ServiceBinding{ObjectMeta: meta(ns, name, age), Spec: catalogv1alpha1.ServiceBindingSpec{
		GlobalService: globalName, Cluster: cluster, Service: &catalogv1alpha1.LocalName{Namespace: svcNS, Name: svcName},
	}}
}

func bindAddresses(ns, name string, age int, globalName, cluster string, addrs ...string) *catalogv1alpha1.ServiceBinding {
	b := &catalogv1alpha1.ServiceBinding{ObjectMeta: meta(ns, name, age), Spec: catalogv1alpha1.ServiceBindingSpec{
		GlobalService: globalName, Cluster: cluster, Ports: []catalogv1alpha1.BoundPort{{Name: "http", Port: 80, TargetPort: 8080}},
	}}
	for _, a := range addrs {
		b.Spec.Endpoints = append(b.Spec.Endpoints, catalogv1alpha1.BoundEndpoint{Address: a})
	}
	return b
}

func importOf(ns, name string, age int, globalNS, globalName, cluster, localNS, localName string) *catalogv1alpha1.GlobalServiceImport {
	return &catalogv1alpha1.GlobalServiceImport{ObjectMeta: meta(ns, name, age), Spec: catalogv1alpha1.GlobalServiceImportSpec{
		GlobalService: catalogv1alpha1.GlobalServiceRef{Namespace: globalNS, Name: globalName}, Cluster: cluster,
		LocalName: catalogv1alpha1.LocalName{Namespace: localNS, Name: localName},
	}}
}

// teams: team-a owns frontend everywhere; team-b owns frontend in
// cluster-b only and shop in cluster-c.
var teams = map[string][]string{
	"team-a": {"frontend"},
	"team-b": {"cluster-b/frontend", "cluster-c/shop"},
}

var members = []string{"cluster-a", "cluster-b", "cluster-c"}

// placements renders a result's services as "global: cluster/ns/name[<-import]"
// and its bindings as "global: +binding".
func placements(r Result) []string {
	var out []string
	for key, s := range r.Services {
		for _, b := range s.Bindings {
			out = append(out, key+": +"+b.Name)
		}
		for _, p := range s.Placements {
			line := fmt.Sprintf("%s: %s/%s/%s", key, p.Cluster, p.LocalName.Namespace, p.LocalName.Name)
			if p.Import != "" {
				line += " <-" + p.Import
			}
			out = append(out, line)
		}
	}
	return sorted(out)
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// invalid renders the objects whose Valid condition is False as
// "Kind/ns/name=Reason".
func invalid(r Result) []string {
	var out []string
	for key, c := range r.Valid {
		if c.Status != metav1.ConditionTrue {
			out = append(out, key+"="+c.Reason)
		}
		if c.Message == "" {
			out = append(out, key+" has no message")
		}
	}
	return sorted(out)
}

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cat           Catalog
		want, invalid []string
	}{{
		// A federated catalog: each team's frontend/authz is its own global service;
		// a global service is imported only where an import asks.
		name: "independent names, selective import",
		cat: Catalog{
			GlobalServices: []*catalogv1alpha1.GlobalService{global("team-a", "authz", 0), global("team-b", "authz", 1)},
			Bindings: []*catalogv1alpha1.ServiceBinding{
				bindService("team-a", "authz-a", 2, "authz", "cluster-a", "frontend", "authz"),
				bindService("team-b", "authz-b", 3, "authz", "cluster-b", "frontend", "authz"),
			},
			Imports: []*catalogv1alpha1.GlobalServiceImport{
				importOf("team-a", "authz-in-a", 4, "", "authz", "cluster-a", "frontend", "authz"),
				importOf("team-b", "authz-in-b", 5, "", "authz", "cluster-b", "frontend", "authz"),
			},
		},
		want: []string{
			"team-a/authz: +authz-a", "team-a/authz: cluster-a/frontend/authz <-team-a/authz-in-a",
			"team-b/authz: +authz-b", "team-b/authz: cluster-b/frontend/authz <-team-b/authz-in-b",
		},
	}, {
		// A shares authz with B, who imports it into cluster-c as
		// shop/authz-a, where A's namespace does not exist.
		name: "consume a shared service under another name",
		cat: Catalog{
			GlobalServices: []*catalogv1alpha1.GlobalService{global("team-a", "authz", 0, func(s *catalogv1alpha1.GlobalServiceSpec) { s.Consumers = []string{"team-b"} })},
			Bindings:       []*catalogv1alpha1.ServiceBinding{bindService("team-a", "authz-a", 1, "authz", "cluster-a", "frontend", "authz")},
			Imports:        []*catalogv1alpha1.GlobalServiceImport{importOf("team-b", "authz-a", 2, "team-a", "authz", "cluster-c", "shop", "authz-a")},
		},
		want: []string{"team-a/authz: +authz-a", "team-a/authz: cluster-c/shop/authz-a <-team-b/authz-a"},
	}, {
		name: "a team that is no consumer cannot import",
		cat: Catalog{
			GlobalServices: []*catalogv1alpha1.GlobalService{global("team-a", "authz", 0)},
			Imports:        []*catalogv1alpha1.GlobalServiceImport{importOf("team-b", "steal", 1, "team-a", "authz", "cluster-c", "shop", "authz")},
		},
		invalid: []string{"GlobalServiceImport/team-b/steal=NotAConsumer"},
	}, {
		// B may not publish endpoints under A's Services, nor import into
		// A's namespaces, nor into its own namespace in a cluster where
		// it does not own it.
		name: "a team denied another team's names",
		cat: Catalog{
			GlobalServices: []*catalogv1alpha1.GlobalService{global("team-b", "authz", 0)},
			Bindings: []*catalogv1alpha1.ServiceBinding{
				bindService("team-b", "hijack", 1, "authz", "cluster-a", "frontend", "authz"),
				bindService("team-b", "own", 2, "authz", "cluster-b", "frontend", "authz"),
			},
			Imports: []*catalogv1alpha1.GlobalServiceImport{
				importOf("team-b", "into-a", 3, "", "authz", "cluster-a", "frontend", "authz"),
				importOf("team-b", "into-c", 4, "", "authz", "cluster-c", "frontend", "authz"),
				importOf("team-b", "ok", 5, "", "authz", "cluster-c", "shop", "authz"),
			},
		},
		want: []string{"team-b/authz: +own", "team-b/authz: cluster-c/shop/authz <-team-b/ok"},
		invalid: []string{
			"ServiceBinding/team-b/hijack=NamespaceNotOwned", "GlobalServiceImport/team-b/into-a=NamespaceNotOwned", "GlobalServiceImport/team-b/into-c=NamespaceNotOwned",
		},
	}, {
		// A binding names a global service of its own namespace only: B
		// cannot add endpoints to A's.
		name: "a binding cannot reach into another team's global service",
		cat: Catalog{
			GlobalServices: []*catalogv1alpha1.GlobalService{global("team-a", "authz", 0)},
			Bindings:       []*catalogv1alpha1.ServiceBinding{bindService("team-b", "inject", 1, "authz", "cluster-b", "frontend", "authz")},
		},
		invalid: []string{"ServiceBinding/team-b/inject=GlobalServiceNotFound"},
	}, {
		name: "one local name, two global services: the older import wins",
		cat: Catalog{
			GlobalServices: []*catalogv1alpha1.GlobalService{global("team-a", "authz", 0, func(s *catalogv1alpha1.GlobalServiceSpec) { s.Consumers = []string{"team-b"} }), global("team-b", "authz", 0)},
			Imports: []*catalogv1alpha1.GlobalServiceImport{
				importOf("team-b", "newer", 9, "", "authz", "cluster-c", "shop", "authz"),
				importOf("team-b", "older", 1, "team-a", "authz", "cluster-c", "shop", "authz"),
				importOf("team-b", "same-again", 10, "team-a", "authz", "cluster-c", "shop", "authz"),
			},
		},
		want:    []string{"team-a/authz: cluster-c/shop/authz <-team-b/older"},
		invalid: []string{"GlobalServiceImport/team-b/newer=NameConflict"},
	}, {
		// ImportAll: every member where the team owns the default
		// namespace; an explicit import adds a name.
		name: "import policy All",
		cat: Catalog{
			GlobalServices: []*catalogv1alpha1.GlobalService{
				global("team-b", "web", 0, func(s *catalogv1alpha1.GlobalServiceSpec) {
					s.ImportPolicy, s.DefaultName = catalogv1alpha1.ImportAll, &catalogv1alpha1.LocalName{Namespace: "shop", Name: "web"}
				}),
				global("team-b", "nameless", 0, func(s *catalogv1alpha1.GlobalServiceSpec) { s.ImportPolicy = catalogv1alpha1.ImportAll }),
				global("team-b", "elsewhere", 0, func(s *catalogv1alpha1.GlobalServiceSpec) {
					s.ImportPolicy, s.DefaultName = catalogv1alpha1.ImportAll, &catalogv1alpha1.LocalName{Namespace: "kube-system", Name: "dns"}
				}),
			},
			Imports: []*catalogv1alpha1.GlobalServiceImport{importOf("team-b", "alias", 1, "", "web", "cluster-c", "shop", "www")},
		},
		want:    []string{"team-b/web: cluster-c/shop/web", "team-b/web: cluster-c/shop/www <-team-b/alias"},
		invalid: []string{"GlobalService/team-b/elsewhere=NamespaceNotOwned", "GlobalService/team-b/nameless=NoDefaultName"},
	}, {
		name: "bindings and imports of clusters outside the clusterset, bad addresses",
		cat: Catalog{
			GlobalServices: []*catalogv1alpha1.GlobalService{global("team-a", "db", 0)},
			Bindings: []*catalogv1alpha1.ServiceBinding{
				bindService("team-a", "gone", 1, "db", "cluster-z", "frontend", "db"),
				bindAddresses("team-a", "vms", 2, "db", "cluster-a", "192.0.2.10", "2001:db8::10"),
				bindAddresses("team-a", "metadata", 3, "db", "cluster-a", "169.254.169.254"),
				bindAddresses("team-a", "loopback", 4, "db", "cluster-a", "127.0.0.1"),
			},
			Imports: []*catalogv1alpha1.GlobalServiceImport{importOf("team-a", "z", 5, "", "db", "cluster-z", "frontend", "db")},
		},
		want: []string{"team-a/db: +vms"},
		invalid: []string{
			"ServiceBinding/team-a/gone=UnknownCluster", "ServiceBinding/team-a/loopback=InvalidEndpoints",
			"ServiceBinding/team-a/metadata=InvalidEndpoints", "GlobalServiceImport/team-a/z=UnknownCluster",
		},
	}, {
		// Team B owns namespaces in cluster-b and cluster-c only: it
		// cannot have cluster-a's network serve (and the controller
		// probe) addresses of its choosing as cluster-a's.
		name: "addresses bound as a cluster the team owns nothing of",
		cat: Catalog{
			GlobalServices: []*catalogv1alpha1.GlobalService{global("team-b", "db", 0)},
			Bindings: []*catalogv1alpha1.ServiceBinding{
				bindAddresses("team-b", "as-a", 1, "db", "cluster-a", "192.0.2.10"),
				bindAddresses("team-b", "as-b", 2, "db", "cluster-b", "192.0.2.11"),
			},
		},
		want:    []string{"team-b/db: +as-b"},
		invalid: []string{"ServiceBinding/team-b/as-a=NamespaceNotOwned"},
	}, {
		// The controller's refused namespaces hold in catalog mode too,
		// for a team that owns every namespace: no Service of theirs is
		// bound, nothing is imported into them; and a cluster limited to
		// some namespaces provides from those only.
		name: "namespaces the controller refuses",
		cat: Catalog{
			Teams:             map[string][]string{"ops": {"*"}},
			RefusedNamespaces: []string{"kube-system", "default"},
			ExportNamespaces:  map[string][]string{"cluster-a": {"*"}, "cluster-b": {"shop"}, "cluster-c": {"*"}},
			GlobalServices: []*catalogv1alpha1.GlobalService{
				global("ops", "web", 0),
				global("ops", "dns", 0, func(s *catalogv1alpha1.GlobalServiceSpec) {
					s.ImportPolicy, s.DefaultName = catalogv1alpha1.ImportAll, &catalogv1alpha1.LocalName{Namespace: "kube-system", Name: "dns"}
				}),
			},
			Bindings: []*catalogv1alpha1.ServiceBinding{
				bindService("ops", "kube-dns", 1, "web", "cluster-a", "kube-system", "kube-dns"),
				bindService("ops", "limited", 2, "web", "cluster-b", "apps", "web"),
				bindService("ops", "web-a", 3, "web", "cluster-a", "apps", "web"),
			},
			Imports: []*catalogv1alpha1.GlobalServiceImport{
				importOf("ops", "into-default", 4, "", "web", "cluster-c", "default", "web"),
				importOf("ops", "web-c", 5, "", "web", "cluster-c", "apps", "web"),
			},
		},
		want: []string{"ops/web: +web-a", "ops/web: cluster-c/apps/web <-ops/web-c"},
		invalid: []string{
			"GlobalService/ops/dns=NamespaceNotAllowed", "ServiceBinding/ops/kube-dns=NamespaceNotAllowed",
			"ServiceBinding/ops/limited=NamespaceNotAllowed", "GlobalServiceImport/ops/into-default=NamespaceNotAllowed",
		},
	}, {
		// An address binding names endpoints outside Kubernetes: pods,
		// nodes, Services and clusterset IPs are other teams' to serve
		// (and not the controller's to probe for a team).
		name: "addresses of pods, nodes, Services and clusterset IPs",
		cat: Catalog{
			KubernetesRanges: []KubernetesRange{
				{Prefix: netip.MustParsePrefix("10.244.1.0/24")},
				{Prefix: netip.MustParsePrefix("192.0.2.50/32")},
				{Prefix: netip.MustParsePrefix("10.96.0.0/16")},
				{Prefix: netip.MustParsePrefix("fd00:250::/64")},
			},
			GlobalServices: []*catalogv1alpha1.GlobalService{global("team-a", "db", 0)},
			Bindings: []*catalogv1alpha1.ServiceBinding{
				bindAddresses("team-a", "pod", 1, "db", "cluster-a", "192.0.2.10", "10.244.1.7"),
				bindAddresses("team-a", "node", 2, "db", "cluster-a", "192.0.2.50"),
				bindAddresses("team-a", "service", 3, "db", "cluster-a", "10.96.0.10"),
				bindAddresses("team-a", "vip", 4, "db", "cluster-a", "fd00:250::1"),
				bindAddresses("team-a", "vms", 5, "db", "cluster-a", "192.0.2.10", "192.0.2.51"),
			},
		},
		want: []string{"team-a/db: +vms"},
		invalid: []string{
			"ServiceBinding/team-a/node=InvalidEndpoints", "ServiceBinding/team-a/pod=InvalidEndpoints",
			"ServiceBinding/team-a/service=InvalidEndpoints", "ServiceBinding/team-a/vip=InvalidEndpoints",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cat.Teams == nil {
				tc.cat.Teams = teams
			}
			tc.cat.Members = members
			r := Resolve(tc.cat)
			if diff := cmp.Diff(sorted(tc.want), placements(r)); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(sorted(tc.invalid), invalid(r)); diff != "" {
				t.Errorf("invalid objects (-want +got):\n%s", diff)
			}
			for key, c := range r.Valid {
				if c.Status == metav1.ConditionTrue && !strings.Contains(key, "/") {
					t.Errorf("%s: %+v", key, c)
				}
			}
		})
	}
}

func TestMemberNamespaces(t *testing.T) {
	got := MemberNamespaces(map[string]string{catalogv1alpha1.AnnotationMemberNamespaces: " shop, cluster-c/frontend ,,"})
	if diff := cmp.Diff([]string{"shop", "cluster-c/frontend"}, got); diff != "" {
		t.Error(diff)
	}
	if got := MemberNamespaces(nil); len(got) != 0 {
		t.Errorf("no annotation: %v", got)
	}
}

// The attack on the shared catalog: one team writes global services and
// bindings without end, to hold the clusterset IP range and the probe
// budget and to slow every other team's resolution. Beyond the bound its
// youngest objects are refused; other teams are untouched.
func TestResolveBoundsEachTeam(t *testing.T) {
	c := Catalog{
		Teams:             map[string][]string{"big": {"*"}, "small": {"*"}},
		Members:           []string{"cluster-a"},
		MaxObjectsPerTeam: 2,
		GlobalServices:    []*catalogv1alpha1.GlobalService{global("big", "g3", 3), global("big", "g1", 1), global("big", "g2", 2), global("small", "s1", 9)},
		Bindings: []*catalogv1alpha1.ServiceBinding{
			bindService("big", "b1", 1, "g1", "cluster-a", "apps", "one"),
			bindService("big", "b2", 2, "g1", "cluster-a", "apps", "two"),
			bindService("big", "b3", 3, "g2", "cluster-a", "apps", "three"),
			bindService("small", "s1", 9, "s1", "cluster-a", "apps", "small"),
		},
	}
	res := Resolve(c)
	for key, want := range map[string]string{
		"GlobalService/big/g1": ReasonValid, "GlobalService/big/g2": ReasonValid, "GlobalService/big/g3": ReasonTeamLimitReached,
		"ServiceBinding/big/b1": ReasonValid, "ServiceBinding/big/b2": ReasonValid, "ServiceBinding/big/b3": ReasonTeamLimitReached,
		"GlobalService/small/s1": ReasonValid, "ServiceBinding/small/s1": ReasonValid,
	} {
		if got := res.Valid[key].Reason; got != want {
			t.Errorf("%s: %s (%s), want %s", key, got, res.Valid[key].Message, want)
		}
	}
	if _, ok := res.Services["big/g3"]; ok {
		t.Error("a global service over the team's bound is served")
	}
}

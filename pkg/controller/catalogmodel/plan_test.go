package catalogmodel

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/multiclusterservices/catalog"
	"k8s.io/multiclusterservices/export"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	catalogv1alpha1 "k8s.io/multiclusterservices/apis/catalog/v1alpha1"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func objectMeta(ns, name string, age int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Minute))}
}

// The catalog of every case: team-a owns frontend in every member; its
// global service web is imported into cluster-b as frontend/web.
var (
	web       = &catalogv1alpha1.GlobalService{ObjectMeta: objectMeta("team-a", "web", 0), Spec: catalogv1alpha1.GlobalServiceSpec{ImportPolicy: catalogv1alpha1.ImportSelected}}
	webIntoB  = &catalogv1alpha1.GlobalServiceImport{ObjectMeta: objectMeta("team-a", "web-b", 1), Spec: catalogv1alpha1.GlobalServiceImportSpec{GlobalService: catalogv1alpha1.GlobalServiceRef{Namespace: "team-a", Name: "web"}, Cluster: "cluster-b", LocalName: catalogv1alpha1.LocalName{Namespace: "frontend", Name: "web"}}}
	bindWebA  = bindService("web-a", 2, "cluster-a")
	bindWebC  = bindService("web-c", 3, "cluster-c")
	clusterIP = "242.1.0.1"
)

func bindService(name string, age int, cluster string) *catalogv1alpha1.ServiceBinding {
	return &catalogv1alpha1.ServiceBinding{ObjectMeta: objectMeta("team-a", name, age), Spec: catalogv1alpha1.ServiceBindingSpec{
		GlobalService: "web", Cluster: cluster, Service: &catalogv1alpha1.LocalName{Namespace: "frontend", Name: "web"}}}
}

// bindAddresses binds addrs as cluster's, health-checked when checked.
func bindAddresses(name string, age int, cluster string, checked bool, addrs ...string) *catalogv1alpha1.ServiceBinding {
	b := &catalogv1alpha1.ServiceBinding{ObjectMeta: objectMeta("team-a", name, age), Spec: catalogv1alpha1.ServiceBindingSpec{
		GlobalService: "web", Cluster: cluster, Ports: []catalogv1alpha1.BoundPort{{Name: "http", Port: 80, TargetPort: 8080}}}}
	if checked {
		b.Spec.HealthCheck = &catalogv1alpha1.HealthCheck{}
	}
	for _, a := range addrs {
		b.Spec.Endpoints = append(b.Spec.Endpoints, catalogv1alpha1.BoundEndpoint{Address: a})
	}
	return b
}

// member is a synced, alive member with the frontend namespace, whose
// endpoints may be in 10.0.0.0/8.
func member(id string) *Member {
	return &Member{ID: id, Synced: true, Alive: true,
		Namespaces:     map[string]*v1.Namespace{"frontend": {ObjectMeta: metav1.ObjectMeta{Name: "frontend"}}},
		Services:       map[string]*v1.Service{},
		Slices:         map[string][]*discoveryv1.EndpointSlice{},
		Imports:        map[string]*mcsv1beta1.ServiceImport{},
		EndpointRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	}
}

// serving is member id with Service frontend/web and one slice of addrs.
func serving(id string, addrs ...string) *Member {
	m := member(id)
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "frontend", Name: "web", UID: types.UID("svc-" + id)},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}}}
	m.Services["frontend/web"] = svc
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "frontend", Name: "web-" + id, UID: types.UID("slice-" + id),
			Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: export.ManagerEndpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	m.Slices["frontend/web"] = []*discoveryv1.EndpointSlice{sl}
	return m
}

func change(m *Member, f func(*Member)) *Member {
	f(m)
	return m
}

// holding is member id holding our import of frontend/web, placed for
// team-a/web, with ips.
func holding(id string, ips ...string) *Member {
	return change(member(id), func(m *Member) {
		m.Imports["frontend/web"] = &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "frontend", Name: "web",
			Annotations: map[string]string{catalog.AnnotationGlobalService: "team-a/web"}}, Spec: mcsv1beta1.ServiceImportSpec{IPs: ips}}
	})
}

// summary is what users see of a plan: what each member holds, the
// Ready (and HealthChecked) conditions of the catalog objects, what the
// allocator is asked, the addresses probed and the addresses withheld.
type summary struct {
	// Places: "namespace/name@cluster: ips [..] from [..]: addresses",
	// each "(not ready)" when not ready.
	Places []string
	// Ready: "Kind/ns/name: Status/Reason".
	Ready []string
	// HealthChecked: "ServiceBinding/ns/name: Status/Reason".
	HealthChecked []string
	IPs           map[string]IPNeed
	Probed        []string
	Outside       []string
}

func summarize(merged []*Merged, r Result) summary {
	s := summary{IPs: map[string]IPNeed{}}
	for _, g := range merged {
		s.IPs[g.Key] = g.IPs()
	}
	for lk, variants := range r.Places {
		for cluster, v := range variants {
			var addrs []string
			for _, sl := range v.Slices {
				for _, ep := range sl.Endpoints {
					for _, a := range ep.Addresses {
						if !ptr.Deref(ep.Conditions.Ready, true) {
							a += "(not ready)"
						}
						addrs = append(addrs, a)
					}
				}
			}
			slices.Sort(addrs)
			s.Places = append(s.Places, fmt.Sprintf("%s@%s: ips %v from %v: %s", lk, cluster, v.Import.Spec.IPs, v.Clusters, strings.Join(addrs, " ")))
		}
	}
	for key, c := range r.Status.ready {
		s.Ready = append(s.Ready, key+": "+string(c.Status)+"/"+c.Reason)
	}
	for key, c := range r.Status.probed {
		s.HealthChecked = append(s.HealthChecked, key+": "+string(c.Status)+"/"+c.Reason)
	}
	for _, t := range r.Probed {
		s.Probed = append(s.Probed, t.ID())
	}
	for _, o := range r.Outside {
		s.Outside = append(s.Outside, o.Cluster+": "+strings.Join(o.Dropped, " "))
	}
	for _, l := range [][]string{s.Places, s.Ready, s.HealthChecked, s.Probed, s.Outside} {
		sort.Strings(l)
	}
	return s
}

// plan runs a resolution as the controller does, the allocator giving
// every global service that asks clusterIP.
func plan(cfg Config, cat catalog.Catalog, members []*Member, anyAlive bool, probes map[string]Probe) summary {
	s := Snapshot{Result: catalog.Resolve(cat), Members: map[string]*Member{}, AnyAlive: anyAlive, Probes: probes}
	for _, m := range members {
		s.Members[m.ID] = m
	}
	merged := Merge(s)
	ips := map[string]Allocation{}
	for _, g := range merged {
		if g.IPs() == AllocateIPs {
			ips[g.IPKey] = Allocation{IPs: []string{clusterIP}}
		}
	}
	return summarize(merged, Plan(cfg, s, merged, ips))
}

func TestPlan(t *testing.T) {
	cfg := Config{ManagedBy: "mcs-controller", HealthProbesPerTeam: 2, HealthProbes: 10}
	healthy := func(ids ...string) map[string]Probe {
		out := map[string]Probe{}
		for _, id := range ids {
			out[id] = Probe{Healthy: true, Last: epoch, Since: epoch, Message: "TCP port 8080 answered"}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		bindings []*catalogv1alpha1.ServiceBinding
		members  []*Member
		// anyAlive is true unless noneAlive.
		noneAlive bool
		probes    map[string]Probe
		want      summary
	}{{
		name:     "a bound Service placed in another member, not written yet",
		bindings: []*catalogv1alpha1.ServiceBinding{bindWebA},
		members:  []*Member{serving("cluster-a", "10.1.0.1", "10.1.0.2"), member("cluster-b")},
		want: summary{
			Places: []string{"frontend/web@cluster-b: ips [242.1.0.1] from [cluster-a]: 10.1.0.1 10.1.0.2"},
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: False/Pending",
				"ServiceBinding/team-a/web-a: True/EndpointsReady",
			},
			IPs: map[string]IPNeed{"team-a/web": AllocateIPs},
		},
	}, {
		name:     "the member holds what was placed, with its clusterset IP",
		bindings: []*catalogv1alpha1.ServiceBinding{bindWebA},
		members:  []*Member{serving("cluster-a", "10.1.0.1"), holding("cluster-b", clusterIP)},
		want: summary{
			Places: []string{"frontend/web@cluster-b: ips [242.1.0.1] from [cluster-a]: 10.1.0.1"},
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: True/Imported",
				"ServiceBinding/team-a/web-a: True/EndpointsReady",
			},
			IPs: map[string]IPNeed{"team-a/web": AllocateIPs},
		},
	}, {
		name:     "an import with another clusterset IP is still being written",
		bindings: []*catalogv1alpha1.ServiceBinding{bindWebA},
		members:  []*Member{serving("cluster-a", "10.1.0.1"), holding("cluster-b", "242.1.0.9")},
		want: summary{
			Places: []string{"frontend/web@cluster-b: ips [242.1.0.1] from [cluster-a]: 10.1.0.1"},
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: False/Pending",
				"ServiceBinding/team-a/web-a: True/EndpointsReady",
			},
			IPs: map[string]IPNeed{"team-a/web": AllocateIPs},
		},
	}, {
		// Derived mode: the member's import carries the IPs of its
		// derived Service, not the clusterset's.
		name:     "a derived member's import is imported with its own IPs",
		bindings: []*catalogv1alpha1.ServiceBinding{bindWebA},
		members:  []*Member{serving("cluster-a", "10.1.0.1"), change(holding("cluster-b", "10.96.7.7"), func(m *Member) { m.Derived = true })},
		want: summary{
			Places: []string{"frontend/web@cluster-b: ips [242.1.0.1] from [cluster-a]: 10.1.0.1"},
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: True/Imported",
				"ServiceBinding/team-a/web-a: True/EndpointsReady",
			},
			IPs: map[string]IPNeed{"team-a/web": AllocateIPs},
		},
	}, {
		name:     "the placement's namespace does not exist",
		bindings: []*catalogv1alpha1.ServiceBinding{bindWebA},
		members:  []*Member{serving("cluster-a", "10.1.0.1"), change(member("cluster-b"), func(m *Member) { m.Namespaces = nil })},
		want: summary{
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: False/NamespaceNotFound",
				"ServiceBinding/team-a/web-a: True/EndpointsReady",
			},
			IPs: map[string]IPNeed{"team-a/web": AllocateIPs},
		},
	}, {
		// Nothing serves it: no IP is held, and nothing is placed.
		name:     "the bound Service does not exist",
		bindings: []*catalogv1alpha1.ServiceBinding{bindWebA},
		members:  []*Member{member("cluster-a"), member("cluster-b")},
		want: summary{
			Ready: []string{
				"GlobalService/team-a/web: False/NoBackends",
				"GlobalServiceImport/team-a/web-b: False/NoBackends",
				"ServiceBinding/team-a/web-a: False/ServiceNotFound",
			},
			IPs: map[string]IPNeed{"team-a/web": ReleaseIPs},
		},
	}, {
		// A source whose lease expired is withdrawn while another
		// answers, so traffic fails over to it.
		name:     "an expired source is withdrawn while another is alive",
		bindings: []*catalogv1alpha1.ServiceBinding{bindWebA, bindWebC},
		members: []*Member{change(serving("cluster-a", "10.1.0.1"), func(m *Member) { m.Alive = false }),
			member("cluster-b"), serving("cluster-c", "10.3.0.1")},
		want: summary{
			Places: []string{"frontend/web@cluster-b: ips [242.1.0.1] from [cluster-a cluster-c]: 10.3.0.1"},
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: False/Pending",
				"ServiceBinding/team-a/web-a: False/NoReadyEndpoints",
				"ServiceBinding/team-a/web-c: True/EndpointsReady",
			},
			IPs: map[string]IPNeed{"team-a/web": AllocateIPs},
		},
	}, {
		// When none answers, the hub's view is what failed: every
		// source keeps its endpoints.
		name:     "no source alive: every source keeps its endpoints",
		bindings: []*catalogv1alpha1.ServiceBinding{bindWebA, bindWebC},
		members: []*Member{change(serving("cluster-a", "10.1.0.1"), func(m *Member) { m.Alive = false }),
			change(member("cluster-b"), func(m *Member) { m.Alive = false }), change(serving("cluster-c", "10.3.0.1"), func(m *Member) { m.Alive = false })},
		noneAlive: true,
		want: summary{
			Places: []string{"frontend/web@cluster-b: ips [242.1.0.1] from [cluster-a cluster-c]: 10.1.0.1 10.3.0.1"},
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: False/Pending",
				"ServiceBinding/team-a/web-a: True/EndpointsReady",
				"ServiceBinding/team-a/web-c: True/EndpointsReady",
			},
			IPs: map[string]IPNeed{"team-a/web": AllocateIPs},
		},
	}, {
		name:     "addresses outside the source's endpoint ranges are withheld, and said once",
		bindings: []*catalogv1alpha1.ServiceBinding{bindWebA},
		members:  []*Member{serving("cluster-a", "10.1.0.1", "192.168.7.7"), member("cluster-b")},
		want: summary{
			Places: []string{"frontend/web@cluster-b: ips [242.1.0.1] from [cluster-a]: 10.1.0.1"},
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: False/Pending",
				"ServiceBinding/team-a/web-a: True/EndpointsReady",
			},
			IPs:     map[string]IPNeed{"team-a/web": AllocateIPs},
			Outside: []string{"cluster-a: 192.168.7.7"},
		},
	}, {
		// Health checks: an address is ready once its probe answers;
		// over the team's limit of 2 it is neither probed nor ready
		// (192.0.2.3, although an old probe of it answered), and its
		// binding says so.
		name:     "health-checked addresses: ready once they answer, never over the limit",
		bindings: []*catalogv1alpha1.ServiceBinding{bindAddresses("vms", 2, "cluster-a", true, "192.0.2.1", "192.0.2.2", "192.0.2.3")},
		members:  []*Member{member("cluster-a"), member("cluster-b")},
		probes:   healthy("team-a/vms/192.0.2.1", "team-a/vms/192.0.2.3"),
		want: summary{
			Places: []string{"frontend/web@cluster-b: ips [242.1.0.1] from [cluster-a]: 192.0.2.1 192.0.2.2(not ready) 192.0.2.3(not ready)"},
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: False/Pending",
				"ServiceBinding/team-a/vms: True/EndpointsReady",
			},
			HealthChecked: []string{"ServiceBinding/team-a/vms: False/" + catalog.ReasonProbeLimitReached},
			IPs:           map[string]IPNeed{"team-a/web": AllocateIPs},
			Probed:        []string{"team-a/vms/192.0.2.1", "team-a/vms/192.0.2.2"},
		},
	}, {
		name:     "addresses without a health check are served as listed",
		bindings: []*catalogv1alpha1.ServiceBinding{bindAddresses("vms", 2, "cluster-a", false, "192.0.2.1", "192.0.2.2")},
		members:  []*Member{member("cluster-a"), member("cluster-b")},
		want: summary{
			Places: []string{"frontend/web@cluster-b: ips [242.1.0.1] from [cluster-a]: 192.0.2.1 192.0.2.2"},
			Ready: []string{
				"GlobalService/team-a/web: True/Ready",
				"GlobalServiceImport/team-a/web-b: False/Pending",
				"ServiceBinding/team-a/vms: True/EndpointsReady",
			},
			IPs: map[string]IPNeed{"team-a/web": AllocateIPs},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// The plan does not depend on the order the caches list the
			// catalog's objects in.
			for _, reverse := range []bool{false, true} {
				bindings := slices.Clone(tc.bindings)
				if reverse {
					slices.Reverse(bindings)
				}
				cat := catalog.Catalog{
					GlobalServices: []*catalogv1alpha1.GlobalService{web}, Imports: []*catalogv1alpha1.GlobalServiceImport{webIntoB}, Bindings: bindings,
					Teams: map[string][]string{"team-a": {"frontend"}}, Members: []string{"cluster-a", "cluster-b", "cluster-c"},
				}
				got := plan(cfg, cat, tc.members, !tc.noneAlive, tc.probes)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("reversed %v: (-want +got)\n%s", reverse, diff)
				}
			}
		})
	}
}

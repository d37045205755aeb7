package mcs

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	hubv1alpha1 "k8s.io/multiclusterservices/apis/hub/v1alpha1"
	"k8s.io/multiclusterservices/export"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var planEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// exporting is a synced member that exports demo/web (created age
// minutes after the epoch), a ClusterIP Service with a selector and the
// given ports, and one EndpointSlice of addrs that the EndpointSlice
// controller wrote; its endpoint ranges are 10.0.0.0/8.
func exporting(id string, age int, ports []v1.ServicePort, addrs ...string) memberSnapshot {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: types.UID("svc-" + id)},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"}, Ports: ports},
	}
	m := memberSnapshot{
		ID: id, Synced: true,
		Export:         &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", CreationTimestamp: metav1.NewTime(planEpoch.Add(time.Duration(age) * time.Minute))}},
		Service:        svc,
		Namespace:      &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		EndpointRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		RangesKnown:    true,
	}
	if len(addrs) > 0 {
		m.Slices = []*discoveryv1.EndpointSlice{sourceSlice(svc, "web-"+id, export.ManagerEndpointSliceController, addrs...)}
	}
	return m
}

func sourceSlice(svc *v1.Service, name, manager string, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, UID: types.UID("uid-" + name),
			Labels:          map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: manager},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true)}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for i, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: fmt.Sprintf("web-%d", i)}})
	}
	return s
}

// member is a synced member that exports nothing.
func bystander(id string) memberSnapshot {
	return memberSnapshot{ID: id, Synced: true, Namespace: &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}}
}

var httpPort = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}

// with returns m changed by f.
func with(m memberSnapshot, f func(*memberSnapshot)) memberSnapshot {
	f(&m)
	return m
}

// planSummary is what a user sees of a plan: whether and from where the
// name is imported, which addresses each source cluster contributes, each
// export's conditions, and what is reported.
type planSummary struct {
	Imported  bool
	Type      mcsv1beta1.ServiceImportType
	Clusters  []string
	Addresses map[string][]string
	// Conditions are, per cluster, its export's conditions as
	// Type=Status/Reason.
	Conditions map[string][]string
	Retain     bool
	Stale      []string
	Reports    []string
	Selectors  int
	// Results are, per importing member, its cluster selector results
	// ("[a b] [c]") or why they cannot be evaluated.
	Results map[string]string
	Ingress []string
	// EntryPoints are, per source cluster, the addresses of its
	// entry-point slices.
	EntryPoints map[string][]string
}

func summarize(p plan) planSummary {
	d := p.Desired
	out := planSummary{Imported: d.Import != nil, Clusters: d.Clusters, Retain: d.Retain, Stale: d.Stale, Selectors: len(d.ClusterSelectors)}
	if d.Import != nil {
		out.Type = d.Import.Spec.Type
	}
	out.Addresses = addressesBySource(d.Slices)
	for id, conds := range d.ExportConditions {
		if out.Conditions == nil {
			out.Conditions = map[string][]string{}
		}
		for _, c := range conds {
			out.Conditions[id] = append(out.Conditions[id], fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		slices.Sort(out.Conditions[id])
	}
	for _, r := range p.Reports {
		out.Reports = append(out.Reports, r.Cluster+" "+r.Reason)
	}
	slices.Sort(out.Reports)
	for id, o := range d.SelectorResults {
		if out.Results == nil {
			out.Results = map[string]string{}
		}
		if o.Failed != "" {
			out.Results[id] = "failed: " + o.Failed
			continue
		}
		var rs []string
		for _, r := range o.Results {
			rs = append(rs, fmt.Sprint(r.Clusters))
		}
		out.Results[id] = strings.Join(rs, " ")
	}
	for id := range d.IngressServices {
		out.Ingress = append(out.Ingress, id)
	}
	slices.Sort(out.Ingress)
	out.EntryPoints = addressesBySource(d.Ingress)
	return out
}

// addressesBySource are the sorted addresses of slices by source cluster,
// nil for none.
func addressesBySource(bySlice map[string]*discoveryv1.EndpointSlice) map[string][]string {
	var out map[string][]string
	for _, s := range bySlice {
		if out == nil {
			out = map[string][]string{}
		}
		c := s.Labels[mcsv1beta1.LabelSourceCluster]
		for _, ep := range s.Endpoints {
			out[c] = append(out[c], ep.Addresses...)
		}
	}
	for _, addrs := range out {
		slices.Sort(addrs)
	}
	return out
}

// ingressOf is member m with its export's ingress Service made as the
// controller makes it, its node port allocated, and entry points.
func ingressOf(m memberSnapshot, entryPoints ...string) memberSnapshot {
	in := export.IngressService(m.Service, m.Export, v1.ServiceTypeNodePort, mcsproxy.DefaultManagedBy)
	in.Spec.Ports[0].NodePort = 30080
	m.IngressService, m.EntryPoints = in, entryPoints
	return m
}

// TestPlan runs the planner over snapshots of plain values. Every case is
// planned again on the members in every rotation and in reverse: what
// every member should hold may not depend on the order in which the
// members are listed.
func TestPlan(t *testing.T) {
	exported := func() []string {
		return []string{"Conflict=False/NoConflicts", "Ready=True/Exported", "Valid=True/Valid"}
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		members []memberSnapshot
		alive   map[string]bool
		// properties are the members' cluster properties, by ID.
		properties map[string]map[string]string
		want       planSummary
	}{{
		name:    "an export is imported with its cluster's endpoints",
		members: []memberSnapshot{exporting("cluster-a", 0, httpPort, "10.1.0.1"), bystander("cluster-b")},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a"},
			Addresses: map[string][]string{"cluster-a": {"10.1.0.1"}}, Conditions: map[string][]string{"cluster-a": exported()}},
	}, {
		name: "two exports whose ports differ: both say Conflict, the oldest's ports win, both serve",
		members: []memberSnapshot{
			exporting("cluster-a", 1, httpPort, "10.1.0.1"),
			exporting("cluster-b", 0, []v1.ServicePort{{Name: "http", Port: 81, Protocol: v1.ProtocolTCP}}, "10.2.0.1"),
		},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a", "cluster-b"},
			Addresses: map[string][]string{"cluster-a": {"10.1.0.1"}, "cluster-b": {"10.2.0.1"}},
			Conditions: map[string][]string{
				"cluster-a": {"Conflict=True/PortConflict", "Ready=True/Exported", "Valid=True/Valid"},
				"cluster-b": {"Conflict=True/PortConflict", "Ready=True/Exported", "Valid=True/Valid"},
			}},
	}, {
		name:    "an export from a refused namespace is not valid and nothing is imported",
		cfg:     Config{RefusedNamespaces: []string{"demo"}},
		members: []memberSnapshot{exporting("cluster-a", 0, httpPort, "10.1.0.1")},
		want:    planSummary{Conditions: map[string][]string{"cluster-a": {"Conflict=False/NoConflicts", "Ready=False/Failed", "Valid=False/NamespaceNotAllowed"}}},
	}, {
		name:    "a cluster exporting outside its namespaces is refused, the other is imported",
		cfg:     Config{ExportNamespaces: map[string][]string{"cluster-a": {"*"}, "cluster-b": {"other"}}},
		members: []memberSnapshot{exporting("cluster-a", 0, httpPort, "10.1.0.1"), exporting("cluster-b", 0, httpPort, "10.2.0.1")},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a"},
			Addresses: map[string][]string{"cluster-a": {"10.1.0.1"}},
			Conditions: map[string][]string{
				"cluster-a": exported(),
				"cluster-b": {"Conflict=False/NoConflicts", "Ready=False/Failed", "Valid=False/NamespaceNotAllowed"},
			}},
	}, {
		// A confined member that appears under an ID the operator did not
		// name (renamed, or new) gains nothing: confinement fails closed.
		name:    "attack: a cluster the export namespaces do not name exports from nowhere",
		cfg:     Config{ExportNamespaces: map[string][]string{"cluster-b": {"other"}}},
		members: []memberSnapshot{exporting("cluster-a", 0, httpPort, "10.1.0.1"), exporting("cluster-x", 0, httpPort, "10.9.0.1")},
		want: planSummary{Conditions: map[string][]string{
			"cluster-a": {"Conflict=False/NoConflicts", "Ready=False/Failed", "Valid=False/NamespaceNotAllowed"},
			"cluster-x": {"Conflict=False/NoConflicts", "Ready=False/Failed", "Valid=False/NamespaceNotAllowed"},
		}},
	}, {
		name: "an ExternalName Service is not exported",
		members: []memberSnapshot{with(exporting("cluster-a", 0, httpPort), func(m *memberSnapshot) {
			m.Service.Spec.Type, m.Service.Spec.ExternalName = v1.ServiceTypeExternalName, "example.com"
		})},
		want: planSummary{Conditions: map[string][]string{"cluster-a": {"Conflict=False/NoConflicts", "Ready=False/Failed", "Valid=False/InvalidServiceType"}}},
	}, {
		name: "a slice no trusted manager wrote is not mirrored, and said",
		members: []memberSnapshot{with(exporting("cluster-a", 0, httpPort, "10.1.0.1"), func(m *memberSnapshot) {
			m.Slices = append(m.Slices, sourceSlice(m.Service, "web-forged", "someone", "10.1.0.66"))
		})},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a"},
			Addresses: map[string][]string{"cluster-a": {"10.1.0.1"}}, Conditions: map[string][]string{"cluster-a": exported()},
			Reports: []string{"cluster-a " + ReasonEndpointSliceNotMirrored}},
	}, {
		name:    "addresses outside the source's pod ranges are dropped, and said",
		members: []memberSnapshot{exporting("cluster-a", 0, httpPort, "10.1.0.1", "192.168.0.1")},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a"},
			Addresses: map[string][]string{"cluster-a": {"10.1.0.1"}}, Conditions: map[string][]string{"cluster-a": exported()},
			Reports: []string{"cluster-a " + ReasonEndpointsOutsidePodRanges}},
	}, {
		name:    "a source whose lease expired still counts, but its endpoints are withdrawn",
		members: []memberSnapshot{exporting("cluster-a", 0, httpPort, "10.1.0.1"), exporting("cluster-b", 0, httpPort, "10.2.0.1")},
		alive:   map[string]bool{"cluster-a": true},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a", "cluster-b"},
			Addresses:  map[string][]string{"cluster-a": {"10.1.0.1"}},
			Conditions: map[string][]string{"cluster-a": exported(), "cluster-b": exported()}},
	}, {
		name:    "every source's lease expired: their endpoints are kept, stale",
		members: []memberSnapshot{exporting("cluster-a", 0, httpPort, "10.1.0.1"), exporting("cluster-b", 0, httpPort, "10.2.0.1")},
		alive:   map[string]bool{},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a", "cluster-b"},
			Addresses:  map[string][]string{"cluster-a": {"10.1.0.1"}, "cluster-b": {"10.2.0.1"}},
			Conditions: map[string][]string{"cluster-a": exported(), "cluster-b": exported()},
			Stale:      []string{"cluster-a", "cluster-b"}},
	}, {
		name: "nothing exported, but an import lists a source whose state is unknown and whose lease holds: kept",
		members: []memberSnapshot{
			with(bystander("cluster-a"), func(m *memberSnapshot) { m.ImportClusters = []string{"cluster-c"} }),
			{ID: "cluster-c"},
		},
		alive: map[string]bool{"cluster-c": true},
		want:  planSummary{Retain: true},
	}, {
		name: "nothing exported and every source known: nothing is kept",
		members: []memberSnapshot{
			with(bystander("cluster-a"), func(m *memberSnapshot) { m.ImportClusters = []string{"cluster-c"} }),
			bystander("cluster-c"),
		},
		alive: map[string]bool{"cluster-c": true},
		want:  planSummary{},
	}, {
		name: "a member without the namespace: the export's Ready says where it is not imported",
		members: []memberSnapshot{exporting("cluster-a", 0, httpPort, "10.1.0.1"),
			with(bystander("cluster-b"), func(m *memberSnapshot) { m.Namespace = nil }),
			with(bystander("cluster-c"), func(m *memberSnapshot) { m.Namespace = nil })},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a"},
			Addresses: map[string][]string{"cluster-a": {"10.1.0.1"}}, Conditions: map[string][]string{"cluster-a": exported()}},
	}, {
		name: "provider clusters named by the oldest export: another cluster's export serves nothing",
		members: []memberSnapshot{
			with(exporting("cluster-a", 0, httpPort, "10.1.0.1"), func(m *memberSnapshot) {
				m.Export.Spec.ExportedAnnotations = map[string]string{export.AnnotationProviderClusters: "cluster-a"}
			}),
			with(exporting("cluster-b", 1, httpPort, "10.2.0.1"), func(m *memberSnapshot) {
				m.Export.Spec.ExportedAnnotations = map[string]string{export.AnnotationProviderClusters: "cluster-a"}
			}),
		},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a"},
			Addresses: map[string][]string{"cluster-a": {"10.1.0.1"}},
			Conditions: map[string][]string{
				"cluster-a": exported(),
				"cluster-b": {"Conflict=False/NoConflicts", "Ready=False/" + export.ReasonNotAProvider, "Valid=True/Valid"},
			}},
	}, {
		name:    "an exporter the others cannot reach: its ingress Service is planned, IngressReady pending",
		cfg:     Config{IngressMembers: map[string]bool{"cluster-a": true}},
		members: []memberSnapshot{exporting("cluster-a", 0, httpPort, "10.1.0.1"), bystander("cluster-b")},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a"},
			Addresses:  map[string][]string{"cluster-a": {"10.1.0.1"}},
			Conditions: map[string][]string{"cluster-a": {"Conflict=False/NoConflicts", "IngressReady=False/" + export.IngressReasonPending, "Ready=True/Exported", "Valid=True/Valid"}},
			Ingress:    []string{"cluster-a"}},
	}, {
		name: "an exporter the others cannot reach, its ingress made: the others get its ready entry points, it reaches theirs through theirs",
		cfg:  Config{IngressMembers: map[string]bool{"cluster-a": true}},
		members: []memberSnapshot{
			// What a member's nodes give as entry points is checked:
			// a loopback or link-local address is never one.
			ingressOf(exporting("cluster-a", 0, httpPort, "10.1.0.1"), "127.0.0.1", "169.254.169.254", "172.30.0.1", "172.30.0.2"),
			ingressOf(exporting("cluster-b", 1, httpPort, "10.2.0.1"), "172.30.1.1"),
			bystander("cluster-c"),
		},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a", "cluster-b"},
			Addresses:   map[string][]string{"cluster-a": {"10.1.0.1"}, "cluster-b": {"10.2.0.1"}},
			EntryPoints: map[string][]string{"cluster-a": {"172.30.0.1", "172.30.0.2"}, "cluster-b": {"172.30.1.1"}},
			Conditions: map[string][]string{
				"cluster-a": {"Conflict=False/NoConflicts", "IngressReady=True/" + export.IngressReasonServing, "Ready=True/Exported", "Valid=True/Valid"},
				"cluster-b": {"Conflict=False/NoConflicts", "IngressReady=True/" + export.IngressReasonServing, "Ready=True/Exported", "Valid=True/Valid"},
			},
			Ingress: []string{"cluster-a", "cluster-b"}},
	}, {
		name: "cluster selection: the oldest export's selectors go on the import; others differing say Conflict",
		cfg:  Config{ClusterSelection: true},
		members: []memberSnapshot{
			with(exporting("cluster-a", 0, httpPort, "10.1.0.1"), func(m *memberSnapshot) { m.ClusterSelectors = sameCluster }),
			exporting("cluster-b", 1, httpPort, "10.2.0.1"),
		},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a", "cluster-b"}, Selectors: 1,
			Addresses: map[string][]string{"cluster-a": {"10.1.0.1"}, "cluster-b": {"10.2.0.1"}},
			Conditions: map[string][]string{
				"cluster-a": {"Conflict=True/" + string(export.ReasonClusterSelectorsConflict), "Ready=True/Exported", "Valid=True/Valid"},
				"cluster-b": {"Conflict=True/" + string(export.ReasonClusterSelectorsConflict), "Ready=True/Exported", "Valid=True/Valid"},
			},
			// No member's properties are known: none is evaluated.
			Results: map[string]string{
				"cluster-a": "failed: the cluster properties of cluster-a are not known yet",
				"cluster-b": "failed: the cluster properties of cluster-b are not known yet",
			}},
	}, {
		name: "cluster selection: each member, as the importer, gets the results of its own properties; one not known yet gets none",
		cfg:  Config{ClusterSelection: true},
		members: []memberSnapshot{
			with(exporting("cluster-a", 0, httpPort, "10.1.0.1"), func(m *memberSnapshot) { m.ClusterSelectors = sameRegion }),
			with(exporting("cluster-b", 1, httpPort, "10.2.0.1"), func(m *memberSnapshot) { m.ClusterSelectors = sameRegion }),
			with(exporting("cluster-c", 2, httpPort, "10.3.0.1"), func(m *memberSnapshot) { m.ClusterSelectors = sameRegion }),
			bystander("cluster-d"), bystander("cluster-e"),
		},
		properties: map[string]map[string]string{
			"cluster-a": {"region": "eu"}, "cluster-b": {"region": "eu"}, "cluster-c": {"region": "us"}, "cluster-d": {"region": "us"},
		},
		want: planSummary{Imported: true, Type: mcsv1beta1.ClusterSetIP, Clusters: []string{"cluster-a", "cluster-b", "cluster-c"}, Selectors: 1,
			Addresses:  map[string][]string{"cluster-a": {"10.1.0.1"}, "cluster-b": {"10.2.0.1"}, "cluster-c": {"10.3.0.1"}},
			Conditions: map[string][]string{"cluster-a": exported(), "cluster-b": exported(), "cluster-c": exported()},
			Results: map[string]string{
				"cluster-a": "[cluster-a cluster-b]", "cluster-b": "[cluster-a cluster-b]",
				"cluster-c": "[cluster-c]", "cluster-d": "[cluster-c]",
				"cluster-e": "failed: the cluster properties of cluster-e are not known yet",
			}},
	}, {
		name: "cluster selection on a headless export is not valid",
		cfg:  Config{ClusterSelection: true},
		members: []memberSnapshot{with(exporting("cluster-a", 0, httpPort, "10.1.0.1"), func(m *memberSnapshot) {
			m.Service.Spec.ClusterIP = v1.ClusterIPNone
			m.ClusterSelectors = sameCluster
		})},
		want: planSummary{Conditions: map[string][]string{"cluster-a": {"Conflict=False/NoConflicts", "Ready=False/Failed", "Valid=False/InvalidServiceType"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.ManagedBy = mcsproxy.DefaultManagedBy
			cfg.SourceManagers = []string{export.ManagerEndpointSliceController}
			alive := tc.alive
			if alive == nil {
				alive = map[string]bool{}
				for _, m := range tc.members {
					alive[m.ID] = true
				}
			}
			s := snapshot{Namespace: "demo", Name: "web", Members: tc.members, Alive: alive, Now: planEpoch.Add(time.Hour), Properties: tc.properties}
			first := planName(&cfg, s)
			if diff := cmp.Diff(tc.want, summarize(first)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			for _, order := range memberOrders(tc.members) {
				s.Members = order
				got := planName(&cfg, s)
				if diff := cmp.Diff(first.Desired, got.Desired, cmp.AllowUnexported(desiredState{})); diff != "" {
					t.Errorf("planned on the members in the order %v, the desired state differs (-first +this):\n%s", memberIDsOf(order), diff)
				}
				if diff := cmp.Diff(summarize(first).Reports, summarize(got).Reports); diff != "" {
					t.Errorf("planned on the members in the order %v, the reports differ:\n%s", memberIDsOf(order), diff)
				}
			}
			// Pull mode: the members as their agents publish them and the
			// planner reads them back are planned the same, but for the
			// slices the agents refused, which they report in their own
			// clusters.
			s.Members = viaHub(t, tc.members, cfg.SourceManagers)
			got := planName(&cfg, s)
			if diff := cmp.Diff(first.Desired, got.Desired, cmp.AllowUnexported(desiredState{})); diff != "" {
				t.Errorf("planned on what the members published, the desired state differs (-push +pull):\n%s", diff)
			}
			if diff := cmp.Diff(withoutSourceRefusals(first.Reports), summarize(got).Reports); diff != "" {
				t.Errorf("planned on what the members published, the reports differ (-push +pull):\n%s", diff)
			}
			// Pull mode, the other way: the plan as the planner writes it
			// into the hub and an agent reads it back holds what push mode
			// writes into every member of the import and its slices.
			if diff := cmp.Diff(sharedPart(first.Desired), viaHubPlan(t, first.Desired, cfg.ManagedBy, tc.members), cmp.AllowUnexported(desiredState{})); diff != "" {
				t.Errorf("the plan read back from the hub differs (-planned +read):\n%s", diff)
			}
		})
	}
}

// viaHubPlan returns d as an agent reads it from the hub: written as the
// planner writes it (hubPlanOf), through JSON as the apiserver keeps it,
// and read back (desiredOfHubPlan).
func viaHubPlan(t *testing.T, d *desiredState, managedBy string, members []memberSnapshot) *desiredState {
	t.Helper()
	sp, planned := hubPlanOf("demo", "web", d)
	through := func(in, out any) {
		raw, err := json.Marshal(in)
		if err == nil {
			err = json.Unmarshal(raw, out)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	kept := &hubv1alpha1.ServicePlan{}
	through(sp, kept)
	var keptSlices []*discoveryv1.EndpointSlice
	for _, ps := range planned {
		k := &discoveryv1.EndpointSlice{}
		through(ps, k)
		keptSlices = append(keptSlices, k)
	}
	// Each source makes its own ingress Service, from its own Service
	// and export.
	ingress := func(cluster string, typ v1.ServiceType) *v1.Service {
		for _, m := range members {
			if m.ID == cluster && m.Service != nil && m.Export != nil {
				return export.IngressService(m.Service, m.Export, typ, managedBy)
			}
		}
		return nil
	}
	back, err := desiredOfHubPlan(kept, keptSlices, managedBy, ingress)
	if err != nil {
		t.Fatalf("reading the plan back: %v", err)
	}
	return back
}

// sharedPart is what of d the hub's plan carries: what every member
// shares, each importer's cluster selector results, every member's
// export's conditions, and the ingresses
// (the sources' entry points, who imports them, which sources make an
// ingress Service).
func sharedPart(d *desiredState) *desiredState {
	return &desiredState{
		Import: d.Import, Clusters: d.Clusters, IPError: d.IPError, Slices: d.Slices, ImportedIn: d.ImportedIn,
		Retain: d.Retain, Triggers: d.Triggers, Stale: d.Stale, ClusterSelectors: d.ClusterSelectors,
		SelectorResults: d.SelectorResults,
		Ingress:         d.Ingress, IngressServices: d.IngressServices, IngressMembers: d.IngressMembers,
		// None is none, as the plan holds it.
		ExportConditions: func() map[string][]metav1.Condition {
			if len(d.ExportConditions) == 0 {
				return nil
			}
			return d.ExportConditions
		}(),
	}
}

// viaHub returns members as pull mode's planner reads them: each one's
// snapshot published by its agent (pull.PublishExport, PublishSlices) and
// read back from the hub's objects (pull.Read).
func viaHub(t *testing.T, members []memberSnapshot, managers []string) []memberSnapshot {
	t.Helper()
	var out []memberSnapshot
	for _, m := range members {
		if !m.Synced {
			out = append(out, m)
			continue
		}
		src := pull.Source{Export: m.Export, ClusterSelectors: m.ClusterSelectors, Namespace: m.Namespace, Service: m.Service, Slices: m.Slices, Ingress: m.IngressService}
		me := pull.PublishExport(src)
		if me != nil {
			me.UID = types.UID("published-" + m.ID)
		}
		published, _ := pull.PublishSlices(src, me, managers)
		back := pull.Read(me, published)
		p := m
		p.Export, p.ClusterSelectors, p.Service, p.Slices, p.SlicesChecked = back.Export, back.ClusterSelectors, back.Service, back.Slices, true
		p.IngressService = back.Ingress
		if me != nil {
			// What the planner reads of the namespace is when it was
			// made; its phase (the whole namespace going) comes with
			// the member's liveness.
			p.Namespace = back.Namespace
		}
		out = append(out, p)
	}
	return out
}

// withoutSourceRefusals are the reports of a plan, as summarize gives
// them, but for the slices export.CheckSource refuses.
func withoutSourceRefusals(reports []sourceReport) []string {
	var out []string
	for _, r := range reports {
		switch export.SourceRefusal(r.Reason) {
		case export.SourceUntrustedManager, export.SourceNotOwned, export.SourceWrongController:
			continue
		}
		out = append(out, r.Cluster+" "+r.Reason)
	}
	slices.Sort(out)
	return out
}

var (
	sameCluster = []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{MatchProperties: map[string]string{"cluster.clusterset.k8s.io": csv1beta1.SameAsImporter}}}}
	sameRegion  = []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{MatchProperties: map[string]string{"region": csv1beta1.SameAsImporter}}}}
)

// memberOrders returns every rotation of members and of their reverse.
func memberOrders(members []memberSnapshot) [][]memberSnapshot {
	var out [][]memberSnapshot
	for _, base := range [][]memberSnapshot{members, reversed(members)} {
		for i := range base {
			out = append(out, slices.Concat(base[i:], base[:i]))
		}
	}
	return out
}

func reversed(members []memberSnapshot) []memberSnapshot {
	out := slices.Clone(members)
	slices.Reverse(out)
	return out
}

func memberIDsOf(members []memberSnapshot) string {
	var ids []string
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ",")
}

// TestPlanSaysWhoseRangesWithheldAddresses: an export whose addresses are
// withheld for lying outside its cluster's endpoint ranges stays Ready,
// and its Ready condition says how many and whose word the ranges are,
// so that the exporter learns why without reading the controller's log.
func TestPlanSaysWhoseRangesWithheldAddresses(t *testing.T) {
	m := with(exporting("cluster-a", 0, httpPort, "10.1.0.1", "172.18.0.3", "192.168.0.1"), func(m *memberSnapshot) {
		m.RangesSource = rangesFromOperator
	})
	cfg := Config{ManagedBy: mcsproxy.DefaultManagedBy, SourceManagers: []string{export.ManagerEndpointSliceController}}
	s := snapshot{Namespace: "demo", Name: "web", Members: []memberSnapshot{m}, Alive: map[string]bool{"cluster-a": true}, Now: planEpoch.Add(time.Hour)}
	p := planName(&cfg, s)
	ready := meta.FindStatusCondition(p.Desired.ExportConditions["cluster-a"], string(mcsv1beta1.ServiceExportConditionReady))
	if ready == nil || ready.Status != metav1.ConditionTrue {
		t.Fatalf("Ready = %+v, want True", ready)
	}
	if want := "2 endpoint address(es) withheld: outside cluster cluster-a's endpoint ranges (whose source is " + rangesFromOperator + ")"; !strings.HasSuffix(ready.Message, want) {
		t.Errorf("Ready says %q, want it to end with %q", ready.Message, want)
	}
}

// TestPlanSaysSelectorsAreIgnored: with the cluster selection gate off, an
// export with clusterSelectors is valid and exported from, and its Valid
// condition says that they do nothing; one without says nothing of them,
// and with the gate on they are read, not ignored.
func TestPlanSaysSelectorsAreIgnored(t *testing.T) {
	for _, tc := range []struct {
		name     string
		gate     bool
		selected int
		ignored  bool
	}{
		{name: "gate off, selectors: ignored, said", selected: 2, ignored: true},
		{name: "gate off, none: nothing said"},
		{name: "gate on: read", gate: true, selected: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := with(exporting("cluster-a", 0, httpPort, "10.1.0.1"), func(m *memberSnapshot) {
				if tc.gate {
					m.ClusterSelectors = sameCluster
				} else {
					m.IgnoredSelectors = tc.selected
				}
			})
			cfg := Config{ManagedBy: mcsproxy.DefaultManagedBy, SourceManagers: []string{export.ManagerEndpointSliceController}, ClusterSelection: tc.gate}
			s := snapshot{Namespace: "demo", Name: "web", Members: []memberSnapshot{m}, Alive: map[string]bool{"cluster-a": true}, Now: planEpoch.Add(time.Hour)}
			p := planName(&cfg, s)
			valid := meta.FindStatusCondition(p.Desired.ExportConditions["cluster-a"], string(mcsv1beta1.ServiceExportConditionValid))
			if valid == nil || valid.Status != metav1.ConditionTrue {
				t.Fatalf("Valid = %+v, want True", valid)
			}
			if got := strings.Contains(valid.Message, "clusterSelectors are ignored"); got != tc.ignored {
				t.Errorf("Valid says %q; says ignored: %v, want %v", valid.Message, got, tc.ignored)
			}
			if p.Desired == nil || len(p.Desired.Slices) == 0 {
				t.Errorf("nothing imported from the export")
			}
		})
	}
}

// TestPlanSaysWhereTheServiceIsExportedTo: the members that hold the
// import (synced, with the namespace, not deleting it) are where the
// service is exported to, in every order of the members; none when no
// export is valid.
func TestPlanSaysWhereTheServiceIsExportedTo(t *testing.T) {
	terminating := bystander("cluster-d")
	terminating.Namespace.Status.Phase = v1.NamespaceTerminating
	members := []memberSnapshot{
		exporting("cluster-a", 0, httpPort, "10.1.0.1"),
		bystander("cluster-b"),
		{ID: "cluster-c", Synced: true},
		terminating,
		{ID: "cluster-e"},
		bystander("cluster-f"),
	}
	cfg := Config{ManagedBy: mcsproxy.DefaultManagedBy, SourceManagers: []string{export.ManagerEndpointSliceController}}
	reversed := slices.Clone(members)
	slices.Reverse(reversed)
	for _, order := range [][]memberSnapshot{members, reversed} {
		s := snapshot{Namespace: "demo", Name: "web", Members: order, Alive: map[string]bool{"cluster-a": true}, Now: planEpoch.Add(time.Hour)}
		if got, want := planName(&cfg, s).Desired.ImportedIn, []string{"cluster-a", "cluster-b", "cluster-f"}; !slices.Equal(got, want) {
			t.Errorf("exported to %v, want %v", got, want)
		}
	}
	invalid := with(exporting("cluster-a", 0, httpPort, "10.1.0.1"), func(m *memberSnapshot) { m.Service = nil })
	s := snapshot{Namespace: "demo", Name: "web", Members: []memberSnapshot{invalid, bystander("cluster-b")}, Alive: map[string]bool{"cluster-a": true}, Now: planEpoch.Add(time.Hour)}
	if got := planName(&cfg, s).Desired.ImportedIn; len(got) != 0 {
		t.Errorf("no valid export, exported to %v", got)
	}
}

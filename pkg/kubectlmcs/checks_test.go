package kubectlmcs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestReasonProgrammedIsKubeProxys(t *testing.T) {
	if ReasonProgrammed != multicluster.ReasonProgrammed {
		t.Errorf("ReasonProgrammed = %q, kube-proxy records %q", ReasonProgrammed, multicluster.ReasonProgrammed)
	}
	if ReasonServingImports != multicluster.ReasonServingImports {
		t.Errorf("ReasonServingImports = %q, kube-proxy records %q", ReasonServingImports, multicluster.ReasonServingImports)
	}
	if ReasonClusterSelectionChanged != multicluster.ReasonClusterSelectionChanged {
		t.Errorf("ReasonClusterSelectionChanged = %q, kube-proxy records %q", ReasonClusterSelectionChanged, multicluster.ReasonClusterSelectionChanged)
	}
}

func cond(t mcsv1beta1.ServiceExportConditionType, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: status, Reason: reason, Message: msg}
}

func exportWith(conds ...metav1.Condition) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Status: mcsv1beta1.ServiceExportStatus{Conditions: conds}}
}

var (
	validReady = []metav1.Condition{
		cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, "Valid", ""),
		cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, "Exported", ""),
		cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, "NoConflicts", ""),
	}
	svc = &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.5", Ports: []v1.ServicePort{{Port: 80}}}}
)

func imp(sources ...string) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.7"},
			Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}}
	for _, s := range sources {
		si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: s})
	}
	return si
}

func slice(source string, ready ...bool) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mcsv1beta1.LabelSourceCluster: source}}}
	for _, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.200.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
	}
	return s
}

func lease(source string, age time.Duration) coordinationv1.Lease {
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: SourceLeasePrefix + source},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-age)}, LeaseDurationSeconds: ptr.To[int32](40)}}
}

func hubLease(age time.Duration) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "member-agent"},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-age)}, LeaseDurationSeconds: ptr.To[int32](10)}}
}

// healthy is a clusterset where a exports web and b imports it, all well.
func healthy() ServiceState {
	return ServiceState{Namespace: "ns", Name: "web", Now: now, Importers: []string{"b"}, Members: []MemberState{
		{Context: "a", ClusterID: "a", Service: svc, Export: exportWith(validReady...), ServiceSlices: []discoveryv1.EndpointSlice{slice("", true, true)}},
		{Context: "b", ClusterID: "b", Import: imp("a"), Slices: []discoveryv1.EndpointSlice{slice("a", true, false)},
			Leases: []coordinationv1.Lease{lease("a", 5*time.Second)},
			Nodes:  []NodeReport{{Name: "b-node0", Last: &NodeEvent{Type: v1.EventTypeNormal, Reason: ReasonProgrammed}}},
			DNS:    DNSResult{Queried: true, From: "pod ns/client", Answer: []string{"10.250.0.7"}}},
	}}
}

// line is a check as one comparable string.
func line(c Check) string {
	mark := "ok"
	if !c.Passed {
		mark = "FAIL"
	}
	return mark + " " + c.Cluster + " " + c.Subject + ": " + c.Detail
}

func TestDiagnose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*ServiceState)
		// want are the lines of the checks that differ from a healthy
		// run's, in order; failed is how many fail.
		want   []string
		failed int
	}{
		{name: "healthy", mutate: func(*ServiceState) {}, want: []string{
			"ok a Service: ClusterIP 10.96.0.5, ports 80/TCP",
			"ok a Service endpoints: 2 ready of 2",
			"ok a ServiceExport: valid, no conflict, ready",
			"ok b ServiceImport: ClusterSetIP 10.250.0.7, ports 80/TCP, sources a",
			"ok b EndpointSlices from a: 1 ready of 2 endpoints",
			"ok b Lease mcs-source-a: renewed 5s ago, TTL 40s",
			"ok b kube-proxy on b-node0: programmed",
			"ok b DNS web.ns.svc.clusterset.local: 10.250.0.7 (asked from pod ns/client)",
		}},
		{name: "no export, Service in a", mutate: func(s *ServiceState) { s.Members[0].Export = nil; s.Members[1].Import = nil }, failed: 2, want: []string{
			"FAIL clusterset ServiceExport: no member exports ns/web (Service found in a)",
			"FAIL b ServiceImport: no ServiceImport ns/web",
		}},
		{name: "invalid export", mutate: func(s *ServiceState) {
			s.Members[0].Export = exportWith(cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, "InvalidServiceType", "ExternalName"))
		}, failed: 1, want: []string{"FAIL a ServiceExport: invalid (InvalidServiceType): ExternalName"}},
		{name: "export the controller has not seen", mutate: func(s *ServiceState) { s.Members[0].Export = exportWith() }, failed: 1,
			want: []string{"FAIL a ServiceExport: no Valid condition: the mcs-controller has not seen it"}},
		{name: "port conflict", mutate: func(s *ServiceState) {
			s.Members[0].Export = exportWith(validReady[0], cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, "PortConflict", "ports differ"))
		}, failed: 1, want: []string{"FAIL a ServiceExport: conflict (PortConflict): ports differ"}},
		{name: "no EndpointSlice of the exported Service", mutate: func(s *ServiceState) {
			s.Members[0].ServiceSlices, s.Members[0].ServiceWarning = nil, "FailedToUpdateEndpointSlices: forbidden"
		}, failed: 1, want: []string{"FAIL a Service endpoints: no EndpointSlice; last warning: FailedToUpdateEndpointSlices: forbidden"}},
		{name: "no ready pod of the exported Service", mutate: func(s *ServiceState) {
			s.Members[0].ServiceSlices = []discoveryv1.EndpointSlice{slice("", false)}
		}, failed: 1, want: []string{"FAIL a Service endpoints: 0 ready of 1"}},
		{name: "not a consumer cluster", mutate: func(s *ServiceState) {
			s.Members[0].Export.Spec.ExportedAnnotations = map[string]string{"multiclusterservices.k8s.io/consumer-clusters": "a"}
			s.Members[1].Import = nil
		}, want: []string{"ok b ServiceImport: none: not a consumer cluster (multiclusterservices.k8s.io/consumer-clusters=a)"}},
		{name: "a consumer cluster without its import", mutate: func(s *ServiceState) {
			s.Members[0].Export.Spec.ExportedAnnotations = map[string]string{"multiclusterservices.k8s.io/consumer-clusters": "a,b"}
			s.Members[1].Import = nil
		}, failed: 1, want: []string{"FAIL b ServiceImport: no ServiceImport ns/web"}},
		{name: "not a provider", mutate: func(s *ServiceState) {
			s.Members[0].Export = exportWith(validReady[0], cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, "NotAProvider", "not exported"))
		}, want: []string{"ok a ServiceExport: valid, not a provider: not exported"}},
		{name: "derived member with its Service", mutate: func(s *ServiceState) {
			s.Members[1].Import.Annotations = map[string]string{"multicluster.kubernetes.io/derived-service": "derived-x"}
			s.Members[1].Import.Spec.IPs = []string{"10.97.0.40"}
			s.Members[1].DerivedService = &v1.Service{Spec: v1.ServiceSpec{ClusterIPs: []string{"10.97.0.40"}}}
			s.Members[1].DNS.Answer = []string{"10.97.0.40"}
		}, want: []string{
			"ok b ServiceImport: ClusterSetIP 10.97.0.40, ports 80/TCP, sources a",
			"ok b derived Service derived-x: cluster IPs 10.97.0.40 (served by upstream kube-proxy's Service path)",
			"ok b DNS web.ns.svc.clusterset.local: 10.97.0.40 (asked from pod ns/client)",
		}},
		{name: "derived member without its Service", mutate: func(s *ServiceState) {
			s.Members[1].Import.Annotations = map[string]string{"multicluster.kubernetes.io/derived-service": "derived-x"}
		}, failed: 1, want: []string{"FAIL b derived Service derived-x: missing: this member is served in derived mode, its clients need that Service"}},
		{name: "native names without the local Service", mutate: func(s *ServiceState) {
			s.Members[1].Import.Annotations = map[string]string{"multiclusterservices.k8s.io/native-names": "RemoteAndLocal"}
		}, failed: 1, want: []string{"FAIL b native names (RemoteAndLocal): no Service ns/web here to answer the cluster.local name"}},
		{name: "no ready endpoint", mutate: func(s *ServiceState) { s.Members[1].Slices = []discoveryv1.EndpointSlice{slice("a", false)} }, failed: 1,
			want: []string{"FAIL b EndpointSlices from a: 0 ready of 1 endpoints"}},
		{name: "no slice of a source", mutate: func(s *ServiceState) { s.Members[1].Slices = nil }, failed: 1,
			want: []string{"FAIL b EndpointSlices from a: none"}},
		{name: "stale lease", mutate: func(s *ServiceState) { s.Members[1].Leases = []coordinationv1.Lease{lease("a", 3*time.Minute)} }, failed: 1,
			want: []string{"FAIL b Lease mcs-source-a: stale: renewed 3m ago, TTL 40s"}},
		{name: "missing lease", mutate: func(s *ServiceState) { s.Members[1].Leases = nil }, failed: 1,
			want: []string{"FAIL b Lease mcs-source-a: missing"}},
		{name: "pull mode: the source's liveness is its agent's Lease in the hub", mutate: func(s *ServiceState) {
			s.Members[1].Leases = nil
			s.Hub = &HubLiveness{Context: "hub", TTL: 40 * time.Second, Leases: map[string]*coordinationv1.Lease{"a": hubLease(5 * time.Second)}}
		}, want: []string{"ok hub Lease a/member-agent: renewed 5s ago, endpoint TTL 40s"}},
		{name: "pull mode: a source's agent past the TTL", mutate: func(s *ServiceState) {
			s.Hub = &HubLiveness{Context: "hub", TTL: 40 * time.Second, Leases: map[string]*coordinationv1.Lease{"a": hubLease(time.Minute)}}
		}, failed: 1, want: []string{"FAIL hub Lease a/member-agent: stale: renewed 60s ago, endpoint TTL 40s"}},
		{name: "pull mode: a source without its agent", mutate: func(s *ServiceState) {
			s.Hub = &HubLiveness{Context: "hub", TTL: 40 * time.Second, Leases: map[string]*coordinationv1.Lease{"b": hubLease(time.Second)}}
		}, failed: 1, want: []string{"FAIL hub Lease a/member-agent: missing"}},
		{name: "pull mode: the hub unreachable", mutate: func(s *ServiceState) {
			s.Hub = &HubLiveness{Context: "hub", Unreachable: "connection refused"}
		}, failed: 1, want: []string{"FAIL hub hub: unreachable: connection refused"}},
		{name: "refused by kube-proxy", mutate: func(s *ServiceState) {
			s.Members[1].Nodes[0].Last = &NodeEvent{Type: v1.EventTypeWarning, Reason: "UntrustedManager", Note: "label not trusted"}
		}, failed: 1, want: []string{"FAIL b kube-proxy on b-node0: refused (UntrustedManager): label not trusted"}},
		{name: "gate off", mutate: func(s *ServiceState) { s.Members[1].Nodes[0] = NodeReport{Name: "b-node0", Gate: "off"} }, failed: 1,
			want: []string{"FAIL b kube-proxy on b-node0: MultiClusterServices gate off: clusterset IPs get no rules on this node"}},
		{name: "no event, gate on", mutate: func(s *ServiceState) { s.Members[1].Nodes[0] = NodeReport{Name: "b-node0", Gate: "on"} },
			want: []string{"ok b kube-proxy on b-node0: gate on, no refusal reported"}},
		{name: "DNS does not answer", mutate: func(s *ServiceState) {
			s.Members[1].DNS = DNSResult{Queried: true, From: "pod ns/client", Err: "connection timed out; no servers could be reached"}
		}, failed: 1, want: []string{"FAIL b DNS web.ns.svc.clusterset.local: no answer from pod ns/client: connection timed out; no servers could be reached"}},
		{name: "DNS answers something else", mutate: func(s *ServiceState) {
			s.Members[1].DNS = DNSResult{Queried: true, From: "pod ns/client", Answer: []string{"10.250.0.8"}}
		}, failed: 1, want: []string{"FAIL b DNS web.ns.svc.clusterset.local: answered 10.250.0.8, want 10.250.0.7 (asked from pod ns/client)"}},
		{name: "DNS not asked", mutate: func(s *ServiceState) { s.Members[1].DNS = DNSResult{} },
			want: []string{"ok b DNS (objects only): web.ns.svc.clusterset.local would be 10.250.0.7; not asked (pass --dns-pod)"}},
		{name: "member unreachable", mutate: func(s *ServiceState) {
			s.Members[0] = MemberState{Context: "a", Unreachable: "connection refused"}
			s.Members[1].Leases = []coordinationv1.Lease{lease("a", time.Minute)}
		}, failed: 3, want: []string{
			"FAIL a member: unreachable: connection refused",
			"FAIL clusterset ServiceExport: no member exports ns/web",
			"FAIL b Lease mcs-source-a: stale: renewed 60s ago, TTL 40s",
		}},
		{name: "headless: no node checks, DNS from ready endpoints", mutate: func(s *ServiceState) {
			s.Members[1].Import.Spec.Type, s.Members[1].Import.Spec.IPs = mcsv1beta1.Headless, nil
			s.Members[1].DNS.Answer = []string{"10.200.0.9"}
		}, want: []string{"ok b ServiceImport: headless, ports 80/TCP, sources a",
			"ok b DNS web.ns.svc.clusterset.local: 10.200.0.9 (asked from pod ns/client)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthy()
			tc.mutate(&s)
			checks := Diagnose(s)
			base := map[string]bool{}
			for _, c := range Diagnose(healthy()) {
				base[line(c)] = true
			}
			var got []string
			for _, c := range checks {
				if tc.name == "healthy" || !base[line(c)] {
					got = append(got, line(c))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("checks that differ from a healthy clusterset's (-want +got):\n%s", diff)
			}
			if f := Failed(checks); f != tc.failed {
				t.Errorf("%d checks failed, want %d", f, tc.failed)
			}
			for _, c := range checks {
				if !c.Passed && c.Fix == "" {
					t.Errorf("failed check without a fix: %s", line(c))
				}
			}
		})
	}
}

func TestChecklistLinesFit100Columns(t *testing.T) {
	s := healthy()
	s.Members[1].Nodes[0].Last = &NodeEvent{Type: v1.EventTypeWarning, Reason: "UntrustedManager",
		Note: strings.Repeat("a long refusal message that goes on ", 8)}
	lines := ChecklistLines("diagnose service ns/web", Diagnose(s))
	for _, l := range lines {
		if len(l) > width {
			t.Errorf("%d columns: %q", len(l), l)
		}
	}
	if got, want := lines[len(lines)-1], "8 checks, 7 passed, 1 failed"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestExportStatus(t *testing.T) {
	for _, tc := range []struct {
		conds []metav1.Condition
		want  string
	}{
		{nil, "pending"},
		{validReady, "valid, ready"},
		{[]metav1.Condition{cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, "NoService", "")}, "invalid: NoService"},
		{[]metav1.Condition{validReady[0], cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, "Pending", ""),
			cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, "PortConflict", "")}, "valid, not ready: Pending, conflict: PortConflict"},
	} {
		if got := ExportStatus(tc.conds); got != tc.want {
			t.Errorf("ExportStatus(%v) = %q, want %q", tc.conds, got, tc.want)
		}
	}
}

func TestStatusLines(t *testing.T) {
	members := []MemberStatus{
		{Context: "cluster-a", ClusterID: "cluster-x", Version: "v1.37.2", CRDs: 3, Policies: 4, Nodes: 2, GateOn: 2, GateKnown: 2,
			Model: "sameness", Exports: 1, Imports: 1,
			Membership: &MembershipStatus{State: "refused", Message: `the server is another cluster's: it joined as cluster "cluster-a"`}},
		{Context: "cluster-b", ClusterID: "cluster-b", Version: "v1.37.2", CRDs: 3, Policies: 4, Nodes: 1, GateOn: 0, GateKnown: 0,
			Model: "sameness+native", Imports: 1, Stale: []string{"cluster-c"},
			Leader: &LeaderStatus{Holder: "host_1234", Healthy: true, Detail: "renewed 2s ago, TTL 15s"}},
		{Context: "cluster-c", Unreachable: "connection refused"},
	}
	want := []string{
		"CONTEXT    CLUSTER    REACH  VERSION  CRDS  POLICY  GATE-ON  MODEL            EXP  IMP  CONFL  STALE",
		"cluster-a  cluster-x  yes    v1.37.2  3/3   4/4     2/2      sameness         1    1    0      0",
		"cluster-b  cluster-b  yes    v1.37.2  3/3   4/4     0/1?     sameness+native  0    1    0      1",
		"cluster-c  -          no     -        -     -       -        -                -    -    -      -",
		"cluster-a: refused by the mcs-controller: the server is another cluster's: it joined as cluster",
		"  \"cluster-a\"",
		"cluster-b: stale source leases: cluster-c",
		"cluster-b: gate of 1 node(s) unknown (kube-proxy metrics not readable through the node proxy, no",
		"  announcement on the Node)",
		"mcs-controller: leader host_1234 (Lease in cluster-b, renewed 2s ago, TTL 15s): healthy",
		"cluster-c: unreachable: connection refused",
	}
	if diff := cmp.Diff(want, StatusLines(members)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// status --wait waits for exactly these: a clusterset that has converged
// waits for nothing; each way of not having converged is said, per member.
func TestWaiting(t *testing.T) {
	leader := &LeaderStatus{Holder: "host_1234", Healthy: true}
	converged := func() []MemberStatus {
		return []MemberStatus{
			{Context: "cluster-a", CRDs: 3, Exports: 1, Imports: 1},
			{Context: "cluster-b", CRDs: 3, Imports: 1, Leader: leader},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func([]MemberStatus)
		want   []string
	}{
		{name: "converged", mutate: func([]MemberStatus) {}},
		{name: "a member does not answer", mutate: func(m []MemberStatus) { m[0] = MemberStatus{Context: "cluster-a", Unreachable: "refused"} },
			want: []string{"cluster-a: unreachable"}},
		{name: "a member lacks the ServiceImport API", mutate: func(m []MemberStatus) { m[1].CRDs = 2 },
			want: []string{"cluster-b: serves 2 of the 3 multi-cluster APIs"}},
		{name: "a member refused", mutate: func(m []MemberStatus) { m[0].Membership = &MembershipStatus{State: "refused"} },
			want: []string{"cluster-a: refused by the mcs-controller"}},
		{name: "a stale source", mutate: func(m []MemberStatus) { m[1].Stale = []string{"cluster-c"} },
			want: []string{"cluster-b: stale source leases: cluster-c"}},
		{name: "an export not ready yet, another in conflict", mutate: func(m []MemberStatus) { m[0].NotReady, m[0].Conflicts = 1, 1 },
			want: []string{"cluster-a: 1 export(s) not valid and ready", "cluster-a: 1 export(s) in conflict"}},
		{name: "an import without its clusterset IP", mutate: func(m []MemberStatus) { m[1].WithoutIPs = 2 },
			want: []string{"cluster-b: 2 import(s) without a clusterset IP"}},
		{name: "no leader", mutate: func(m []MemberStatus) { m[1].Leader = nil },
			want: []string{"mcs-controller: no healthy leader"}},
		{name: "a leader whose Lease is not renewed", mutate: func(m []MemberStatus) { m[1].Leader = &LeaderStatus{Holder: "host_1234"} },
			want: []string{"mcs-controller: no healthy leader"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := converged()
			tc.mutate(members)
			if diff := cmp.Diff(tc.want, Waiting(members)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGateFromMetrics(t *testing.T) {
	for body, want := range map[string]string{
		"# HELP x\nkubernetes_feature_enabled{name=\"MultiClusterServices\",stage=\"ALPHA\"} 1\n": "on",
		"kubernetes_feature_enabled{name=\"MultiClusterServices\",stage=\"ALPHA\"} 0\n":           "off",
		"kubernetes_feature_enabled{name=\"Other\",stage=\"BETA\"} 1\n":                           "",
	} {
		if got := gateFromMetrics([]byte(body)); got != want {
			t.Errorf("gateFromMetrics(%q) = %q, want %q", body, got, want)
		}
	}
}

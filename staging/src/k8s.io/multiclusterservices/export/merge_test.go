package export

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// export builds cluster's export created age minutes after the epoch, of a
// single-stack ClusterIP Service with one "http" port 80/TCP, then mutated.
func export(cluster string, minute int, mutate func(*v1.Service, *mcsv1beta1.ServiceExport)) Export {
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "web", CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(minute) * time.Minute)),
	}}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: v1.ServiceSpec{
			Type:            v1.ServiceTypeClusterIP,
			ClusterIP:       "10.96.0.10",
			IPFamilies:      []v1.IPFamily{v1.IPv4Protocol},
			SessionAffinity: v1.ServiceAffinityNone,
			Ports:           []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
	if mutate != nil {
		mutate(svc, se)
	}
	return Export{Cluster: cluster, ServiceExport: se, Service: svc}
}

// everyField sets every field the merge resolves to a non-default value.
func everyField(s *v1.Service, se *mcsv1beta1.ServiceExport) {
	s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090, AppProtocol: ptr.To("http")})
	s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	s.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferClose)
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
	se.Spec.ExportedLabels = map[string]string{"tier": "web"}
	se.Spec.ExportedAnnotations = map[string]string{"note": "x"}
}

func ports(p ...mcsv1beta1.ServicePort) []mcsv1beta1.ServicePort { return p }

func port(name string, number int32, protocol v1.Protocol) mcsv1beta1.ServicePort {
	return mcsv1beta1.ServicePort{Name: name, Port: number, Protocol: protocol}
}

func served(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// conflict is a Conflict as a test states it.
type conflict struct {
	reason mcsv1beta1.ServiceExportConditionReason
	field  string
	winner string
	losers []string
	// missing are the losers without the field at all.
	missing []string
}

func TestMerge(t *testing.T) {
	cluster := ptr.To(v1.ServiceInternalTrafficPolicyCluster)
	tests := []struct {
		name    string
		exports []Export
		// want, when set, is compared with the whole spec.
		want          *mcsv1beta1.ServiceImportSpec
		wantPorts     []mcsv1beta1.ServicePort
		wantServed    map[string]map[string]bool
		wantConflicts []conflict
		check         func(t *testing.T, r Result)
	}{
		{
			name:    "one export fills every field of the import",
			exports: []Export{export("a", 0, nil)},
			want: &mcsv1beta1.ServiceImportSpec{
				Type:                  mcsv1beta1.ClusterSetIP,
				Ports:                 ports(port("http", 80, v1.ProtocolTCP)),
				SessionAffinity:       v1.ServiceAffinityNone,
				InternalTrafficPolicy: cluster,
				IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
			},
			wantServed: map[string]map[string]bool{"a": served("http")},
		},
		{
			name: "identical exports do not conflict, and unset fields equal their defaults",
			exports: []Export{
				export("a", 0, nil),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.SessionAffinity, s.Spec.Ports[0].Protocol = "", ""
					s.Spec.InternalTrafficPolicy = cluster
				}),
			},
			wantPorts:  ports(port("http", 80, v1.ProtocolTCP)),
			wantServed: map[string]map[string]bool{"a": served("http"), "b": served("http")},
		},
		{
			name: "different port names are unioned, each cluster serving its own",
			exports: []Export{
				export("a", 0, nil),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090})
				}),
				export("c", 2, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.Ports = []v1.ServicePort{{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}}
				}),
			},
			wantPorts:  ports(port("http", 80, v1.ProtocolTCP), port("metrics", 9090, v1.ProtocolTCP), port("dns", 53, v1.ProtocolUDP)),
			wantServed: map[string]map[string]bool{"a": served("http"), "b": served("http", "metrics"), "c": served("dns")},
			// The port sets are not identical: every port some cluster
			// lacks is a PortConflict naming those clusters.
			wantConflicts: []conflict{
				{mcsv1beta1.ServiceExportReasonPortConflict, `port "http"`, "a", []string{"c"}, []string{"c"}},
				{mcsv1beta1.ServiceExportReasonPortConflict, `port "metrics"`, "b", []string{"a", "c"}, []string{"a", "c"}},
				{mcsv1beta1.ServiceExportReasonPortConflict, `port "dns"`, "c", []string{"a", "b"}, []string{"a", "b"}},
			},
		},
		{
			name: "a port only the younger export has is exposed and conflicts",
			exports: []Export{
				export("a", 0, nil),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090})
				}),
			},
			wantPorts:     ports(port("http", 80, v1.ProtocolTCP), port("metrics", 9090, v1.ProtocolTCP)),
			wantServed:    map[string]map[string]bool{"a": served("http"), "b": served("http", "metrics")},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonPortConflict, `port "metrics"`, "b", []string{"a"}, []string{"a"}}},
		},
		{
			name: "a port the younger export lacks conflicts, three clusters",
			exports: []Export{
				export("a", 0, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090})
				}),
				export("b", 1, nil),
				export("c", 2, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090})
				}),
			},
			wantPorts:     ports(port("http", 80, v1.ProtocolTCP), port("metrics", 9090, v1.ProtocolTCP)),
			wantServed:    map[string]map[string]bool{"a": served("http", "metrics"), "b": served("http"), "c": served("http", "metrics")},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonPortConflict, `port "metrics"`, "a", []string{"b"}, []string{"b"}}},
		},
		{
			name: "identical port sets listed in another order do not conflict",
			exports: []Export{
				export("a", 0, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090})
				}),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.Ports = []v1.ServicePort{{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090}, {Name: "http", Port: 80}}
				}),
			},
			wantPorts:  ports(port("http", 80, v1.ProtocolTCP), port("metrics", 9090, v1.ProtocolTCP)),
			wantServed: map[string]map[string]bool{"a": served("http", "metrics"), "b": served("http", "metrics")},
		},
		{
			name: "every field identical and set in three clusters: no conflict",
			exports: []Export{
				export("a", 0, everyField),
				export("b", 1, everyField),
				export("c", 2, func(s *v1.Service, se *mcsv1beta1.ServiceExport) {
					everyField(s, se)
					// Families in another order are the same families.
					slices.Reverse(s.Spec.IPFamilies)
				}),
			},
			check: func(t *testing.T, r Result) {
				if r.Spec.SessionAffinity != v1.ServiceAffinityClientIP || *r.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 60 ||
					*r.Spec.InternalTrafficPolicy != v1.ServiceInternalTrafficPolicyLocal || *r.Spec.TrafficDistribution != v1.ServiceTrafficDistributionPreferClose ||
					!slices.Equal(r.Spec.IPFamilies, []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}) {
					t.Errorf("spec = %+v, want every field of the exports", r.Spec)
				}
				if !maps.Equal(r.Labels, map[string]string{"tier": "web"}) || !maps.Equal(r.Annotations, map[string]string{"note": "x"}) {
					t.Errorf("labels %v annotations %v, want the exports'", r.Labels, r.Annotations)
				}
			},
		},
		{
			name: "a port name with another number: the oldest export's port wins, the other cluster does not serve it",
			exports: []Export{
				export("b", 5, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.Ports[0].Port = 8080 }),
				export("a", 0, nil),
				export("c", 9, nil),
			},
			wantPorts:     ports(port("http", 80, v1.ProtocolTCP)),
			wantServed:    map[string]map[string]bool{"a": served("http"), "b": served(), "c": served("http")},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonPortConflict, `port "http"`, "a", []string{"b"}, nil}},
		},
		{
			name: "a port name with another protocol conflicts",
			exports: []Export{
				export("a", 0, nil),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.Ports[0].Protocol = v1.ProtocolUDP }),
			},
			wantPorts:     ports(port("http", 80, v1.ProtocolTCP)),
			wantServed:    map[string]map[string]bool{"a": served("http"), "b": served()},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonPortConflict, `port "http"`, "a", []string{"b"}, nil}},
		},
		{
			name: "a port name with another appProtocol conflicts",
			exports: []Export{
				export("a", 0, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.Ports[0].AppProtocol = ptr.To("http") }),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.Ports[0].AppProtocol = ptr.To("kubernetes.io/h2c")
				}),
			},
			wantPorts:     ports(mcsv1beta1.ServicePort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, AppProtocol: ptr.To("http")}),
			wantServed:    map[string]map[string]bool{"a": served("http"), "b": served()},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonPortConflict, `port "http"`, "a", []string{"b"}, nil}},
		},
		{
			name: "one port number and protocol under two names is listed once",
			exports: []Export{
				export("a", 0, nil),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.Ports[0].Name = "web" }),
			},
			wantPorts:     ports(port("http", 80, v1.ProtocolTCP)),
			wantServed:    map[string]map[string]bool{"a": served("http"), "b": served()},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonPortConflict, `port "http"`, "a", []string{"b"}, []string{"b"}}},
		},
		{
			name: "an unnamed port cannot join a named one",
			exports: []Export{
				export("a", 0, nil),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.Ports = []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 8080}}
				}),
			},
			wantPorts:     ports(port("http", 80, v1.ProtocolTCP)),
			wantServed:    map[string]map[string]bool{"a": served("http"), "b": served()},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonPortConflict, `port "http"`, "a", []string{"b"}, []string{"b"}}},
		},
		{
			name: "a named port cannot join an unnamed one",
			exports: []Export{
				export("a", 0, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.Ports[0].Name = "" }),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.Ports[0].Port = 8080 }),
				export("c", 2, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.Ports[0].Name = "" }),
			},
			wantPorts:     ports(port("", 80, v1.ProtocolTCP)),
			wantServed:    map[string]map[string]bool{"a": served(""), "b": served(), "c": served("")},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonPortConflict, `port ""`, "a", []string{"b"}, []string{"b"}}},
		},
		{
			name: "headlessness follows the oldest export",
			exports: []Export{
				export("a", 1, nil),
				export("b", 0, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.ClusterIP = v1.ClusterIPNone }),
			},
			check: func(t *testing.T, r Result) {
				if r.Spec.Type != mcsv1beta1.Headless {
					t.Errorf("type = %s, want Headless", r.Spec.Type)
				}
			},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonTypeConflict, "type", "b", []string{"a"}, nil}},
		},
		{
			name: "equal creation times are ordered by cluster ID",
			exports: []Export{
				export("b", 0, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.ClusterIP = v1.ClusterIPNone }),
				export("a", 0, nil),
			},
			check: func(t *testing.T, r Result) {
				if r.Spec.Type != mcsv1beta1.ClusterSetIP {
					t.Errorf("type = %s, want ClusterSetIP from cluster a", r.Spec.Type)
				}
			},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonTypeConflict, "type", "a", []string{"b"}, nil}},
		},
		{
			name: "session affinity and its timeout",
			exports: []Export{
				export("a", 0, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
					s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
				}),
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }),
				export("c", 2, nil),
			},
			check: func(t *testing.T, r Result) {
				if r.Spec.SessionAffinity != v1.ServiceAffinityClientIP || *r.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 60 {
					t.Errorf("affinity = %s %v, want ClientIP with 60 s", r.Spec.SessionAffinity, r.Spec.SessionAffinityConfig)
				}
			},
			wantConflicts: []conflict{
				{mcsv1beta1.ServiceExportReasonSessionAffinityConflict, "sessionAffinity", "a", []string{"c"}, nil},
				{mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict, "sessionAffinityConfig.clientIP.timeoutSeconds", "a", []string{"b"}, nil},
			},
		},
		{
			name: "internal traffic policy, traffic distribution and IP families",
			exports: []Export{
				export("a", 0, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
					s.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferClose)
				}),
				// The same families in another order serve the same endpoints.
				export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
					s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
					s.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferClose)
					s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
				}),
				export("c", 2, nil),
			},
			check: func(t *testing.T, r Result) {
				if want := []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}; !slices.Equal(r.Spec.IPFamilies, want) {
					t.Errorf("ipFamilies = %v, want %v", r.Spec.IPFamilies, want)
				}
				if *r.Spec.InternalTrafficPolicy != v1.ServiceInternalTrafficPolicyCluster || *r.Spec.TrafficDistribution != v1.ServiceTrafficDistributionPreferClose {
					t.Errorf("internalTrafficPolicy %s, trafficDistribution %s", *r.Spec.InternalTrafficPolicy, *r.Spec.TrafficDistribution)
				}
			},
			wantConflicts: []conflict{
				{mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict, "internalTrafficPolicy", "a", []string{"b"}, nil},
				{mcsv1beta1.ServiceExportReasonTrafficDistributionConflict, "trafficDistribution", "a", []string{"c"}, nil},
				{mcsv1beta1.ServiceExportReasonIPFamilyConflict, "ipFamilies", "a", []string{"c"}, nil},
			},
		},
		{
			name: "exported labels and annotations: the oldest export's maps are used whole",
			exports: []Export{
				export("a", 0, func(_ *v1.Service, se *mcsv1beta1.ServiceExport) {
					se.Spec.ExportedLabels = map[string]string{"tier": "web", "team": "a"}
					se.Spec.ExportedAnnotations = map[string]string{"note": "x"}
				}),
				export("b", 1, func(_ *v1.Service, se *mcsv1beta1.ServiceExport) {
					se.Spec.ExportedLabels = map[string]string{"tier": "frontend", "env": "prod"}
					se.Spec.ExportedAnnotations = map[string]string{"note": "y"}
				}),
			},
			check: func(t *testing.T, r Result) {
				// None of b's keys, not even the ones a does not set.
				if diff := cmp.Diff(map[string]string{"tier": "web", "team": "a"}, r.Labels); diff != "" {
					t.Errorf("labels (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(map[string]string{"note": "x"}, r.Annotations); diff != "" {
					t.Errorf("annotations (-want +got):\n%s", diff)
				}
			},
			wantConflicts: []conflict{
				{mcsv1beta1.ServiceExportReasonLabelsConflict, "exportedLabels", "a", []string{"b"}, nil},
				{mcsv1beta1.ServiceExportReasonAnnotationsConflict, "exportedAnnotations", "a", []string{"b"}, nil},
			},
		},
		{
			name: "exported labels that only add a key conflict; identical annotations do not",
			exports: []Export{
				export("a", 0, func(_ *v1.Service, se *mcsv1beta1.ServiceExport) {
					se.Spec.ExportedLabels = map[string]string{"tier": "web"}
					se.Spec.ExportedAnnotations = map[string]string{"note": "x"}
				}),
				export("b", 1, func(_ *v1.Service, se *mcsv1beta1.ServiceExport) {
					se.Spec.ExportedLabels = map[string]string{"tier": "web", "env": "prod"}
					se.Spec.ExportedAnnotations = map[string]string{"note": "x"}
				}),
				export("c", 2, func(_ *v1.Service, se *mcsv1beta1.ServiceExport) {
					se.Spec.ExportedLabels = map[string]string{"tier": "web"}
					se.Spec.ExportedAnnotations = map[string]string{"note": "x"}
				}),
			},
			check: func(t *testing.T, r Result) {
				if !maps.Equal(r.Labels, map[string]string{"tier": "web"}) || !maps.Equal(r.Annotations, map[string]string{"note": "x"}) {
					t.Errorf("labels %v annotations %v, want a's", r.Labels, r.Annotations)
				}
			},
			wantConflicts: []conflict{{mcsv1beta1.ServiceExportReasonLabelsConflict, "exportedLabels", "a", []string{"b"}, nil}},
		},
		{
			name: "an export without labels beside one with labels: the oldest's (none) are used",
			exports: []Export{
				export("a", 0, func(_ *v1.Service, se *mcsv1beta1.ServiceExport) { se.Spec.ExportedLabels = map[string]string{} }),
				export("b", 1, func(_ *v1.Service, se *mcsv1beta1.ServiceExport) {
					se.Spec.ExportedLabels = map[string]string{"tier": "web"}
					se.Spec.ExportedAnnotations = map[string]string{"note": "x"}
				}),
				// Unset and empty maps are the same.
				export("c", 2, nil),
			},
			check: func(t *testing.T, r Result) {
				if r.Labels != nil || r.Annotations != nil {
					t.Errorf("labels %v annotations %v, want none", r.Labels, r.Annotations)
				}
			},
			wantConflicts: []conflict{
				{mcsv1beta1.ServiceExportReasonLabelsConflict, "exportedLabels", "a", []string{"b"}, nil},
				{mcsv1beta1.ServiceExportReasonAnnotationsConflict, "exportedAnnotations", "a", []string{"b"}, nil},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Merge(tt.exports)
			if tt.want != nil {
				if diff := cmp.Diff(*tt.want, r.Spec); diff != "" {
					t.Errorf("spec (-want +got):\n%s", diff)
				}
			}
			if tt.wantPorts != nil {
				if diff := cmp.Diff(tt.wantPorts, r.Spec.Ports); diff != "" {
					t.Errorf("ports (-want +got):\n%s", diff)
				}
			}
			if tt.wantServed != nil {
				if diff := cmp.Diff(tt.wantServed, r.ServedPorts); diff != "" {
					t.Errorf("served ports (-want +got):\n%s", diff)
				}
			}
			var got []conflict
			for _, c := range r.Conflicts {
				got = append(got, conflict{c.Reason, c.Field, c.Winner, c.Losers, c.Missing})
				if c.Of != len(tt.exports) {
					t.Errorf("conflict %s counts %d exports, want %d", c.Field, c.Of, len(tt.exports))
				}
			}
			if diff := cmp.Diff(tt.wantConflicts, got, cmp.AllowUnexported(conflict{})); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
			// The order the caller lists exports in never matters.
			reversed := slices.Clone(tt.exports)
			slices.Reverse(reversed)
			if diff := cmp.Diff(r, Merge(reversed)); diff != "" {
				t.Errorf("merge depends on input order (-forward +reversed):\n%s", diff)
			}
		})
	}
}

func TestMergeListsClustersSorted(t *testing.T) {
	r := Merge([]Export{export("c", 0, nil), export("a", 2, nil), export("b", 1, nil)})
	if want := []string{"a", "b", "c"}; !slices.Equal(r.Clusters, want) {
		t.Errorf("clusters = %v, want %v", r.Clusters, want)
	}
	if r := Merge(nil); r.Clusters != nil || r.Spec.Ports != nil {
		t.Errorf("Merge(nil) = %+v, want the zero Result", r)
	}
}

func TestConflictCondition(t *testing.T) {
	none := ConflictCondition(nil)
	if none.Status != metav1.ConditionFalse || none.Reason != string(mcsv1beta1.ServiceExportReasonNoConflicts) {
		t.Errorf("no conflicts: %+v", none)
	}
	r := Merge([]Export{
		export("a", 0, nil),
		export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
			s.Spec.Ports[0].Port = 8080
			s.Spec.ClusterIP = v1.ClusterIPNone
		}),
		export("c", 2, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) { s.Spec.Ports[0].Port = 8080 }),
	})
	c := ConflictCondition(r.Conflicts)
	if c.Status != metav1.ConditionTrue || c.Reason != "TypeConflict,PortConflict" {
		t.Errorf("status %s reason %q, want True TypeConflict,PortConflict", c.Status, c.Reason)
	}
	want := `Conflicting type. Using "ClusterSetIP" from oldest service export in "a". 1/3 clusters disagree: b. ` +
		`Conflicting port "http". Using 80/TCP from oldest service export in "a". 2/3 clusters disagree: b, c.`
	if c.Message != want {
		t.Errorf("message:\n got %s\nwant %s", c.Message, want)
	}
}

func TestConflictMessageNamesClustersWithoutThePort(t *testing.T) {
	r := Merge([]Export{
		export("a", 0, nil),
		export("b", 1, func(s *v1.Service, _ *mcsv1beta1.ServiceExport) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "metrics", Protocol: v1.ProtocolTCP, Port: 9090})
		}),
		export("c", 2, nil),
	})
	c := ConflictCondition(r.Conflicts)
	want := `Conflicting port "metrics". Using 9090/TCP from oldest service export in "b". 2/3 clusters disagree: a, c. Not exposed by a, c.`
	if c.Status != metav1.ConditionTrue || c.Reason != "PortConflict" || c.Message != want {
		t.Errorf("condition %s %s %q, want True PortConflict %q", c.Status, c.Reason, c.Message, want)
	}
}

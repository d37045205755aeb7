package mcs

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics"
	"k8s.io/multiclusterservices/export"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Attacks on what a member may publish, by a tenant who may write
// EndpointSlices (and Endpoints) in a namespace it exports from: the
// controller's own checks, without the admission policy that reserves
// Kubernetes' managed-by values. The addresses the attacker publishes
// are those it must never reach other members with: another member's
// node, and an apiserver's Service IP.
var forgedAddrs = []string{"172.18.0.3", "10.96.0.1"}

// source is how one attack's slice is written: the Service's selector,
// and the slice's managed-by and controller (kind/name, the Service's UID
// for a Service; none when kind is empty). targets names each endpoint's
// Pod, as the EndpointSlice controller does.
type source struct {
	selector      bool
	manager, kind string
	owner         string
	targets       bool
}

// exportSource gives member m an exported Service demo/web (port http 80)
// and one slice of addrs written as src says.
func exportSource(t *testing.T, m *fakeMember, src source, addrs ...string) {
	t.Helper()
	ctx := context.Background()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", UID: "uid-web"},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
	if src.selector {
		svc.Spec.Selector = map[string]string{"app": "web"}
	}
	if _, err := m.kube.CoreV1().Services("demo").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abcde", Namespace: "demo", UID: "uid-slice", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: src.manager}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	if src.kind != "" {
		uid := svc.UID
		if src.kind != "Service" || src.owner != "web" {
			uid = "uid-other"
		}
		slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: src.kind, Name: src.owner, UID: uid, Controller: ptr.To(true)}}
	}
	for i, a := range addrs {
		ep := discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
		if src.targets {
			ep.TargetRef = &v1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: fmt.Sprintf("web-%d", i)}
		}
		slice.Endpoints = append(slice.Endpoints, ep)
	}
	if _, err := m.kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.mcs.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, &mcsv1beta1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", CreationTimestamp: metav1.Now()},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "the export in "+m.id+"'s caches", func() bool {
		_, err := m.exports.ServiceExports("demo").Get("web")
		_, svcErr := m.services.Services("demo").Get("web")
		return err == nil && svcErr == nil && len(indexed[*discoveryv1.EndpointSlice](m.localSlices, byService, "demo/web")) == 1
	})
}

// importedAddrs returns the addresses m's imported slices of demo/web
// carry, sorted.
func importedAddrs(t *testing.T, m *fakeMember) []string {
	t.Helper()
	mcs, _ := slicesIn(t, m)
	var out []string
	for _, s := range mcs {
		for _, ep := range s.Endpoints {
			out = append(out, ep.Addresses...)
		}
	}
	slices.Sort(out)
	return out
}

// recordedEvents drains m's recorded events.
func recordedEvents(m *fakeMember) []string {
	var out []string
	ch := m.recorder.(*events.FakeRecorder).Events
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// metricValue is the value of the series of metric name in reg with a
// label of value label, a cluster ID mostly, or without labels when label
// is "" (0 when there is none).
func metricValue(t *testing.T, reg metrics.KubeRegistry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" && len(m.GetLabel()) > 0 || label != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetValue() == label }) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestCoreSourceTrust: each attack exports demo/web from cluster-a with
// a slice written as the attacker can; cluster-b must not get the forged
// addresses, and cluster-a's export must hear why (an event, a metric),
// never a silent drop. Legitimate slices, as Kubernetes' controllers
// write them, still flow.
func TestCoreSourceTrust(t *testing.T) {
	ranges := func(s ...string) map[string][]netip.Prefix {
		var p []netip.Prefix
		for _, x := range s {
			p = append(p, netip.MustParsePrefix(x))
		}
		return map[string][]netip.Prefix{"cluster-a": p}
	}
	endpointSlice := source{selector: true, manager: export.ManagerEndpointSliceController, kind: "Service", owner: "web", targets: true}
	mirrored := source{manager: export.ManagerMirroringController, kind: "Endpoints", owner: "web"}
	for _, tc := range []struct {
		name      string
		podCIDRs  map[string][]netip.Prefix
		nodeCIDRs []string // spec.podCIDRs of a Node in cluster-a, written by its administrator
		src       source
		addrs     []string
		want      []string // imported in cluster-b
		event     string   // reason of the event on cluster-a's export
		metric    string   // a cluster-a series that counts it
		increment float64
	}{{
		name: "attack: a selector-less Service's Endpoints with node and apiserver addresses, ranges unknown",
		src:  mirrored, addrs: forgedAddrs,
		event: ReasonEndpointRangesUnknown, metric: "mcs_controller_endpoints_ranges_unknown_total", increment: 2,
	}, {
		name: "attack: the EndpointSlice controller's label on a selector-less Service's slice",
		src:  source{manager: export.ManagerEndpointSliceController, kind: "Service", owner: "web", targets: true}, addrs: forgedAddrs,
		event: string(export.SourceWrongController), metric: "mcs_controller_unmirrored_endpointslices_total", increment: 1,
	}, {
		name: "attack: the EndpointSlice controller's label and no owner",
		src:  source{selector: true, manager: export.ManagerEndpointSliceController, targets: true}, addrs: forgedAddrs,
		event: string(export.SourceNotOwned), metric: "mcs_controller_unmirrored_endpointslices_total", increment: 1,
	}, {
		name: "attack: the EndpointSlice controller's label, owned by another Service",
		src:  source{selector: true, manager: export.ManagerEndpointSliceController, kind: "Service", owner: "db", targets: true}, addrs: forgedAddrs,
		event: string(export.SourceNotOwned), metric: "mcs_controller_unmirrored_endpointslices_total", increment: 1,
	}, {
		name: "attack: the mirroring controller's label and no owner, ranges configured",
		src:  source{manager: export.ManagerMirroringController}, addrs: forgedAddrs, podCIDRs: ranges("10.1.0.0/16"),
		event: string(export.SourceNotOwned), metric: "mcs_controller_unmirrored_endpointslices_total", increment: 1,
	}, {
		name: "attack: endpoints naming no Pod in the EndpointSlice controller's slice, ranges unknown",
		src:  source{selector: true, manager: export.ManagerEndpointSliceController, kind: "Service", owner: "web"}, addrs: forgedAddrs,
		event: ReasonEndpointRangesUnknown, metric: "mcs_controller_endpoints_ranges_unknown_total", increment: 2,
	}, {
		name: "attack: addresses outside --member-pod-cidrs",
		src:  mirrored, addrs: append([]string{"10.1.0.7"}, forgedAddrs...), podCIDRs: ranges("10.1.0.0/16"),
		want:  []string{"10.1.0.7"},
		event: "EndpointsOutsidePodRanges", metric: "mcs_controller_endpoints_outside_pod_ranges_total", increment: 2,
	}, {
		// A member's administrator writes its Node objects: where the
		// operator states the member's ranges, nodes widen nothing.
		name: "attack: cluster-a's Nodes claim 0.0.0.0/1 and 128.0.0.0/1 while --member-pod-cidrs names it",
		src:  mirrored, addrs: append([]string{"10.1.0.7"}, forgedAddrs...), podCIDRs: ranges("10.1.0.0/16"),
		nodeCIDRs: []string{"0.0.0.0/1", "128.0.0.0/1"},
		want:      []string{"10.1.0.7"},
		event:     "EndpointsOutsidePodRanges", metric: "mcs_controller_endpoints_outside_pod_ranges_total", increment: 2,
	}, {
		// Confinement fails closed: a member the operator's ranges do not
		// name (a new one, or one that took another ID) is not believed
		// on its Nodes' word either.
		name: "attack: --member-pod-cidrs names other clusters, cluster-a's Nodes claim 0.0.0.0/1 and 128.0.0.0/1",
		src:  mirrored, addrs: append([]string{"10.1.0.7"}, forgedAddrs...),
		podCIDRs:  map[string][]netip.Prefix{"cluster-z": {netip.MustParsePrefix("10.9.0.0/16")}},
		nodeCIDRs: []string{"0.0.0.0/1", "128.0.0.0/1"},
		event:     ReasonEndpointRangesUnknown, metric: "mcs_controller_endpoints_ranges_unknown_total", increment: 3,
	}, {
		name: "a mirrored slice flows within its Nodes' pod CIDRs where the operator states no ranges",
		src:  mirrored, addrs: []string{"10.244.1.7"}, nodeCIDRs: []string{"10.244.1.0/24"},
		want: []string{"10.244.1.7"},
	}, {
		name: "the EndpointSlice controller's slice of Pods flows while the ranges are unknown",
		src:  endpointSlice, addrs: []string{"10.1.0.7", "10.1.0.8"},
		want: []string{"10.1.0.7", "10.1.0.8"},
	}, {
		name: "a mirrored slice flows within --member-pod-cidrs",
		src:  mirrored, addrs: []string{"10.1.0.7", "10.2.0.8"}, podCIDRs: ranges("10.1.0.0/16", "10.2.0.0/16"),
		want: []string{"10.1.0.7", "10.2.0.8"},
	}, {
		name: "the EndpointSlice controller's slice within --member-pod-cidrs, Pods or not",
		src:  source{selector: true, manager: export.ManagerEndpointSliceController, kind: "Service", owner: "web"}, addrs: []string{"10.1.0.7"}, podCIDRs: ranges("10.1.0.0/16"),
		want: []string{"10.1.0.7"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var objects map[string][]runtime.Object
			if tc.nodeCIDRs != nil {
				objects = map[string][]runtime.Object{"cluster-a": {&v1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
					Spec:       v1.NodeSpec{PodCIDRs: tc.nodeCIDRs},
				}}}
			}
			c, ms := newFakeClusterset(t, Config{
				SourceManagers: []string{export.ManagerEndpointSliceController, export.ManagerMirroringController},
				MemberPodCIDRs: tc.podCIDRs,
			}, []string{"cluster-a", "cluster-b"}, nil, objects)
			reg := metrics.NewKubeRegistry()
			c.metrics = NewMetrics(reg)
			a, b := ms["cluster-a"], ms["cluster-b"]
			exportSource(t, a, tc.src, tc.addrs...)
			syncAll(t, c, "demo/web")

			if importIn(t, b) == nil {
				t.Fatal("no import in cluster-b: the export itself is valid")
			}
			if got := importedAddrs(t, b); !slices.Equal(got, tc.want) {
				t.Errorf("cluster-b imports %v, want %v", got, tc.want)
			}
			evs := recordedEvents(a)
			if tc.event == "" {
				if len(evs) > 0 {
					t.Errorf("events on a legitimate export: %v", evs)
				}
				return
			}
			if !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Warning "+tc.event+" ") }) {
				t.Errorf("events on cluster-a's export %v, want a warning %s", evs, tc.event)
			}
			if got := metricValue(t, reg, tc.metric, "cluster-a"); got != tc.increment {
				t.Errorf("%s{cluster=cluster-a} = %v, want %v", tc.metric, got, tc.increment)
			}
		})
	}
}

// TestCoreEndpointRangesKnown: whether a member's endpoint ranges are
// known is a gauge per member, so that an operator finds the members
// whose selector-less exports are held back before a user does.
func TestCoreEndpointRangesKnown(t *testing.T) {
	// cluster-b is not named by --member-pod-cidrs, which names
	// cluster-a: its ranges are unknown, whatever its nodes say.
	c, _ := newFakeClusterset(t, Config{MemberPodCIDRs: map[string][]netip.Prefix{"cluster-a": {netip.MustParsePrefix("10.1.0.0/16")}}},
		[]string{"cluster-a", "cluster-b"}, nil, nil)
	reg := metrics.NewKubeRegistry()
	c.metrics = NewMetrics(reg)
	c.metrics.register(c)
	for id, want := range map[string]float64{"cluster-a": 1, "cluster-b": 0} {
		if got := metricValue(t, reg, "mcs_controller_member_endpoint_ranges_known", id); got != want {
			t.Errorf("mcs_controller_member_endpoint_ranges_known{cluster=%s} = %v, want %v", id, got, want)
		}
	}
}

// TestEndpointRangesOf: whose word a member's endpoint ranges are. The
// operator's ranges replace what the member's own Node objects say, and a
// member they do not name is believed on nothing.
func TestEndpointRangesOf(t *testing.T) {
	p := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	operator := map[string][]netip.Prefix{"cluster-a": p("10.1.0.0/16")}
	wide := p("0.0.0.0/1", "128.0.0.0/1")
	for _, tc := range []struct {
		name                string
		configured          map[string][]netip.Prefix
		cluster             string
		nodeCIDRs, nodeAddr []netip.Prefix
		want                endpointRanges
	}{
		{"attack: nodes claiming everything beside the operator's ranges", operator, "cluster-a", wide, p("192.0.2.1/32"),
			endpointRanges{Prefixes: p("10.1.0.0/16"), Known: true, Source: rangesFromOperator}},
		{"attack: a member the operator's ranges do not name", operator, "cluster-x", wide, nil,
			endpointRanges{Source: rangesNotNamed}},
		{"no operator ranges: the nodes' pod CIDRs and addresses", nil, "cluster-a", p("10.244.0.0/24"), p("192.0.2.1/32"),
			endpointRanges{Prefixes: p("10.244.0.0/24", "192.0.2.1/32"), Known: true, Source: rangesFromNodes}},
		{"no operator ranges, node addresses alone: unknown", nil, "cluster-a", nil, p("192.0.2.1/32"),
			endpointRanges{Source: rangesUnknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := endpointRangesOf(tc.configured, tc.cluster, tc.nodeCIDRs, tc.nodeAddr)
			if !slices.Equal(got.Prefixes, tc.want.Prefixes) || got.Known != tc.want.Known || got.Source != tc.want.Source {
				t.Errorf("endpointRangesOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

package multicluster

import (
	"maps"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/multiclusterservices/clusterselection"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// localSlice is a local Service's own slice, as kube-proxy's informer
// delivers it.
func localSlice(ns, name, service string, ready bool, addrs ...string) *discoveryv1.EndpointSlice {
	s := mcsSlice(ns, name, service, "", addrs...)
	s.Labels = map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	for i := range s.Endpoints {
		s.Endpoints[i].Conditions.Ready = ptr.To(ready)
	}
	return s
}

// accepting is local Service ns/name whose owner accepts native names
// (mcsproxy.AnnotationAcceptNativeNames).
func accepting(ns, name string) *v1.Service {
	svc := localService(ns, name, "10.96.0.77")
	svc.Annotations = map[string]string{mcsproxy.AnnotationAcceptNativeNames: "true"}
	return svc
}

// localFirstWeb sets up, in a synced proxier that knows its cluster ID
// (cluster-local), Service ns/web's own ready slice (10.3.0.1) and a
// LocalFirst import of that name served by cluster-a (10.1.0.1). It returns
// the fixture, the local slice and the import.
func localFirstWeb(t *testing.T) (*fixture, *discoveryv1.EndpointSlice, *mcsv1beta1.ServiceImport) {
	f := newSyncedFixture(t)
	p := f.proxier
	p.SetLocalClusterID("cluster-local")
	p.OnServiceAdd(accepting("ns", "web"))
	local := localSlice("ns", "web-local", "web", true, "10.3.0.1")
	p.OnEndpointSliceAdd(local)
	si := serviceImport("ns", "web", 0, "10.250.0.10")
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: "LocalFirst"}
	p.OnServiceImportUpsert(si)
	p.OnEndpointSliceAdd(mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	return f, local, si
}

// TestNativeNames follows one Service, ns/web, with its own endpoint
// (10.3.0.1) and an import of the same name served by cluster-a (10.1.0.1)
// and by this cluster (10.3.0.1 again, already the local Service's).
func TestNativeNames(t *testing.T) {
	f, local, si := localFirstWeb(t)
	p := f.proxier
	want := func(what string, service string, addrs ...string) {
		t.Helper()
		if got := f.provider.endpointsOf(service); !slices.Equal(got, addrs) {
			t.Errorf("%s: %s has endpoints %v, want %v", what, service, got, addrs)
		}
	}
	p.OnEndpointSliceAdd(mcsSlice("ns", "web-own", "web", "cluster-local", "10.3.0.1"))
	want("LocalFirst, local endpoint ready", "ns/web", "10.3.0.1")
	want("the clusterset IP is unchanged", "ns/web.clusterset", "10.1.0.1", "10.3.0.1")

	// Failover: the local endpoint is not ready, the remote one joins (the
	// local one stays listed; the proxier prefers ready endpoints).
	switches := func(direction string) float64 {
		v, _ := testutil.GetCounterMetricValue(localFirstSwitchesTotal.WithLabelValues(direction))
		return v
	}
	joined := func() float64 {
		v, _ := testutil.GetGaugeMetricValue(nativeNamesServices.WithLabelValues(string(mcsproxy.LocalFirst)))
		return v
	}
	failovers, failbacks, joinedBefore := switches("failover"), switches("failback"), joined()
	notReady := localSlice("ns", "web-local", "web", false, "10.3.0.1")
	p.OnEndpointSliceUpdate(local, notReady)
	want("LocalFirst, no local endpoint ready", "ns/web", "10.1.0.1", "10.3.0.1")
	if switches("failover") != failovers+1 || joined() != joinedBefore+1 {
		t.Errorf("a failover was not counted: %v failovers, %v Services joined", switches("failover")-failovers, joined()-joinedBefore)
	}
	// The same decision again hands the proxier nothing: the slice
	// carrying the remote endpoint is the same object.
	f.provider.takeCalls()
	p.mu.Lock()
	p.im.reconcileNative(types.NamespacedName{Namespace: "ns", Name: "web"})
	p.mu.Unlock()
	f.expectCalls()
	// Failback.
	p.OnEndpointSliceUpdate(notReady, local)
	want("LocalFirst, local endpoint ready again", "ns/web", "10.3.0.1")
	if switches("failback") != failbacks+1 || joined() != joinedBefore || switches("failover") != failovers+1 {
		t.Errorf("a failback was not counted: %v failbacks, %v Services joined", switches("failback")-failbacks, joined()-joinedBefore)
	}

	// A minimum above what is ready spills over before the cluster is empty.
	two := si.DeepCopy()
	two.ResourceVersion = "2"
	two.Annotations[mcsproxy.AnnotationLocalFirstMinimum] = "2"
	p.OnServiceImportUpsert(two)
	want("LocalFirst, one of a minimum of two ready", "ns/web", "10.1.0.1", "10.3.0.1")

	both := si.DeepCopy()
	both.ResourceVersion = "3"
	both.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: "RemoteAndLocal"}
	p.OnServiceImportUpsert(both)
	want("RemoteAndLocal", "ns/web", "10.1.0.1", "10.3.0.1")
	// The remote slice follows its source.
	p.OnEndpointSliceUpdate(mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"), mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.2"))
	want("RemoteAndLocal after a remote change", "ns/web", "10.1.0.2", "10.3.0.1")

	// A typo turns nothing on, and says so.
	f.events.take()
	typo := si.DeepCopy()
	typo.ResourceVersion = "4"
	typo.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: "Both"}
	p.OnServiceImportUpsert(typo)
	want("an unknown strategy", "ns/web", "10.3.0.1")
	f.expectEvents("ServiceImport ns/web InvalidNativeNames")

	// Unknown cluster ID: this cluster's own slices of the import cannot
	// be told apart, so nothing joins.
	p.OnServiceImportUpsert(both.DeepCopy())
	p.SetLocalClusterID("")
	want("cluster ID unknown", "ns/web", "10.3.0.1")
	p.SetLocalClusterID("cluster-local")
	want("cluster ID known again", "ns/web", "10.1.0.2", "10.3.0.1")

	// The import goes: so do its endpoints, from the local Service too.
	p.OnServiceImportDelete(both)
	want("no import", "ns/web", "10.3.0.1")

	// An import without native names never touches the local Service.
	plain := serviceImport("ns", "web", 0, "10.250.0.10")
	p.OnServiceImportUpsert(plain)
	p.OnEndpointSliceUpdate(local, notReady)
	want("no native names, local endpoint not ready", "ns/web", "10.3.0.1")
}

// A Service with no slice of its own (the selector-less one the controller
// creates where a member had none) gets the import's remote endpoints.
func TestNativeNamesForAServiceWithoutSlices(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.SetLocalClusterID("cluster-local")
	p.OnServiceAdd(accepting("ns", "web"))
	si := serviceImport("ns", "web", 0, "10.250.0.10")
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: "RemoteAndLocal"}
	p.OnEndpointSliceAdd(mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	p.OnServiceImportUpsert(si)
	if got := f.provider.endpointsOf("ns/web"); !slices.Equal(got, []string{"10.1.0.1"}) {
		t.Errorf("ns/web has endpoints %v, want the import's", got)
	}
	p.OnServiceImportDelete(si)
	if got := f.provider.endpointsOf("ns/web"); len(got) != 0 {
		t.Errorf("ns/web keeps endpoints %v after the import went", got)
	}
	p.OnServiceDelete(accepting("ns", "web"))
	if len(p.im.native) != 0 {
		t.Errorf("native state kept for %d names with nothing left", len(p.im.native))
	}
}

// An update of a local slice is decided whole: LocalFirst never sees the
// Service without it, so the remote endpoints do not come and go within
// one event.
func TestNativeNamesUpdateIsDecidedWhole(t *testing.T) {
	f, local, _ := localFirstWeb(t)
	f.provider.takeCalls()
	moved := localSlice("ns", "web-local", "web", true, "10.3.0.2")
	f.proxier.OnEndpointSliceUpdate(local, moved)
	f.expectCalls("SliceUpdate ns/web-local")
}

// LocalFirst's failover and failback must never be seen half done by the
// proxier, which can sync between any two calls: a half-done failover
// leaves the local Service's ClusterIP rejecting connections, and a split
// change completes one sync later (up to kube-proxy's minimum sync
// period). Where the local slice can carry the remote endpoints (same
// address type and ports) the switch is one change of that slice; where it
// cannot (the remote cluster serves another port), the remote slices
// arrive before the local one leaves and go after it is back, so that
// every moment in between has ready endpoints.
func TestNativeNamesFailoverNeverLeavesTheServiceEmpty(t *testing.T) {
	for _, tc := range []struct {
		name      string
		remote    func() *discoveryv1.EndpointSlice
		wantCalls int // 0: at least two
	}{
		{"carried by the local slice", func() *discoveryv1.EndpointSlice {
			return mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1")
		}, 1},
		{"on its own, another port", func() *discoveryv1.EndpointSlice {
			s := mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1")
			s.Ports[0].Port = ptr.To[int32](9090)
			return s
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, local, _ := localFirstWeb(t)
			f.proxier.OnEndpointSliceUpdate(mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"), tc.remote())
			var states [][]string
			f.provider.afterSlice = func() { states = append(states, f.provider.readyOf("ns/web")) }
			unready := localSlice("ns", "web-local", "web", false, "10.3.0.1")
			for _, step := range []struct {
				what     string
				old, cur *discoveryv1.EndpointSlice
				want     []string
			}{
				{"failover", local, unready, []string{"10.1.0.1"}},
				{"failback", unready, local, []string{"10.3.0.1"}},
			} {
				states = nil
				f.proxier.OnEndpointSliceUpdate(step.old, step.cur)
				switch {
				case tc.wantCalls > 0 && len(states) != tc.wantCalls:
					t.Errorf("%s: %d calls to the proxier, want %d", step.what, len(states), tc.wantCalls)
				case tc.wantCalls == 0 && len(states) < 2:
					t.Errorf("%s: %d calls to the proxier, want the local slice and the remote one", step.what, len(states))
				}
				for i, st := range states {
					if len(st) == 0 {
						t.Errorf("%s: after call %d of %d the local Service has no ready endpoint", step.what, i+1, len(states))
					}
				}
				if got := states[len(states)-1]; !slices.Equal(got, step.want) {
					t.Errorf("%s: ends with %v, want %v", step.what, got, step.want)
				}
			}
		})
	}
}

// When the local slice that carries the remote endpoints goes, another
// takes them over first: the proxier never holds the Service without them.
func TestNativeNamesCarrierHandsOverWithoutAGap(t *testing.T) {
	f := newSyncedFixture(t)
	p := f.proxier
	p.SetLocalClusterID("cluster-local")
	p.OnServiceAdd(accepting("ns", "web"))
	one, two := localSlice("ns", "web-1", "web", true, "10.3.0.1"), localSlice("ns", "web-2", "web", true, "10.3.0.2")
	p.OnEndpointSliceAdd(one)
	p.OnEndpointSliceAdd(two)
	si := serviceImport("ns", "web", 0, "10.250.0.10")
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: "RemoteAndLocal"}
	p.OnServiceImportUpsert(si)
	p.OnEndpointSliceAdd(mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	if got := f.provider.endpointsOf("ns/web"); !slices.Equal(got, []string{"10.1.0.1", "10.3.0.1", "10.3.0.2"}) {
		t.Fatalf("ns/web has endpoints %v, want its own and cluster-a's", got)
	}
	for _, gone := range []*discoveryv1.EndpointSlice{one, two} {
		var states [][]string
		f.provider.afterSlice = func() { states = append(states, f.provider.heldOf("ns/web", false)) }
		p.OnEndpointSliceDelete(gone)
		for i, st := range states {
			if !slices.Contains(st, "10.1.0.1") {
				t.Errorf("%s deleted: after call %d of %d the local Service lacks cluster-a's endpoint: %v", gone.Name, i+1, len(states), st)
			}
		}
	}
	if got := f.provider.endpointsOf("ns/web"); !slices.Equal(got, []string{"10.1.0.1"}) {
		t.Errorf("ns/web has endpoints %v with no slice of its own, want cluster-a's", got)
	}
}

// A dual-stack Service fails over per family: when its IPv4 endpoints are
// not ready, the remote IPv4 ones ride in its IPv4 slice (one change),
// and nothing joins its IPv6 slice, whose endpoints are ready.
func TestNativeNamesDualStackFailsOverPerFamily(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.SetLocalClusterID("cluster-local")
	p.OnServiceAdd(accepting("ns", "web"))
	v4 := localSlice("ns", "web-v4", "web", true, "10.3.0.1")
	v6 := localSlice("ns", "web-v6", "web", true, "fd00:3::1")
	v6.AddressType = discoveryv1.AddressTypeIPv6
	p.OnEndpointSliceAdd(v4)
	p.OnEndpointSliceAdd(v6)
	si := serviceImport("ns", "web", 0, "10.250.0.10")
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: "LocalFirst"}
	p.OnServiceImportUpsert(si)
	remote6 := mcsSlice("ns", "web-a-v6", "web", "cluster-a", "fd00:1::1")
	remote6.AddressType = discoveryv1.AddressTypeIPv6
	p.OnEndpointSliceAdd(mcsSlice("ns", "web-a-v4", "web", "cluster-a", "10.1.0.1"))
	p.OnEndpointSliceAdd(remote6)
	f.provider.takeCalls()

	p.OnEndpointSliceUpdate(v4, localSlice("ns", "web-v4", "web", false, "10.3.0.1"))
	f.expectCalls("SliceUpdate ns/web-v4")
	if got := f.provider.endpointsOf("ns/web"); !slices.Equal(got, []string{"10.1.0.1", "10.3.0.1", "fd00:3::1"}) {
		t.Errorf("ns/web has endpoints %v, want cluster-a's IPv4 endpoint beside its own", got)
	}
}

// Attacks through native names, with an import the proxy trusts (written
// with the controller's label, as stolen credentials or a bug would write
// it): it never adds remote endpoints to a system Service, and an import
// that lost its own clusterset IP here adds them to no Service.
func TestNativeNamesNeverReachSystemServicesOrRefusedImports(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.SetLocalClusterID("cluster-local")
	for _, svc := range []types.NamespacedName{{Namespace: "kube-system", Name: "kube-dns"}, {Namespace: "default", Name: "kubernetes"}, {Namespace: "kube-public", Name: "x"}} {
		// Even were its owner to accept them.
		p.OnServiceAdd(accepting(svc.Namespace, svc.Name))
		p.OnEndpointSliceAdd(localSlice(svc.Namespace, svc.Name+"-own", svc.Name, false, "10.3.0.53"))
		si := serviceImport(svc.Namespace, svc.Name, 0, "10.250.0.53")
		si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)}
		f.events.take()
		p.OnServiceImportUpsert(si)
		p.OnEndpointSliceAdd(mcsSlice(svc.Namespace, svc.Name+"-evil", svc.Name, "cluster-evil", "10.9.9.9"))
		if got := f.provider.endpointsOf(svc.String()); !slices.Equal(got, []string{"10.3.0.53"}) {
			t.Errorf("%s has endpoints %v, want only its own", svc, got)
		}
		f.expectEvents("ServiceImport " + svc.String() + " SystemService")
		p.OnServiceImportDelete(si)
	}
	if mcsproxy.SystemService("default", "web") || mcsproxy.SystemService("prod", "kubernetes") {
		t.Error("only default/kubernetes is a system Service of namespace default")
	}

	// An import whose clusterset IP a local Service holds is refused it,
	// and so is its native name.
	p.OnServiceAdd(accepting("ns", "web"))
	p.OnEndpointSliceAdd(localSlice("ns", "web-own", "web", false, "10.3.0.1"))
	p.OnServiceAdd(localService("other", "db", "10.250.0.10"))
	si := serviceImport("ns", "web", 0, "10.250.0.10")
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)}
	p.OnServiceImportUpsert(si)
	p.OnEndpointSliceAdd(mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	if got := f.provider.endpointsOf("ns/web"); !slices.Equal(got, []string{"10.3.0.1"}) {
		t.Errorf("an import refused its IP added endpoints to ns/web: %v", got)
	}
	// Once it owns its IP, its native name is served; lost again, it is
	// withdrawn.
	p.OnServiceDelete(localService("other", "db", "10.250.0.10"))
	if got := f.provider.endpointsOf("ns/web"); !slices.Equal(got, []string{"10.1.0.1", "10.3.0.1"}) {
		t.Errorf("ns/web has %v once its import owns its IP, want the remote endpoint too", got)
	}
	p.OnServiceAdd(localService("other", "db", "10.250.0.10"))
	if got := f.provider.endpointsOf("ns/web"); !slices.Equal(got, []string{"10.3.0.1"}) {
		t.Errorf("ns/web kept %v after its import lost its IP", got)
	}
}

// TestNativeNamesNeedTheOwnersConsent: an import's native names reach a
// local Service only when the Service's owner accepts them. The attacker
// exports (from another cluster) or holds the controller's credentials,
// and asks for RemoteAndLocal of a Service of the namespace (a webhook's):
// nothing joins it until its owner sets the annotation, and it is taken
// back when the owner removes it. An MCS slice written straight for the
// local Service is dropped whatever the owner says.
func TestNativeNamesNeedTheOwnersConsent(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.SetLocalClusterID("cluster-local")
	owned := localService("ns", "webhook", "10.96.0.9")
	p.OnServiceAdd(owned)
	p.OnEndpointSliceAdd(localSlice("ns", "webhook-own", "webhook", true, "10.3.0.9"))
	si := serviceImport("ns", "webhook", 0, "10.250.0.9")
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)}
	f.events.take()
	p.OnServiceImportUpsert(si)
	p.OnEndpointSliceAdd(mcsSlice("ns", "webhook-evil", "webhook", "cluster-evil", "10.9.9.9"))
	if got := f.provider.endpointsOf("ns/webhook"); !slices.Equal(got, []string{"10.3.0.9"}) {
		t.Errorf("ns/webhook has endpoints %v without its owner's consent, want only its own", got)
	}
	f.expectEvents("ServiceImport ns/webhook NativeNamesNotAccepted")
	// The clusterset IP itself is served as ever.
	if got := f.provider.endpointsOf("ns/webhook.clusterset"); !slices.Equal(got, []string{"10.9.9.9"}) {
		t.Errorf("the import's own endpoints %v", got)
	}

	// Straight into the Service's slices, by the controller's labels:
	// dropped, consent or not.
	direct := mcsSlice("ns", "webhook-direct", "webhook", "cluster-evil", "10.9.9.8")
	direct.Labels[discoveryv1.LabelServiceName] = "webhook"
	p.OnEndpointSliceAdd(direct)
	if got := f.provider.endpointsOf("ns/webhook"); slices.Contains(got, "10.9.9.8") {
		t.Errorf("an MCS slice naming ns/webhook was routed as its own: %v", got)
	}
	f.expectEvents("EndpointSlice ns/webhook-direct LocalServiceName")

	// The owner accepts: the remote endpoints join; withdraws: they go.
	consenting := owned.DeepCopy()
	consenting.Annotations = map[string]string{mcsproxy.AnnotationAcceptNativeNames: "true"}
	p.OnServiceUpdate(owned, consenting)
	if got := f.provider.endpointsOf("ns/webhook"); !slices.Equal(got, []string{"10.3.0.9", "10.9.9.9"}) {
		t.Errorf("ns/webhook has endpoints %v once its owner accepts, want its own and the import's", got)
	}
	p.OnServiceUpdate(consenting, owned)
	if got := f.provider.endpointsOf("ns/webhook"); !slices.Equal(got, []string{"10.3.0.9"}) {
		t.Errorf("ns/webhook keeps %v after its owner withdrew consent", got)
	}
}

// TestPlanNative is native names' decision alone, a pure function of the
// policy, the import's remote slices and what the local Service holds:
// each remote slice rides in a local slice that can carry it (the one
// already carrying it first, so that endpoints do not move between
// slices), else joins on its own; with LocalFirst, the remote endpoints
// only while the local ones are too few; Off, nothing.
func TestPlanNative(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	remoteA := mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1")
	remoteV6 := mcsSlice("ns", "web-a6", "web", "cluster-a", "fd00::1")
	remoteV6.AddressType = discoveryv1.AddressTypeIPv6
	sources := func(s ...*discoveryv1.EndpointSlice) []clusterselection.Source { return clusterselection.Sources(s) }
	local1, local2 := localSlice("ns", "web-1", "web", true, "10.2.0.1"), localSlice("ns", "web-2", "web", true, "10.2.0.2")
	unreadyLocal := localSlice("ns", "web-1", "web", false, "10.2.0.1")
	carrying2 := &carrier{obj: mcsproxy.Carrying(local2, []*discoveryv1.EndpointSlice{remoteA}), local: local2, remote: []*discoveryv1.EndpointSlice{remoteA}}
	remoteAndLocal := mcsproxy.NativeNamesPolicy{Strategy: mcsproxy.RemoteAndLocal}
	localFirst := mcsproxy.NativeNamesPolicy{Strategy: mcsproxy.LocalFirst}
	for _, tc := range []struct {
		name   string
		policy mcsproxy.NativeNamesPolicy
		remote []clusterselection.Source
		st     *nativeState
		// carried is, per local slice, the remote slices it carries;
		// joined the remote slices on their own.
		carried map[string][]string
		joined  []string
	}{
		{name: "off: nothing", remote: sources(remoteA), st: &nativeState{local: []*discoveryv1.EndpointSlice{local1}}},
		{name: "a Service without slices: every remote slice on its own", policy: remoteAndLocal, remote: sources(remoteA, remoteV6),
			joined: []string{"web-a", "web-a6"}},
		{name: "a local slice of the family carries, the other family joins", policy: remoteAndLocal, remote: sources(remoteA, remoteV6),
			st: &nativeState{local: []*discoveryv1.EndpointSlice{local1}}, carried: map[string][]string{"web-1": {"web-a"}}, joined: []string{"web-a6"}},
		{name: "the carrier stays the one that carries it already, as it is", policy: remoteAndLocal, remote: sources(remoteA),
			st:      &nativeState{local: []*discoveryv1.EndpointSlice{local1, local2}, carriers: map[string]*carrier{"web-2": carrying2}},
			carried: map[string][]string{"web-2": {"web-a"}}},
		{name: "LocalFirst with a ready local endpoint: the local ones only", policy: localFirst, remote: sources(remoteA),
			st: &nativeState{local: []*discoveryv1.EndpointSlice{local1}}},
		{name: "LocalFirst without one: the remote ones join", policy: localFirst, remote: sources(remoteA),
			st: &nativeState{local: []*discoveryv1.EndpointSlice{unreadyLocal}}, carried: map[string][]string{"web-1": {"web-a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planNative(key, tc.policy, tc.remote, tc.st, "cluster-b")
			carried := map[string][]string{}
			for name, c := range plan.carriers {
				for _, r := range c.remote {
					carried[name] = append(carried[name], r.Name)
				}
				if c.obj == nil || c.obj.Name != name {
					t.Errorf("carrier %s hands the Provider %v, want the local slice carrying them", name, c.obj)
				}
			}
			joined := slices.Sorted(maps.Keys(plan.joined))
			if len(carried) == 0 {
				carried = nil
			}
			if !maps.EqualFunc(carried, tc.carried, slices.Equal) || !slices.Equal(joined, tc.joined) {
				t.Errorf("plan: carried %v, joined %v; want carried %v, joined %v", carried, joined, tc.carried, tc.joined)
			}
			for name, c := range plan.carriers {
				if tc.st == nil {
					break
				}
				if was := tc.st.carriers[name]; was != nil && c != was {
					t.Errorf("carrier %s made again though it carries the same: the Provider would be handed an update for nothing", name)
				}
			}
			if plan.strategy != tc.policy.Strategy {
				t.Errorf("plan's strategy %q, want %q", plan.strategy, tc.policy.Strategy)
			}
		})
	}
}

package multicluster

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestImportLifecycle(t *testing.T) {
	f := newFixture(t)
	p := f.proxier

	// Slices that arrive before their import wait for it.
	DeliverSlice(p, mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	DeliverSlice(p, mcsSlice("ns", "web-b", "web", "cluster-b", "10.2.0.1"))
	f.expectCalls()

	si := serviceImport("ns", "web", 0, "10.250.0.10")
	p.OnServiceImportUpsert(si)
	// Endpoints before the VIP, so no sync sees the VIP without them.
	f.expectCalls("SliceAdd ns/web-a", "SliceAdd ns/web-b", "ServiceAdd ns/web.clusterset")
	svc := f.provider.services["ns/web.clusterset"]
	if svc == nil || svc.Spec.ClusterIP != "10.250.0.10" {
		t.Fatalf("synthetic Service not programmed with the clusterset IP: %+v", svc)
	}
	if got := programmedFor(f, "ns/web-a"); got != "web.clusterset" {
		t.Errorf("slice belongs to %q, want web.clusterset", got)
	}

	// An update that changes nothing the proxier uses changes nothing.
	same := si.DeepCopy()
	same.ResourceVersion = "2"
	same.Status.Clusters = []mcsv1beta1.ClusterStatus{{Cluster: "cluster-a"}}
	p.OnServiceImportUpsert(same)
	f.expectCalls()

	// A port change is an update of the synthetic Service.
	changed := same.DeepCopy()
	changed.ResourceVersion = "3"
	changed.Spec.Ports[0].Port = 8080
	p.OnServiceImportUpsert(changed)
	f.expectCalls("ServiceUpdate ns/web.clusterset")

	// Slice updates and deletes follow.
	DeliverSlice(p, mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1", "10.1.0.2"))
	f.expectCalls("SliceUpdate ns/web-a")
	WithdrawSlice(p, mcsSlice("ns", "web-b", "web", "cluster-b"))
	f.expectCalls("SliceDelete ns/web-b")

	p.OnServiceImportDelete(changed)
	f.expectCalls("ServiceDelete ns/web.clusterset", "SliceDelete ns/web-a")
	if len(f.provider.services)+len(f.provider.slices) != 0 {
		t.Errorf("objects left in the proxier: %v %v", f.provider.services, f.provider.slices)
	}
	f.expectEvents()
}

// TestImportRecreatedWhileItsSlicesStay: the proxier keeps one entry per
// import name for the import and its slices; an import deleted while its
// slices stay (unexport, then export again before the slices are
// collected) leaves nothing of its own behind: recreated, it is decided and
// reported as a new one, and its slices are programmed again.
func TestImportRecreatedWhileItsSlicesStay(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.MultiClusterSynced()
	DeliverSlice(p, mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	f.expectEvents("EndpointSlice ns/web-a NoServiceImport")
	bad := serviceImport("ns", "web", 0, "10.96.0.1")
	p.OnServiceImportUpsert(bad)
	f.expectCalls()
	f.expectEvents("ServiceImport ns/web IPOutsideClusterSetCIDR")

	p.OnServiceImportDelete(bad)
	f.expectCalls()
	f.events.take()
	again := bad.DeepCopy()
	again.UID, again.ResourceVersion = "uid-web-2", "5"
	p.OnServiceImportUpsert(again)
	f.expectEvents("ServiceImport ns/web IPOutsideClusterSetCIDR")

	good := serviceImport("ns", "web", 0, "10.250.0.10")
	good.ResourceVersion = "6"
	p.OnServiceImportUpsert(good)
	f.expectCalls("SliceAdd ns/web-a", "ServiceAdd ns/web.clusterset")
	p.OnServiceImportDelete(good)
	f.expectCalls("ServiceDelete ns/web.clusterset", "SliceDelete ns/web-a")
	p.OnServiceImportUpsert(good)
	f.expectCalls("SliceAdd ns/web-a", "ServiceAdd ns/web.clusterset")

	// Once the slice and the import are gone, nothing is held for the name.
	WithdrawSlice(p, mcsSlice("ns", "web-a", "web", "cluster-a"))
	p.OnServiceImportDelete(good)
	f.expectCalls("SliceDelete ns/web-a", "ServiceDelete ns/web.clusterset")
	expectNothingHeld(t, p)
}

// expectNothingHeld fails if the proxier still holds an entry for any
// import name, once every import and slice is gone.
func expectNothingHeld(t *testing.T, p *Proxier) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.im.imports) != 0 {
		t.Errorf("state left after every import and slice is gone: %v", p.im.imports)
	}
}

// programmedFor returns the Service the Provider holds slice key for.
func programmedFor(f *fixture, key string) string {
	return f.provider.slices[key].Labels[discoveryv1.LabelServiceName]
}

// TestSliceMovedBetweenImports: an MCS EndpointSlice relabelled to another
// import (kube-proxy's informer delivers it as an update) leaves the old
// import's rules and joins the new one's; deleted, nothing is held.
func TestSliceMovedBetweenImports(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.MultiClusterSynced()
	p.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.10"))
	p.OnServiceImportUpsert(serviceImport("ns", "db", 0, "10.250.0.11"))
	f.expectCalls("ServiceAdd ns/web.clusterset", "ServiceAdd ns/db.clusterset")
	slice := mcsSlice("ns", "shared", "web", "cluster-a", "10.1.0.1")
	p.OnEndpointSliceAdd(slice)
	f.expectCalls("SliceAdd ns/shared")
	if got := programmedFor(f, "ns/shared"); got != "web.clusterset" {
		t.Fatalf("slice programmed for %q, want web.clusterset", got)
	}

	moved := mcsSlice("ns", "shared", "db", "cluster-a", "10.1.0.1")
	p.OnEndpointSliceUpdate(slice, moved)
	f.expectCalls("SliceDelete ns/shared", "SliceAdd ns/shared")
	if got := programmedFor(f, "ns/shared"); got != "db.clusterset" {
		t.Errorf("moved slice programmed for %q, want db.clusterset", got)
	}
	p.mu.Lock()
	if n := len(p.im.imports.slicesOf(types.NamespacedName{Namespace: "ns", Name: "web"})); n != 0 {
		t.Errorf("the old import still holds %d slices", n)
	}
	p.mu.Unlock()

	// Deleting the import it left changes nothing for it.
	p.OnServiceImportDelete(serviceImport("ns", "web", 0, "10.250.0.10"))
	f.expectCalls("ServiceDelete ns/web.clusterset")
	p.OnEndpointSliceDelete(moved)
	f.expectCalls("SliceDelete ns/shared")
	p.OnServiceImportDelete(serviceImport("ns", "db", 0, "10.250.0.11"))
	expectNothingHeld(t, p)
}

func TestHeadlessImportProgramsNothing(t *testing.T) {
	f := newFixture(t)
	si := serviceImport("ns", "db", 0)
	si.Spec.Type = mcsv1beta1.Headless
	f.proxier.OnServiceImportUpsert(si)
	DeliverSlice(f.proxier, mcsSlice("ns", "db-a", "db", "cluster-a", "10.1.0.1"))
	f.proxier.MultiClusterSynced()
	f.expectCalls()
	f.expectEvents()
}

func TestInvalidImportIsReportedOnce(t *testing.T) {
	f := newFixture(t)
	rejected := func(reason mcsproxy.Reason) float64 {
		v, err := testutil.GetCounterMetricValue(rejectionsTotal.WithLabelValues("ServiceImport", string(reason)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := rejected(mcsproxy.ReasonIPOutsideClusterSetCIDR)

	// 10.96.0.1 is where a cluster's kubernetes Service usually lives:
	// an import must not be a way to take it over.
	si := serviceImport("ns", "evil", 0, "10.96.0.1")
	f.proxier.OnServiceImportUpsert(si)
	f.proxier.OnServiceImportUpsert(si.DeepCopy())
	f.expectCalls()
	f.expectEvents("ServiceImport ns/evil IPOutsideClusterSetCIDR")
	if got := rejected(mcsproxy.ReasonIPOutsideClusterSetCIDR) - before; got != 1 {
		t.Errorf("rejection counted %v times, want 1", got)
	}

	// Fixed, it is programmed, and says so.
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "evil", 0, "10.250.0.1"))
	f.expectCalls("ServiceAdd ns/evil.clusterset")
	f.expectEvents("ServiceImport ns/evil Programmed")

	for _, tc := range []struct {
		name   string
		mutate func(*mcsv1beta1.ServiceImport)
		reason string
	}{
		{"no ports", func(si *mcsv1beta1.ServiceImport) { si.Spec.Ports = nil }, "NoPorts"},
		{"invalid ip", func(si *mcsv1beta1.ServiceImport) { si.Spec.IPs = []string{"10.250.0.999"} }, "InvalidIP"},
		{"unknown protocol", func(si *mcsv1beta1.ServiceImport) { si.Spec.Ports[0].Protocol = "ICMP" }, "UnsupportedProtocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			si := serviceImport("ns", "bad", 0, "10.250.0.2")
			tc.mutate(si)
			f.proxier.OnServiceImportUpsert(si)
			f.expectCalls()
			f.expectEvents("ServiceImport ns/bad " + tc.reason)
		})
	}
}

// TestDerivedImportIsLeftToTheServicePath: in derived mode an import's IPs
// are its derived Service's cluster IPs (in the member's Service range,
// outside the clusterset ranges). The derived Service and its slices take
// the Service path; the import is neither programmed nor reported, while
// that Service has its IPs. The annotation excuses nothing else.
func TestDerivedImportIsLeftToTheServicePath(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	derived := localService("ns", "derived-9jaau8dqeh", "10.96.0.40")
	p.OnServiceAdd(derived)
	slice := mcsSlice("ns", "derived-9jaau8dqeh-cluster-a", "web", "cluster-a", "10.1.0.1")
	slice.Labels[discoveryv1.LabelServiceName] = derived.Name
	p.OnEndpointSliceAdd(slice)
	si := serviceImport("ns", "web", 0, "10.96.0.40")
	si.Annotations = map[string]string{mcsproxy.AnnotationDerivedService: derived.Name}
	p.OnServiceImportUpsert(si)
	f.expectCalls("ServiceAdd ns/derived-9jaau8dqeh", "SliceAdd ns/derived-9jaau8dqeh-cluster-a")
	f.expectEvents()
	if got := f.provider.endpointsOf("ns/derived-9jaau8dqeh"); !slices.Equal(got, []string{"10.1.0.1"}) {
		t.Errorf("the derived Service's endpoints: %v", got)
	}

	// Without its derived Service the import is what it is: an import of
	// IPs outside the clusterset ranges. With it back, fine again.
	p.OnServiceDelete(derived)
	f.expectCalls("ServiceDelete ns/derived-9jaau8dqeh")
	f.expectEvents("ServiceImport ns/web IPOutsideClusterSetCIDR")
	p.OnServiceAdd(derived)
	f.expectCalls("ServiceAdd ns/derived-9jaau8dqeh")
	f.expectEvents()

	// The annotation names another Service than the one holding the IP,
	// or the import is not a trusted manager's: reported as ever.
	other := serviceImport("ns", "api", 0, "10.96.0.40")
	other.Annotations = map[string]string{mcsproxy.AnnotationDerivedService: "derived-someoneelse"}
	p.OnServiceImportUpsert(other)
	forged := serviceImport("ns", "forged", 0, "10.96.0.40")
	forged.Annotations = map[string]string{mcsproxy.AnnotationDerivedService: derived.Name}
	forged.Labels = nil
	p.OnServiceImportUpsert(forged)
	f.expectCalls()
	f.expectEvents("ServiceImport ns/api IPOutsideClusterSetCIDR", "ServiceImport ns/forged UntrustedManager")
	// A forged import naming the same Service changes nothing for the
	// real one: it is still decided again when its Service changes.
	p.OnServiceDelete(derived)
	f.expectCalls("ServiceDelete ns/derived-9jaau8dqeh")
	f.expectEvents("ServiceImport ns/web IPOutsideClusterSetCIDR")
}

// A member switched from derived to native mode: the controller writes the
// MCS slices, then gives the still-derived import its clusterset IPs in an
// annotation, which the proxy programs beside the derived Service; only
// then does the import name them (and DNS answer them), which changes
// nothing the proxy holds: no client is sent to an IP not yet served.
func TestDerivedImportSwitchingToNativeIsProgrammedFirst(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	derived := localService("ns", "derived-9jaau8dqeh", "10.96.0.40")
	p.OnServiceAdd(derived)
	si := serviceImport("ns", "web", 0, "10.96.0.40")
	si.ResourceVersion = "1"
	si.Annotations = map[string]string{mcsproxy.AnnotationDerivedService: derived.Name}
	p.OnServiceImportUpsert(si)
	p.OnEndpointSliceAdd(mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	f.expectCalls("ServiceAdd ns/derived-9jaau8dqeh")
	f.expectEvents()

	switching := si.DeepCopy()
	switching.ResourceVersion = "2"
	switching.Annotations[mcsproxy.AnnotationClusterSetIPs] = "10.250.0.10"
	p.OnServiceImportUpsert(switching)
	f.expectCalls("SliceAdd ns/web-a", "ServiceAdd ns/web.clusterset")
	f.expectEvents()
	if svc := f.provider.services["ns/web.clusterset"]; svc == nil || svc.Spec.ClusterIP != "10.250.0.10" {
		t.Fatalf("the clusterset IP is not programmed while the import is derived: %v", svc)
	}

	native := serviceImport("ns", "web", 0, "10.250.0.10")
	native.ResourceVersion = "3"
	p.OnServiceImportUpsert(native)
	f.expectCalls()
	f.expectEvents()

	// The annotation means nothing on an import that names no derived
	// Service: its ips are what it serves.
	other := serviceImport("ns", "api", 0, "10.250.0.20")
	other.Annotations = map[string]string{mcsproxy.AnnotationClusterSetIPs: "10.250.0.21"}
	p.OnServiceImportUpsert(other)
	f.expectCalls("ServiceAdd ns/api.clusterset")
	if svc := f.provider.services["ns/api.clusterset"]; svc == nil || svc.Spec.ClusterIP != "10.250.0.20" {
		t.Errorf("a native import was programmed at its annotation's IP: %v", svc)
	}
}

func TestUntrustedAndInvalidSlices(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.10"))
	f.expectCalls("ServiceAdd ns/web.clusterset")

	untrusted := mcsSlice("ns", "web-x", "web", "cluster-x", "10.9.0.1")
	untrusted.Labels[discoveryv1.LabelManagedBy] = "someone"
	DeliverSlice(p, untrusted)
	DeliverSlice(p, untrusted.DeepCopy())
	invalid := mcsSlice("ns", "web-y", "web", "cluster-y", "not-an-ip")
	DeliverSlice(p, invalid)
	f.expectCalls()
	f.expectEvents("ServiceImport ns/web UntrustedManager", "ServiceImport ns/web InvalidEndpoint")

	// A slice that becomes valid is programmed; one that becomes invalid
	// is withdrawn.
	DeliverSlice(p, mcsSlice("ns", "web-y", "web", "cluster-y", "10.9.0.2"))
	f.expectCalls("SliceAdd ns/web-y")
	DeliverSlice(p, invalid)
	f.expectCalls("SliceDelete ns/web-y")
}

func TestSlicesWithoutImport(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	orphan := mcsSlice("ns", "ghost-a", "ghost", "cluster-a", "10.1.0.1")
	owned := mcsSlice("ns", "gone-a", "gone", "cluster-a", "10.1.0.2")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "multicluster.x-k8s.io/v1beta1", Kind: "ServiceImport", Name: "gone", UID: "x"}}
	DeliverSlice(p, orphan)
	DeliverSlice(p, owned)
	// Nothing is reported before the imports are known to be complete.
	f.expectEvents()
	p.MultiClusterSynced()
	f.expectCalls()
	// A slice owned by an import is being garbage-collected: no report.
	f.expectEvents("EndpointSlice ns/ghost-a NoServiceImport")
}

func TestCoreInformerSlices(t *testing.T) {
	f := newFixture(t)
	local := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}
	f.proxier.OnEndpointSliceAdd(local)
	f.proxier.OnEndpointSliceUpdate(local, local)
	f.proxier.OnEndpointSliceDelete(local)
	f.expectCalls("SliceAdd ns/web-abc", "SliceUpdate ns/web-abc", "SliceDelete ns/web-abc")

	// MCS slices reach the core informer too; they must not be passed on
	// as they are (upstream would log and drop them): the MCS watcher
	// delivers them translated.
	mcs := mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1")
	f.proxier.OnEndpointSliceAdd(mcs)
	f.proxier.OnEndpointSliceUpdate(mcs, mcs)
	f.proxier.OnEndpointSliceDelete(mcs)
	f.expectCalls()
}

func TestFirstSyncWaitsForImports(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	f.expectCalls()
	p.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.10"))
	p.MultiClusterSynced()
	f.expectCalls("ServiceAdd ns/web.clusterset", "ServiceSynced", "SlicesSynced")
	// Later syncs (the CRD coming back) do not repeat them.
	p.MultiClusterSynced()
	p.OnServiceSynced()
	f.expectCalls()
}

func TestResetRemovesEveryImport(t *testing.T) {
	f := newFixture(t)
	p := f.proxier
	p.OnServiceAdd(localService("ns", "local", "10.96.0.5"))
	p.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.10"))
	p.OnServiceImportUpsert(serviceImport("ns", "api", 0, "10.250.0.11"))
	DeliverSlice(p, mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	DeliverSlice(p, mcsSlice("ns", "api-a", "api", "cluster-a", "10.1.0.2"))
	f.provider.takeCalls()

	p.Reset()
	calls := f.provider.takeCalls()
	if len(calls) != 4 {
		t.Errorf("want 2 Service and 2 slice deletions, got %v", calls)
	}
	for _, c := range calls {
		if !strings.HasSuffix(c, ".clusterset") && !strings.HasPrefix(c, "SliceDelete") {
			t.Errorf("unexpected call on reset: %s", c)
		}
	}
	if diff := cmp.Diff([]string{"ns/local"}, keys(f.provider.services)); diff != "" || len(f.provider.slices) != 0 {
		t.Errorf("after reset the proxier holds %v and %v; only the local Service must remain", f.provider.services, f.provider.slices)
	}

	// The API coming back replays the imports; their slices, which
	// kube-proxy's EndpointSlice informer does not deliver again, were
	// kept and are programmed with them, endpoints first.
	p.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.10"))
	f.expectCalls("SliceAdd ns/web-a", "ServiceAdd ns/web.clusterset")
	p.OnServiceImportUpsert(serviceImport("ns", "api", 0, "10.250.0.11"))
	f.expectCalls("SliceAdd ns/api-a", "ServiceAdd ns/api.clusterset")
}

func keys[T any](m map[string]T) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A full re-decision of what is right hands the Provider nothing; of a
// decision that went wrong (here: the Provider's import and a slice
// withdrawn behind the Proxier's back, as a lost event would leave it), it
// puts it right.
func TestRedecide(t *testing.T) {
	f := newSyncedFixture(t)
	p := f.proxier
	p.SetLocalClusterID("cluster-local")
	p.OnServiceAdd(accepting("ns", "web"))
	p.OnEndpointSliceAdd(localSlice("ns", "web-own", "web", false, "10.3.0.1"))
	si := serviceImport("ns", "web", 0, "10.250.0.10")
	si.Annotations = map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)}
	p.OnServiceImportUpsert(si)
	DeliverSlice(p, mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1"))
	f.provider.takeCalls()
	f.events.take()

	p.Redecide()
	f.expectCalls()
	f.expectEvents()

	p.mu.Lock()
	st := p.im.imports[types.NamespacedName{Namespace: "ns", Name: "web"}]
	st.programmedFrom = nil
	st.slices[0].programmedFrom = nil
	p.mu.Unlock()
	f.provider.OnServiceDelete(f.provider.services["ns/web.clusterset"])
	f.provider.OnEndpointSliceDelete(f.provider.slices["ns/web-a"])
	f.provider.takeCalls()

	p.Redecide()
	f.expectCalls("SliceAdd ns/web-a", "ServiceAdd ns/web.clusterset")
	if got := f.provider.endpointsOf("ns/web.clusterset"); !slices.Equal(got, []string{"10.1.0.1"}) {
		t.Errorf("after a re-decision the import has endpoints %v", got)
	}
	if got := f.provider.endpointsOf("ns/web"); !slices.Equal(got, []string{"10.1.0.1", "10.3.0.1"}) {
		t.Errorf("after a re-decision the native name has endpoints %v", got)
	}
}

// TestServiceCIDRsCarryTheClusterSetRanges: the proxier is told the
// clusterset ranges as Service ranges from the start and beside every list
// kube-proxy's ServiceCIDR informer hands over, so that an address of
// them no import holds is dropped as an unallocated ClusterIP is (see
// TestDataplaneUnprogrammedClusterSetIPsDropped for the traffic).
func TestServiceCIDRsCarryTheClusterSetRanges(t *testing.T) {
	f := newFixture(t)
	got := func() []string {
		f.provider.mu.Lock()
		defer f.provider.mu.Unlock()
		return f.provider.serviceCIDRs
	}
	ranges := []string{"10.250.0.0/16"}
	if !slices.Equal(got(), ranges) {
		t.Errorf("before any ServiceCIDR: %v, want %v", got(), ranges)
	}
	f.proxier.OnServiceCIDRsChanged([]string{"10.96.0.0/16"})
	if want := append([]string{"10.96.0.0/16"}, ranges...); !slices.Equal(got(), want) {
		t.Errorf("after the informer's list: %v, want %v", got(), want)
	}
}

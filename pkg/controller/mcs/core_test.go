package mcs

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// The controller's core (merge, member writes, retention, derived mode)
// against fake clientsets: each sync is called directly, and what it
// wrote is read back from the member's API.

// TestMain turns client-go's streaming lists off: the mcs-api fake
// clientset cannot serve them (it does not say so, as client-go's own
// fakes do), and its informers would wait for a bookmark forever.
func TestMain(m *testing.M) {
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

type fakeMember struct {
	*member
	kube *kubefake.Clientset
	mcs  *mcsfake.Clientset
}

// newFakeClusterset builds a controller over members ids, each a fake
// clientset holding namespace demo whose apiserver gives created
// ClusterIP Services an IP. started says which members' caches run
// (default all): a member not started is one whose state is unknown.
func newFakeClusterset(t *testing.T, cfg Config, ids []string, started func(id string) bool, objects map[string][]runtime.Object) (*Controller, map[string]*fakeMember) {
	t.Helper()
	if cfg.ManagedBy == "" {
		cfg.ManagedBy = mcsproxy.DefaultManagedBy
	}
	if cfg.ClusterSetIPRanges == nil {
		cfg.ClusterSetIPRanges = []netip.Prefix{netip.MustParsePrefix("10.250.0.0/16")}
	}
	if cfg.SourceManagers == nil {
		cfg.SourceManagers = []string{"endpointslice-controller.k8s.io"}
	}
	if cfg.EndpointTTL == 0 {
		cfg.EndpointTTL = time.Minute
	}
	fakes := map[string]*fakeMember{}
	var members []*member
	for i, id := range ids {
		kube := kubefake.NewSimpleClientset(append([]runtime.Object{&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}}, objects[id]...)...)
		var next atomic.Int32
		kube.PrependReactor("create", "services", func(a clienttesting.Action) (bool, runtime.Object, error) {
			svc := a.(clienttesting.CreateAction).GetObject().(*v1.Service)
			if svc.Spec.ClusterIP == "" {
				ip := fmt.Sprintf("10.%d.0.%d", 96+i, next.Add(1))
				svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
			}
			return false, nil, nil
		})
		mcs := mcsfake.NewSimpleClientset(objects[id+"/mcs"]...)
		m, err := newMemberWith(topology.Member{ClusterID: id, Context: id}, kube, mcs, cfg.ManagedBy, events.NewFakeRecorder(1000))
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
		fakes[id] = &fakeMember{member: m, kube: kube, mcs: mcs}
	}
	c := newController(cfg, nil, members)
	for _, m := range members {
		c.leases.renewed[m.id] = time.Now()
		if started != nil && !started(m.id) {
			continue
		}
		m.start(t.Context().Done())
		if !cache.WaitForCacheSync(t.Context().Done(), m.synced...) {
			t.Fatalf("caches of %s never synced", m.id)
		}
	}
	return c, fakes
}

// prependReactor adds a reactor to a fake clientset whose informers already
// run: the fake reads its chain under its lock on every call and
// PrependReactor takes none.
func prependReactor(f *clienttesting.Fake, verb, resource string, react clienttesting.ReactionFunc) {
	f.Lock()
	defer f.Unlock()
	f.PrependReactor(verb, resource, react)
}

// exportWeb gives member m an exported Service demo/web (port http 80,
// a selector) with one EndpointSlice of addrs, as the EndpointSlice
// controller writes: owned by the Service, an endpoint per Pod.
func exportWeb(t *testing.T, m *fakeMember, addrs ...string) {
	t.Helper()
	ctx := context.Background()
	svc, err := m.kube.CoreV1().Services("demo").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", UID: "uid-web-" + types.UID(m.id)},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abcde", Namespace: "demo", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, v1.SchemeGroupVersion.WithKind("Service"))}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for i, a := range addrs {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr.To("node-1"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: fmt.Sprintf("web-%d", i)}})
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
		return err == nil && len(indexed[*discoveryv1.EndpointSlice](m.localSlices, byService, "demo/web")) == 1
	})
}

// waitCache waits for a cache to show what was written.
func waitCache(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sync merges key and writes it into every member, twice: the second
// pass sees its own writes in the caches and must change nothing.
func syncAll(t *testing.T, c *Controller, key string) {
	t.Helper()
	ctx := context.Background()
	if err := c.syncClusterset(ctx, key); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.members.all() {
		if !m.hasSynced() {
			continue
		}
		if err := c.syncMember(ctx, m, key); err != nil {
			t.Fatalf("writing %s into %s: %v", key, m.id, err)
		}
	}
}

// expectResyncWritesNothing waits until m's caches show its import of
// demo/web, with status, and its slices slices of it, then syncs m again:
// nothing may be written.
func expectResyncWritesNothing(t *testing.T, c *Controller, m *fakeMember, slices int) {
	t.Helper()
	waitCache(t, "the writes in "+m.id+"'s caches", func() bool {
		si, err := m.imports.ServiceImports("demo").Get("web")
		return err == nil && len(si.Status.Conditions) > 0 && len(writtenIn(m.member, "demo", "web")) == slices
	})
	if wrote := writesOf(t, m, func() {
		if err := c.syncMember(context.Background(), m.member, "demo/web"); err != nil {
			t.Fatal(err)
		}
	}); len(wrote) > 0 {
		t.Errorf("a sync with nothing to change wrote %d times: %v", len(wrote), wrote)
	}
}

// writesOf returns the requests other than reads that m's API got while
// do ran.
func writesOf(t *testing.T, m *fakeMember, do func()) []string {
	t.Helper()
	kube, mcs := len(m.kube.Actions()), len(m.mcs.Actions())
	do()
	var out []string
	for _, a := range append(m.kube.Actions()[kube:], m.mcs.Actions()[mcs:]...) {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			out = append(out, v+" "+a.GetResource().Resource+" "+a.GetSubresource())
		}
	}
	return out
}

func importIn(t *testing.T, m *fakeMember) *mcsv1beta1.ServiceImport {
	t.Helper()
	si, err := m.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(context.Background(), "web", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	return si
}

// slicesIn returns m's slices of import demo/web by whether they name a
// local Service (derived) or not (MCS).
func slicesIn(t *testing.T, m *fakeMember) (mcs, derived []discoveryv1.EndpointSlice) {
	t.Helper()
	list, err := m.kube.DiscoveryV1().EndpointSlices("demo").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Labels[mcsv1beta1.LabelServiceName] != "web" {
			continue
		}
		if mcsproxy.IsMultiClusterEndpointSlice(&s) {
			mcs = append(mcs, s)
		} else {
			derived = append(derived, s)
		}
	}
	return mcs, derived
}

func TestCoreExportIsImportedEverywhere(t *testing.T) {
	c, ms := newFakeClusterset(t, Config{}, []string{"cluster-a", "cluster-b"}, nil, nil)
	a, b := ms["cluster-a"], ms["cluster-b"]
	exportWeb(t, a, "10.1.0.1", "10.1.0.2")
	syncAll(t, c, "demo/web")

	var vip string
	for _, m := range []*fakeMember{a, b} {
		si := importIn(t, m)
		if si == nil {
			t.Fatalf("no import in %s", m.id)
		}
		if len(si.Spec.IPs) != 1 || !netip.MustParsePrefix("10.250.0.0/16").Contains(netip.MustParseAddr(si.Spec.IPs[0])) || !c.wrote(si) {
			t.Errorf("%s's import: ips %v labels %v", m.id, si.Spec.IPs, si.Labels)
		}
		if vip != "" && si.Spec.IPs[0] != vip {
			t.Errorf("clusterset IP %s in %s, %s elsewhere", si.Spec.IPs[0], m.id, vip)
		}
		vip = si.Spec.IPs[0]
		if cond := meta.FindStatusCondition(si.Status.Conditions, "Ready"); cond == nil || cond.Status != metav1.ConditionTrue {
			t.Errorf("%s's import is not Ready: %v", m.id, si.Status.Conditions)
		}
		mcs, _ := slicesIn(t, m)
		if len(mcs) != 1 || len(mcs[0].Endpoints) != 2 || mcs[0].Labels[mcsv1beta1.LabelSourceCluster] != "cluster-a" ||
			len(mcs[0].OwnerReferences) != 1 || mcs[0].OwnerReferences[0].Name != "web" {
			t.Fatalf("%s's imported slices: %+v", m.id, mcs)
		}
		// Node names stay in the source cluster only.
		if got := ptr.Deref(mcs[0].Endpoints[0].NodeName, ""); (m == a) != (got == "node-1") {
			t.Errorf("%s: node name %q", m.id, got)
		}
	}
	se, _ := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Get(context.Background(), "web", metav1.GetOptions{})
	if cond := meta.FindStatusCondition(se.Status.Conditions, "Ready"); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("a's export: %v", se.Status.Conditions)
	}

	// Written again with the caches showing the writes: nothing changes.
	expectResyncWritesNothing(t, c, b, 1)
}

func TestCoreUnexportRemovesAndForgets(t *testing.T) {
	c, ms := newFakeClusterset(t, Config{}, []string{"cluster-a", "cluster-b"}, nil, nil)
	a, b := ms["cluster-a"], ms["cluster-b"]
	exportWeb(t, a, "10.1.0.1")
	syncAll(t, c, "demo/web")
	waitCache(t, "b's import in its cache", func() bool {
		_, err := b.imports.ServiceImports("demo").Get("web")
		return err == nil && len(writtenIn(b.member, "demo", "web")) == 1
	})
	if err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "the export gone from a's cache", func() bool {
		_, err := a.exports.ServiceExports("demo").Get("web")
		return apierrors.IsNotFound(err)
	})
	syncAll(t, c, "demo/web")
	for _, m := range []*fakeMember{a, b} {
		mcs, _ := slicesIn(t, m)
		if si := importIn(t, m); si != nil || len(mcs) > 0 {
			t.Errorf("%s still holds the import (%v) or %d slices", m.id, si != nil, len(mcs))
		}
	}
	// Once every member's cache shows nothing of it, the name is forgotten.
	for _, m := range []*fakeMember{a, b} {
		waitCache(t, "nothing of demo/web in "+m.id+"'s caches", func() bool { return c.writesTo(m.member).holdsNothing("demo", "web") })
	}
	syncAll(t, c, "demo/web")
	if d := c.getDesired("demo/web"); d != nil {
		t.Errorf("an unexported name is still remembered: %+v", d)
	}
}

// A source whose state is unknown (its caches not synced) but whose lease
// is alive keeps its endpoints imported; once its lease expires, they go.
func TestCoreRetainsWhileASourceIsUnknown(t *testing.T) {
	written := func(id string) []runtime.Object {
		return []runtime.Object{&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: export.SliceName("web", "cluster-a", "web-abcde"), Namespace: "demo", Labels: map[string]string{
				mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: "cluster-a", discoveryv1.LabelManagedBy: mcsproxy.DefaultManagedBy}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
		}}
	}
	imported := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Labels: map[string]string{managedLabel: mcsproxy.DefaultManagedBy}},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.9"}, Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80}}},
		Status:     mcsv1beta1.ServiceImportStatus{Clusters: []mcsv1beta1.ClusterStatus{{Cluster: "cluster-a"}}},
	}
	c, ms := newFakeClusterset(t, Config{}, []string{"cluster-a", "cluster-b"},
		func(id string) bool { return id != "cluster-a" },
		map[string][]runtime.Object{"cluster-b": written("cluster-b"), "cluster-b/mcs": {imported}})
	b := ms["cluster-b"]
	syncAll(t, c, "demo/web")
	if d := c.getDesired("demo/web"); d == nil || !d.Retain {
		t.Fatalf("desired state %+v, want retained", d)
	}
	if mcs, _ := slicesIn(t, b); importIn(t, b) == nil || len(mcs) != 1 {
		t.Fatalf("b lost the import or a's endpoints while a is unknown")
	}

	c.leases.mu.Lock()
	c.leases.renewed["cluster-a"] = time.Now().Add(-2 * c.cfg.EndpointTTL)
	c.leases.mu.Unlock()
	syncAll(t, c, "demo/web")
	if mcs, _ := slicesIn(t, b); importIn(t, b) != nil || len(mcs) != 0 {
		t.Errorf("b keeps the import or a's endpoints after a's lease expired")
	}
}

// Derived mode against fakes: b gets the derived Service (its apiserver
// picks the IP), the import carries it and names it, and no MCS slice.
func TestCoreDerivedMember(t *testing.T) {
	c, ms := newFakeClusterset(t, Config{DerivedMembers: map[string]bool{"cluster-b": true}}, []string{"cluster-a", "cluster-b"}, nil, nil)
	a, b := ms["cluster-a"], ms["cluster-b"]
	exportWeb(t, a, "10.1.0.1")
	syncAll(t, c, "demo/web")
	name := export.DerivedName("demo", "web")
	svc, err := b.kube.CoreV1().Services("demo").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	si := importIn(t, b)
	if si == nil || si.Annotations[export.AnnotationDerivedService] != name || !slices.Equal(si.Spec.IPs, svc.Spec.ClusterIPs) || len(si.Spec.IPs) != 1 {
		t.Fatalf("b's import %+v, want it to name %s and carry %v", si, name, svc.Spec.ClusterIPs)
	}
	if svc.Spec.Selector != nil || len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].Kind != "ServiceImport" {
		t.Errorf("derived Service: %+v", svc)
	}
	mcs, derived := slicesIn(t, b)
	if len(mcs) != 0 || len(derived) != 1 || derived[0].Name != export.DerivedSliceName(name, "cluster-a", "") {
		t.Errorf("b's slices: %d MCS, derived %v", len(mcs), derived)
	}
	// a is native: its import carries the clusterset IP.
	if ai := importIn(t, a); ai == nil || ai.Annotations[export.AnnotationDerivedService] != "" || ai.Spec.IPs[0] == si.Spec.IPs[0] {
		t.Errorf("a's import: %+v", ai)
	}
}

// A member that leaves: its endpoints leave the others at once (no TTL),
// its source Lease goes everywhere, and what the controller wrote into it
// is removed, its export saying it is not served.
func TestCoreLeaveWithdrawsAndCleans(t *testing.T) {
	c, ms := newFakeClusterset(t, Config{LeaseNamespace: "kube-system"}, []string{"cluster-a", "cluster-b"}, nil, nil)
	a, b := ms["cluster-a"], ms["cluster-b"]
	exportWeb(t, a, "10.1.0.1")
	exportWeb(t, b, "10.2.0.1")
	syncAll(t, c, "demo/web")
	for _, m := range []*fakeMember{a, b} {
		if _, err := m.kube.CoordinationV1().Leases("kube-system").Create(context.Background(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: sourceLeasePrefix + "cluster-b", Labels: map[string]string{mcsv1beta1.LabelSourceCluster: "cluster-b"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if mcs, _ := slicesIn(t, a); len(mcs) != 2 {
		t.Fatalf("a holds %d imported slices before b leaves, want both clusters'", len(mcs))
	}
	// What a holds is known to its caches, as it would be by then.
	waitCache(t, "both clusters' slices in a's cache", func() bool { return len(writtenIn(a.member, "demo", "web")) == 2 })

	if err := c.Leave(context.Background(), "cluster-b", ""); err != nil {
		t.Fatal(err)
	}
	if c.members.get("cluster-b") != nil || c.leases.alive("cluster-b") {
		t.Fatal("cluster-b is still a member, or its endpoints still count as alive")
	}
	// What was written into b is gone; its export says so.
	if mcs, _ := slicesIn(t, b); importIn(t, b) != nil || len(mcs) != 0 {
		t.Errorf("b still holds the import (%v) or %d slices", importIn(t, b) != nil, len(mcs))
	}
	se, _ := b.mcs.MulticlusterV1beta1().ServiceExports("demo").Get(context.Background(), "web", metav1.GetOptions{})
	if cond := meta.FindStatusCondition(se.Status.Conditions, "Ready"); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("b's export after leaving: %v", se.Status.Conditions)
	}
	for _, m := range []*fakeMember{a, b} {
		if _, err := m.kube.CoordinationV1().Leases("kube-system").Get(context.Background(), sourceLeasePrefix+"cluster-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s still holds cluster-b's source Lease (%v)", m.id, err)
		}
	}
	// a keeps its own endpoints and loses b's with the next merge.
	syncAll(t, c, "demo/web")
	mcs, _ := slicesIn(t, a)
	if len(mcs) != 1 || mcs[0].Labels[mcsv1beta1.LabelSourceCluster] != "cluster-a" {
		t.Errorf("a's imported slices after b left: %d", len(mcs))
	}
	if si := importIn(t, a); si == nil || len(si.Status.Clusters) != 1 || si.Status.Clusters[0].Cluster != "cluster-a" {
		t.Errorf("a's import after b left: %+v", si)
	}
}

// TestCoreWaitsForItsOwnWriteInTheCache: a member's cache can still show a
// slice as it was before the controller's last write of it (the watch has
// not delivered that write yet) when the import is synced again, as when
// a member joined again is listed while its names are written. Writing
// from that copy sends its old resourceVersion: refused as a conflict by
// a real apiserver, and retried; a slice just created and not cached yet
// would be created again. The sync waits for the write's event instead,
// and for no longer than pull.CacheWait.
func TestCoreWaitsForItsOwnWriteInTheCache(t *testing.T) {
	c, b, before, after := moveWrittenIntoB(t, false)
	ctx := context.Background()
	// The state while the write's event is on its way: the write
	// recorded, the cache still showing the slice as it was.
	b.state.wroteSlice("demo/"+after.name, after.generation)
	// b's cache as it was before that write is not written from.
	resync := func() []string {
		return writesOf(t, b, func() {
			if err := c.syncMember(ctx, b.member, "demo/web"); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := b.importedSlices.Update(before); err != nil {
		t.Fatal(err)
	}
	if wrote := resync(); len(wrote) != 0 {
		t.Errorf("a sync from a cache behind the controller's own write wrote %v", wrote)
	}
	// Once the cache shows the write, there is nothing to write.
	if err := b.importedSlices.Update(after); err != nil {
		t.Fatal(err)
	}
	if wrote := resync(); len(wrote) != 0 {
		t.Errorf("a sync from a cache showing the write wrote %v", wrote)
	}
	// A cache that does not catch up within pull.CacheWait is written from.
	if err := b.importedSlices.Update(before); err != nil {
		t.Fatal(err)
	}
	b.state.wroteSlices.Store("demo/"+after.name, sliceWrite{generation: 2, at: time.Now().Add(-pull.CacheWait)})
	if wrote := resync(); len(wrote) != 1 {
		t.Errorf("a sync from a cache behind for longer than %v wrote %v, want the slice written again", pull.CacheWait, wrote)
	}
	// A slice the controller created that the cache does not show yet is
	// waited for too, not created again (a create refused as existing,
	// then a read: pull mode's agent syncs a name again as each of its
	// planned slices arrives).
	if err := b.importedSlices.Delete(before); err != nil {
		t.Fatal(err)
	}
	b.state.wroteSlice("demo/"+after.name, after.generation)
	if wrote := resync(); len(wrote) != 0 {
		t.Errorf("a sync from a cache that does not show the controller's own create yet wrote %v", wrote)
	}
}

// TestCoreForgetsWritesTheCacheShows: nothing is remembered of a write
// once the member's cache shows it, whether its event came before the
// write returned or after: a record per slice of every member would
// otherwise stay.
func TestCoreForgetsWritesTheCacheShows(t *testing.T) {
	_, b, _, _ := moveWrittenIntoB(t, true)
	waitCache(t, "the write forgotten once cluster-b's cache shows it", func() bool {
		n := 0
		b.state.wroteSlices.Range(func(any, any) bool { n++; return true })
		return n == 0
	})
}

// moveWrittenIntoB exports demo/web from cluster-a, writes it into
// cluster-b, then moves a's endpoint and writes that: it returns b's
// cached slice before and after the move (generations 1 and 2), once b's
// cache shows the move. With handlers, b's events reach the controller as
// they do when it runs (nothing works the queues: the test syncs).
func moveWrittenIntoB(t *testing.T, handlers bool) (c *Controller, b *fakeMember, before, after *writtenSlice) {
	t.Helper()
	c, ms := newFakeClusterset(t, Config{}, []string{"cluster-a", "cluster-b"}, nil, nil)
	a, b := ms["cluster-a"], ms["cluster-b"]
	if handlers {
		c.addHandlers(b.member)
	}
	// The apiserver counts an EndpointSlice's content changes in its
	// generation.
	prependReactor(&b.kube.Fake, "*", "endpointslices", func(act clienttesting.Action) (bool, runtime.Object, error) {
		write, ok := act.(clienttesting.CreateAction) // an update is one too
		if !ok {
			return false, nil, nil
		}
		s, ok := write.GetObject().(*discoveryv1.EndpointSlice)
		switch {
		case !ok:
		case act.GetVerb() == "create":
			s.Generation = 1
		case act.GetVerb() == "update":
			if old, err := b.kube.Tracker().Get(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), s.Namespace, s.Name); err == nil {
				s.Generation = old.(*discoveryv1.EndpointSlice).Generation + 1
			}
		}
		return false, nil, nil
	})
	exportWeb(t, a, "10.1.0.1")
	syncAll(t, c, "demo/web")
	expectResyncWritesNothing(t, c, b, 1)
	before = writtenIn(b.member, "demo", "web")[0]

	// a's endpoint moves; b is written the change (generation 2).
	ctx := context.Background()
	local, err := a.kube.DiscoveryV1().EndpointSlices("demo").Get(ctx, "web-abcde", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	local.Endpoints[0].Addresses = []string{"10.1.0.2"}
	if _, err := a.kube.DiscoveryV1().EndpointSlices("demo").Update(ctx, local, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "the move in cluster-a's caches", func() bool {
		s := indexed[*discoveryv1.EndpointSlice](a.localSlices, byService, "demo/web")
		return len(s) == 1 && s[0].Endpoints[0].Addresses[0] == "10.1.0.2"
	})
	if wrote := writesOf(t, b, func() { syncAll(t, c, "demo/web") }); len(wrote) != 1 {
		t.Fatalf("the move was written into cluster-b as %v, want one update of its slice", wrote)
	}
	waitCache(t, "the write in cluster-b's caches", func() bool {
		s := writtenIn(b.member, "demo", "web")
		return len(s) == 1 && s[0].generation == 2
	})
	after = writtenIn(b.member, "demo", "web")[0]
	return c, b, before, after
}

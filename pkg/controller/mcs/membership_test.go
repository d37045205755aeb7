package mcs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// A cluster joining at run time whose Service range holds clusterset IPs
// is refused, as it is at start-up: every import given one of those IPs
// would lose it to a Service there, or take it. Nothing is written into
// it, and the members already there keep being served.
func TestCoreJoinRefusesOverlappingServiceRanges(t *testing.T) {
	c, ms := newFakeClusterset(t, Config{}, []string{"cluster-a"}, nil, nil)
	a := ms["cluster-a"]
	exportWeb(t, a, "10.1.0.1")
	syncAll(t, c, "demo/web")
	c.members.serveFrom(t.Context())

	kube := kubefake.NewSimpleClientset(&networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.250.0.0/24"}},
	})
	mcs := mcsfake.NewSimpleClientset()
	d, err := newMemberWith(topology.Member{ClusterID: "cluster-d", Context: "cluster-d"}, kube, mcs, c.cfg.ManagedBy, events.NewFakeRecorder(10))
	if err != nil {
		t.Fatal(err)
	}
	err = c.join(context.Background(), d)
	if err == nil || !strings.Contains(err.Error(), "10.250.0.0/24") || !strings.Contains(err.Error(), "cluster-d") {
		t.Fatalf("join of a cluster whose Service range is in the clusterset range: %v, want a refusal naming both", err)
	}
	if c.members.get("cluster-d") != nil {
		t.Fatal("cluster-d is a member")
	}
	for _, a := range append(kube.Actions(), mcs.Actions()...) {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			t.Errorf("the refused member got a write: %s %s", v, a.GetResource().Resource)
		}
	}
	// The others are still served: a change in a is written.
	if err := a.kube.DiscoveryV1().EndpointSlices("demo").Delete(context.Background(), "web-abcde", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "a's slice gone from its cache", func() bool {
		return len(indexed[*discoveryv1.EndpointSlice](a.localSlices, byService, "demo/web")) == 0
	})
	syncAll(t, c, "demo/web")
	if mcs, _ := slicesIn(t, a); len(mcs) != 0 {
		t.Errorf("a still holds %d imported slices of an export with no endpoints", len(mcs))
	}
}

// What the controller remembers of a member goes when it leaves: its
// event broadcaster is shut down, and the reports it was told once are
// told again when it joins again, as to any cluster joining. A member
// replaced by new credentials keeps what it was told.
func TestCoreLeaveReleasesTheMembersState(t *testing.T) {
	c, ms := newFakeClusterset(t, Config{LeaseNamespace: "kube-system"}, []string{"cluster-a", "cluster-b"}, nil, nil)
	c.members.serveFrom(t.Context())
	b := ms["cluster-b"]
	// A slice no trusted manager wrote: reported once, on b's export.
	exportSource(t, b, source{selector: true, manager: "someone-else", kind: "Service", owner: "web", targets: true}, "10.2.0.1")
	stopped := 0
	b.stopEvents = func() { stopped++ }
	unmirrored := func(m *member) int {
		n := 0
		for _, e := range recordedEvents(&fakeMember{member: m}) {
			if strings.Contains(e, "EndpointSliceNotMirrored") {
				n++
			}
		}
		return n
	}
	syncAll(t, c, "demo/web")
	syncAll(t, c, "demo/web")
	if n := unmirrored(b.member); n != 1 {
		t.Fatalf("cluster-b got %d EndpointSliceNotMirrored events over two syncs, want 1", n)
	}

	// New credentials for the same cluster: nothing is told again.
	same, err := newMemberWith(topology.Member{ClusterID: "cluster-b", Context: "cluster-b"}, probed(t, b.kube), b.mcs, c.cfg.ManagedBy, events.NewFakeRecorder(10))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.join(t.Context(), same); err != nil {
		t.Fatal(err)
	}
	if stopped != 1 {
		t.Fatalf("the replaced member's event broadcaster was shut down %d times, want 1", stopped)
	}
	syncAll(t, c, "demo/web")
	if n := unmirrored(same); n != 0 {
		t.Errorf("the same cluster under new credentials was told again (%d events)", n)
	}

	if err := c.Leave(t.Context(), "cluster-b", "its Secret was deleted"); err != nil {
		t.Fatal(err)
	}
	again, err := newMemberWith(topology.Member{ClusterID: "cluster-b", Context: "cluster-b"}, probed(t, b.kube), b.mcs, c.cfg.ManagedBy, events.NewFakeRecorder(10))
	if err != nil {
		t.Fatal(err)
	}
	againStopped := 0
	again.stopEvents = func() { againStopped++ }
	if err := c.join(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	syncAll(t, c, "demo/web")
	if n := unmirrored(again); n != 1 {
		t.Errorf("cluster-b joining again got %d EndpointSliceNotMirrored events, want 1: what it was told before outlived its membership", n)
	}
	if err := c.Leave(t.Context(), "cluster-b", "its Secret was deleted"); err != nil {
		t.Fatal(err)
	}
	if againStopped != 1 {
		t.Errorf("the event broadcaster of a member that left was shut down %d times, want 1", againStopped)
	}
}

// A member built on real clients has its broadcaster shut down by stop:
// events recorded after it are dropped, not sent.
func TestMemberStopShutsDownItsBroadcaster(t *testing.T) {
	var shut bool
	m, err := newMember(topology.Member{ClusterID: "cluster-x", Context: "cluster-x", Config: &rest.Config{Host: "https://127.0.0.1:1"}}, mcsproxy.DefaultManagedBy,
		func(kube kubernetes.Interface) (events.EventRecorder, func()) {
			rec, stop := newRecorder(kube)
			return rec, func() { shut = true; stop() }
		})
	if err != nil {
		t.Fatal(err)
	}
	m.stop()
	m.stop()
	if !shut {
		t.Fatal("stop left the member's event broadcaster running")
	}
}

// probedKube is a fake clientset whose apiserver answers the readiness
// probe of a member being served (the fake's own discovery has no REST
// client).
type probedKube struct {
	*kubefake.Clientset
	discovery discovery.DiscoveryInterfaces
}

func (k probedKube) Discovery() discovery.DiscoveryInterfaces { return k.discovery }

func probed(t *testing.T, kube *kubefake.Clientset) kubernetes.Interface {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(srv.Close)
	return probedKube{Clientset: kube, discovery: discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})}
}

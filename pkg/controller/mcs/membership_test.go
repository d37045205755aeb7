package mcs

import (
	"context"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
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
	c.membersMu.Lock()
	c.runCtx = t.Context()
	c.membersMu.Unlock()

	kube := kubefake.NewSimpleClientset(&networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.250.0.0/24"}},
	})
	mcs := mcsfake.NewSimpleClientset()
	d, err := newMemberWith(topology.Member{ClusterID: "cluster-d", Context: "cluster-d"}, kube, mcs, c.cfg.ManagedBy, record.NewFakeRecorder(10))
	if err != nil {
		t.Fatal(err)
	}
	err = c.join(context.Background(), d)
	if err == nil || !strings.Contains(err.Error(), "10.250.0.0/24") || !strings.Contains(err.Error(), "cluster-d") {
		t.Fatalf("join of a cluster whose Service range is in the clusterset range: %v, want a refusal naming both", err)
	}
	if c.member("cluster-d") != nil {
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

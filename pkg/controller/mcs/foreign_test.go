package mcs

import (
	"context"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/clustersetip"
)

// The allocator is predictable, so a user of a member can create an
// import carrying the IP a name is going to get, before the controller
// starts. Reserved when the member's caches have synced, that IP is
// never handed out; the reservation follows the import as it changes
// and goes, one name at a time, through the member's worker alone.
func TestCoreForeignImportsReserveTheirIPs(t *testing.T) {
	predicted, err := clustersetip.New([]netip.Prefix{netip.MustParsePrefix("10.250.0.0/16")}).Allocate("demo/web", []v1.IPFamily{v1.IPv4Protocol})
	if err != nil {
		t.Fatal(err)
	}
	squatter := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "squatter"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: predicted, Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}}
	c, ms := newFakeClusterset(t, Config{}, []string{"cluster-a", "cluster-b"}, nil, map[string][]runtime.Object{"cluster-b/mcs": {squatter}})
	a, b := ms["cluster-a"], ms["cluster-b"]
	waitCache(t, "the squatter in cluster-b's cache", func() bool {
		_, err := b.imports.ServiceImports("demo").Get("squatter")
		return err == nil
	})
	// As Run does once a member's caches have synced, before the first
	// allocation.
	c.reservations.reserveForeignOf(b.member)

	exportWeb(t, a, "10.1.0.1")
	syncAll(t, c, "demo/web")
	si := importIn(t, a)
	if si == nil || len(si.Spec.IPs) != 1 || si.Spec.IPs[0] == predicted[0] {
		t.Fatalf("demo/web's import: %+v, want an IP other than %s, which the squatter carries", si, predicted[0])
	}

	// The squatter moves to web's IP: the reservation follows it when
	// cluster-b's worker takes the name, and web keeps its IP.
	moved := squatter.DeepCopy()
	moved.Spec.IPs = si.Spec.IPs
	if _, err := b.mcs.MulticlusterV1beta1().ServiceImports("demo").Update(context.Background(), moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "the moved squatter in cluster-b's cache", func() bool {
		got, err := b.imports.ServiceImports("demo").Get("squatter")
		return err == nil && got.Spec.IPs[0] == si.Spec.IPs[0]
	})
	if err := c.syncMember(context.Background(), b.member, "demo/squatter"); err != nil {
		t.Fatal(err)
	}
	if got := c.clustersetIPs.Foreign("cluster-b/demo/squatter"); len(got) != 1 || got[0] != si.Spec.IPs[0] {
		t.Errorf("reserved for the squatter: %v, want %v", got, si.Spec.IPs)
	}
	if owner, _ := c.clustersetIPs.Owner(si.Spec.IPs[0]); owner != "demo/web" {
		t.Errorf("web's IP %s is %q's now", si.Spec.IPs[0], owner)
	}
	// Allocated again, web keeps the IP it has.
	if ips, err := c.clustersetIPs.Allocate("demo/web", []v1.IPFamily{v1.IPv4Protocol}); err != nil || ips[0] != si.Spec.IPs[0] {
		t.Errorf("web's IP moved: %v %v", ips, err)
	}

	// The squatter goes: so does its reservation.
	if err := b.mcs.MulticlusterV1beta1().ServiceImports("demo").Delete(context.Background(), "squatter", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, "the squatter gone from cluster-b's cache", func() bool {
		_, err := b.imports.ServiceImports("demo").Get("squatter")
		return err != nil
	})
	if err := c.syncMember(context.Background(), b.member, "demo/squatter"); err != nil {
		t.Fatal(err)
	}
	if got := c.clustersetIPs.Foreign("cluster-b/demo/squatter"); len(got) != 0 {
		t.Errorf("a deleted import still reserves %v", got)
	}
}

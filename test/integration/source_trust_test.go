package integration

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/multiclusterservices/export"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
)

// forgedSlice is how an attacker who may write EndpointSlices (or the
// Endpoints the mirroring controller copies) in a namespace it exports
// from writes one: managed-by, the controller reference (none when
// ownerKind is empty) and whether endpoints name Pods.
type forgedSlice struct {
	selector  bool
	manager   string
	ownerKind string
	owner     *v1.Service // for ownerKind Service: whose UID
	pods      bool
}

// exportForged creates Service ns/name (port http 80), a slice of addrs
// written as f says, and the export.
func exportForged(t *testing.T, m *testMember, ns, name string, f forgedSlice, addrs ...string) {
	t.Helper()
	ctx := context.Background()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ServiceSpec{Ports: servicePorts("http", 80)}}
	if f.selector {
		svc.Spec.Selector = map[string]string{"app": name}
	}
	if _, err := m.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-forged", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: f.manager}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	switch f.ownerKind {
	case "Service":
		s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(f.owner, v1.SchemeGroupVersion.WithKind("Service"))}
	case "Endpoints":
		// As the mirroring controller sets it (the UID of Endpoints the
		// attacker wrote by hand).
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Endpoints", Name: name, UID: "7b0c1d2e-0000-4000-8000-000000000001", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	for i, a := range addrs {
		ep := discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
		if f.pods {
			ep.TargetRef = podOf(ns, name, i)
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	if _, err := m.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createExport(t, m, ns, name)
}

// TestMCSControllerSourceTrust: a tenant of cluster-a who may write
// EndpointSlices and Endpoints in a namespace it exports from tries to
// publish cluster-b's node address and the apiserver's Service IP into
// every member. Nothing says where cluster-a's pods are (its nodes carry
// no pod CIDR, --member-pod-cidrs names none for it); cluster-b's network
// plugin allocates from 10.2.0.0/16, which --member-pod-cidrs says. No
// admission policy is installed: these are the controller's own checks.
func TestMCSControllerSourceTrust(t *testing.T) {
	ms, kubeconfig := membersWithDemo(t, "cluster-a", "cluster-b")
	a, b := ms[0], ms[1]
	r := startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, func(o *app.Options) {
		o.MemberPodCIDRs = []string{"cluster-b=10.2.0.0/16"}
		o.MemberClusterIDs = []string{"cluster-b=cluster-b"}
	})
	forged := []string{"172.18.0.3", "10.96.0.1"}

	// What the EndpointSlice controller writes for Pods flows although
	// cluster-a's ranges are unknown.
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	waitSlices(t, b, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
	r.waitMetric(t, "cluster-a's ranges unknown", `mcs_controller_member_endpoint_ranges_known{cluster="cluster-a"} 0`)
	r.waitMetric(t, "cluster-b's ranges configured", `mcs_controller_member_endpoint_ranges_known{cluster="cluster-b"} 1`)

	// A selector-less Service whose Endpoints (mirrored as Kubernetes
	// mirrors them) hold the forged addresses: imported with no endpoint.
	exportForged(t, a, "demo", "ep", forgedSlice{manager: export.ManagerMirroringController, ownerKind: "Endpoints"}, forged...)
	waitEvent(t, a, "demo", "ep", mcs.ReasonEndpointRangesUnknown)
	waitImport(t, b, "demo", "ep", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Status.Clusters) == 1 })
	waitSlices(t, b, "demo", "ep", "")
	r.waitMetric(t, "the addresses held back counted", `mcs_controller_endpoints_ranges_unknown_total{cluster="cluster-a"} 2`)

	// The EndpointSlice controller's label, and Pods named, but no owner;
	// then owned by another Service.
	exportForged(t, a, "demo", "noowner", forgedSlice{selector: true, manager: export.ManagerEndpointSliceController, pods: true}, forged...)
	waitEvent(t, a, "demo", "noowner", string(export.SourceNotOwned))
	web, err := a.kube.CoreV1().Services("demo").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exportForged(t, a, "demo", "stolen", forgedSlice{selector: true, manager: export.ManagerEndpointSliceController, ownerKind: "Service", owner: web, pods: true}, forged...)
	waitEvent(t, a, "demo", "stolen", string(export.SourceNotOwned))
	// The label of the EndpointSlice controller on a selector-less
	// Service's slice: nothing would ever remove it.
	exportForged(t, a, "demo", "noselector", forgedSlice{manager: export.ManagerEndpointSliceController, pods: true}, forged...)
	waitEvent(t, a, "demo", "noselector", string(export.SourceWrongController))
	for _, name := range []string{"noowner", "stolen", "noselector"} {
		waitSlices(t, b, "demo", name, "")
	}
	r.waitMetric(t, "the refused slices counted", `mcs_controller_unmirrored_endpointslices_total{cluster="cluster-a"} 3`)

	// cluster-b's ranges are configured: of a mirrored slice, what lies
	// in them is exported, the rest is not.
	exportForged(t, b, "demo", "legacy", forgedSlice{manager: export.ManagerMirroringController, ownerKind: "Endpoints"}, append([]string{"10.2.0.7"}, forged...)...)
	waitSlices(t, a, "demo", "legacy", "cluster-b=10.2.0.7 ports http:8080")
	waitEvent(t, b, "demo", "legacy", "EndpointsOutsidePodRanges")
	r.waitMetric(t, "the addresses outside cluster-b's ranges counted", `mcs_controller_endpoints_outside_pod_ranges_total{cluster="cluster-b"} 2`)
}

// TestMCSControllerServiceCIDRAddedLater: cluster-b's administrator adds
// a ServiceCIDR that holds demo/web's clusterset IP, after cluster-b
// joined. A user there could ask for that IP as a ClusterIP and take the
// import's traffic in cluster-b. The controller says so as soon as the
// ServiceCIDR appears: an event on it, the import in cluster-b marked, a
// gauge; it hands out no new clusterset IP in that range; the member
// stays and the import keeps its IP. Deleting the ServiceCIDR clears it.
func TestMCSControllerServiceCIDRAddedLater(t *testing.T) {
	ms, kubeconfig := membersWithDemo(t, "cluster-a", "cluster-b")
	a, b := ms[0], ms[1]
	r := startController(t, kubeconfig, "replica-1", 8*time.Second)
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	si := waitImport(t, b, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) == 1 })
	vip := netip.MustParseAddr(si.Spec.IPs[0])

	// Half of the clusterset range, the half that holds the import's IP.
	overlap := netip.PrefixFrom(vip, 17).Masked()
	if _, err := b.kube.NetworkingV1().ServiceCIDRs().Create(context.Background(), &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{overlap.String()}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEventOn(t, b, "ServiceCIDR", metav1.NamespaceDefault, "extra", mcs.ReasonServiceCIDROverlap)
	waitImport(t, b, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		c := meta.FindStatusCondition(si.Status.Conditions, mcs.ConditionClusterSetIPInServiceRange)
		return c != nil && c.Status == metav1.ConditionTrue && si.Spec.IPs[0] == vip.String()
	})
	r.waitMetric(t, "the overlapping ServiceCIDR counted", `mcs_controller_service_cidrs_overlapping_clusterset{cluster="cluster-b"} 1`)
	r.waitMetric(t, "cluster-b still a member", `mcs_controller_clusters 2`)
	waitSlices(t, b, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
	if c := meta.FindStatusCondition(waitImport(t, a, "demo", "web", func(*mcsv1beta1.ServiceImport) bool { return true }).Status.Conditions, mcs.ConditionClusterSetIPInServiceRange); c != nil {
		t.Errorf("cluster-a's import, whose member's ranges are disjoint, says %v", c)
	}

	// New names get clusterset IPs outside cluster-b's Service range.
	for i := range 5 {
		name := fmt.Sprintf("api-%d", i)
		exportService(t, a, "demo", name, servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
		got := waitImport(t, b, "demo", name, func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) == 1 })
		if overlap.Contains(netip.MustParseAddr(got.Spec.IPs[0])) {
			t.Errorf("demo/%s was given %s, inside cluster-b's ServiceCIDR %s", name, got.Spec.IPs[0], overlap)
		}
	}

	if err := b.kube.NetworkingV1().ServiceCIDRs().Delete(context.Background(), "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitImport(t, b, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		return meta.FindStatusCondition(si.Status.Conditions, mcs.ConditionClusterSetIPInServiceRange) == nil
	})
	r.waitMetric(t, "no overlapping ServiceCIDR left", `mcs_controller_service_cidrs_overlapping_clusterset{cluster="cluster-b"} 0`)
}

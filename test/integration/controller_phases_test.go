package integration

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/clustersetip"
)

// controllerScenario is what every phase of TestMCSController shares: three
// members, the controller's kubeconfig, its two first replicas, and the
// clusterset IP demo/web got. The phases run in order, each from the state
// the one before left.
type controllerScenario struct {
	ctx                context.Context
	dir, kubeconfig    string
	members            []*testMember
	a, b, c            *testMember
	replica1, replica2 *runningController
	ttl                time.Duration
	vip                string
}

// exportAndImport: export → import in every member, exporters included, with one clusterset IP from the default range, and the propagation measured per member.
func (s *controllerScenario) exportAndImport(t *testing.T) {
	ctx, members, a, b, replica1 := s.ctx, s.members, s.a, s.b, s.replica1
	// --- Export → import in every member, exporters included.
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1", "10.1.0.2"))
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	for _, m := range members {
		eventually(t, 60*time.Second, "demo/web imported in "+m.id, func() (bool, string) {
			si, err := m.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got := describeImport(si)
			ok := si.Spec.Type == mcsv1beta1.ClusterSetIP && len(si.Spec.IPs) == 1 &&
				portsString(si.Spec.Ports) == "http:80/TCP" && clustersString(si) == "cluster-a,cluster-b" &&
				si.Spec.SessionAffinity == v1.ServiceAffinityNone && si.Spec.InternalTrafficPolicy != nil &&
				slices.Equal(si.Spec.IPFamilies, []v1.IPFamily{v1.IPv4Protocol}) && importReady(si)
			return ok, got
		})
		si, _ := m.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
		ip := netip.MustParseAddr(si.Spec.IPs[0])
		if !netip.MustParsePrefix(mcsproxy.DefaultClusterSetIPCIDRs[0]).Contains(ip) {
			t.Errorf("clusterset IP %s is outside %s", ip, mcsproxy.DefaultClusterSetIPCIDRs[0])
		}
		if s.vip == "" {
			s.vip = si.Spec.IPs[0]
		} else if si.Spec.IPs[0] != s.vip {
			t.Errorf("%s has clusterset IP %s, another member %s", m.id, si.Spec.IPs[0], s.vip)
		}
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
		checkSliceMetadata(t, m, "demo", "web")
	}
	for _, m := range []*testMember{a, b} {
		waitExportConditions(t, m, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
	}
	// Propagation, from the source's endpoint change to the write in each
	// member, is measured per member.
	eventually(t, 30*time.Second, "the propagation histogram of every member", func() (bool, string) {
		out, err := httpGet("http://" + replica1.metrics + "/metrics")
		for _, m := range members {
			if want := `mcs_controller_endpoint_propagation_seconds_count{cluster="` + m.id + `"}`; !strings.Contains(out, want) {
				return false, "no " + want + errString(err)
			}
		}
		return true, ""
	})
}

// nativeNames: native names: the exporters ask for RemoteAndLocal; a member without the Service gets one, the users' own Services are told, and left alone.
func (s *controllerScenario) nativeNames(t *testing.T) {
	ctx, a, b, c := s.ctx, s.a, s.b, s.c
	// --- Native names: the exporters ask for RemoteAndLocal. c, which has
	// no Service demo/web, gets one (selector-less, owned by its import);
	// a's and b's own Services are not touched: until their owners accept
	// native names, they are told that their Services keep their own
	// endpoints; once they accept, that they serve the clusterset's.
	native := map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)}
	for _, m := range []*testMember{a, b} {
		setExported(t, m, "demo", "web", nil, native)
	}
	eventually(t, 30*time.Second, "the import in a saying a's Service did not accept native names", func() (bool, string) {
		si, err := a.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(si.Status.Conditions, "NativeNames")
		return cond != nil && string(cond.Status)+"/"+cond.Reason == "False/NativeNamesNotAccepted", fmt.Sprint(cond)
	})
	waitEventOn(t, a, "Service", "demo", "web", "NativeNamesNotAccepted")
	userRV := map[string]string{}
	for _, m := range []*testMember{a, b} {
		// The owner accepts (the controller never could).
		svc, err := m.kube.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[mcsproxy.AnnotationAcceptNativeNames] = "true"
		if svc, err = m.kube.CoreV1().Services("demo").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		userRV[m.id] = svc.ResourceVersion
	}
	var nativeSvc *v1.Service
	eventually(t, 30*time.Second, "a native Service demo/web in cluster-c", func() (bool, string) {
		svc, err := c.kube.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		nativeSvc = svc
		return true, ""
	})
	si, _ := c.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
	if nativeSvc.Labels["app.kubernetes.io/managed-by"] != mcsproxy.DefaultManagedBy || len(nativeSvc.Spec.Selector) != 0 ||
		len(nativeSvc.OwnerReferences) != 1 || nativeSvc.OwnerReferences[0].UID != si.UID || nativeSvc.Spec.ClusterIP == "" ||
		len(nativeSvc.Spec.Ports) != 1 || nativeSvc.Spec.Ports[0].Port != 80 {
		t.Errorf("native Service: labels %v selector %v owners %v clusterIP %q ports %v", nativeSvc.Labels, nativeSvc.Spec.Selector, nativeSvc.OwnerReferences, nativeSvc.Spec.ClusterIP, nativeSvc.Spec.Ports)
	}
	waitEventOn(t, c, "ServiceImport", "demo", "web", "NativeServiceCreated")
	nativeCondition := func(m *testMember, want string) {
		t.Helper()
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			cond := meta.FindStatusCondition(si.Status.Conditions, "NativeNames")
			if want == "" {
				return cond == nil
			}
			return cond != nil && string(cond.Status)+"/"+cond.Reason == want
		})
	}
	nativeCondition(c, "True/ServiceCreated")
	nativeCondition(a, "True/ServiceMerged")
	nativeCondition(b, "True/ServiceMerged")
	for _, m := range []*testMember{a, b} {
		waitEventOn(t, m, "Service", "demo", "web", "ServesClusterSetEndpoints")
		if svc, _ := m.kube.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{}); svc.ResourceVersion != userRV[m.id] {
			t.Errorf("%s: the user's Service demo/web was changed", m.id)
		}
	}
	// Turned off, the native Service goes; the users' stay.
	for _, m := range []*testMember{a, b} {
		setExported(t, m, "demo", "web", nil, nil)
	}
	eventually(t, 30*time.Second, "the native Service demo/web gone from cluster-c", func() (bool, string) {
		_, err := c.kube.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	nativeCondition(c, "")
	nativeCondition(a, "")
	for _, m := range []*testMember{a, b} {
		if _, err := m.kube.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: the user's Service: %v", m.id, err)
		}
	}
}

// exportedMetadata: exported labels and annotations: one property each, and an attack through exportedAnnotations refused.
func (s *controllerScenario) exportedMetadata(t *testing.T) {
	members, a, b := s.members, s.a, s.b
	// --- Exported labels and annotations are one property each: b's
	// maps differ from a's (one key more, one value other), so the import
	// carries a's maps whole and both exports say so.
	setExported(t, a, "demo", "web", map[string]string{"tier": "web"}, map[string]string{"note": "from a"})
	setExported(t, b, "demo", "web", map[string]string{"tier": "web", "env": "prod"}, map[string]string{"note": "from b"})
	for _, m := range members {
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			return si.Labels["tier"] == "web" && si.Labels["env"] == "" && si.Annotations["note"] == "from a" && si.Labels["app.kubernetes.io/managed-by"] != ""
		})
	}
	for _, m := range []*testMember{a, b} {
		se := waitExportConditions(t, m, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=True/LabelsConflict,AnnotationsConflict")
		if msg := meta.FindStatusCondition(se.Status.Conditions, "Conflict").Message; !strings.Contains(msg, `Conflicting exportedLabels. Using {tier="web"} from oldest service export in "cluster-a"`) {
			t.Errorf("%s: conflict message does not give the labels used: %s", m.id, msg)
		}
	}
	waitEvent(t, b, "demo", "web", "LabelsConflict,AnnotationsConflict")
	// Agreement clears the conflict.
	setExported(t, b, "demo", "web", map[string]string{"tier": "web"}, map[string]string{"note": "from a"})
	for _, m := range []*testMember{a, b} {
		waitExportConditions(t, m, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
	}
	// c, below, exports without labels: back to none, so that its
	// conflict is about ports only.
	setExported(t, a, "demo", "web", nil, nil)
	setExported(t, b, "demo", "web", nil, nil)
	for _, m := range members {
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			return si.Labels["tier"] == "" && len(si.Annotations) == 0
		})
	}

	// --- An attack through exportedAnnotations: a's exporter (the oldest,
	// whose maps win) copies a derived import's annotations with another
	// clusterset IP into its export, and a label that would take the
	// import from the controller. Proxies would program that IP for
	// demo/web's endpoints. The export is invalid and says why; the
	// import never carries the keys, and b still serves the name.
	capture := map[string]string{mcsproxy.AnnotationDerivedService: "derived-x", mcsproxy.AnnotationClusterSetIPs: "10.250.0.99"}
	setExported(t, a, "demo", "web", map[string]string{mcsproxy.LabelImportManagedBy: "someone"}, capture)
	refused := waitExportConditions(t, a, "demo", "web", "Valid=False/ReservedKey Ready=False/Failed Conflict=False/NoConflicts")
	if msg := meta.FindStatusCondition(refused.Status.Conditions, "Valid").Message; !strings.Contains(msg, mcsproxy.AnnotationClusterSetIPs) {
		t.Errorf("the Valid condition does not name the refused key: %s", msg)
	}
	for _, m := range members {
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			_, ips := si.Annotations[mcsproxy.AnnotationClusterSetIPs]
			_, derived := si.Annotations[mcsproxy.AnnotationDerivedService]
			return clustersString(si) == "cluster-b" && !ips && !derived && si.Labels[mcsproxy.LabelImportManagedBy] == mcsproxy.DefaultManagedBy
		})
	}
	setExported(t, a, "demo", "web", nil, nil)
	for _, m := range members {
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a,cluster-b" })
	}
	waitExportConditions(t, a, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
}

// untrustedSlices: slices the controller must not trust: a forged one with its label, one Kubernetes did not write, addresses outside the pod ranges.
func (s *controllerScenario) untrustedSlices(t *testing.T) {
	ctx, members, a, b, replica1 := s.ctx, s.members, s.a, s.b, s.replica1
	// --- A forged slice: a user of b writes a slice with the controller's
	// managed-by label for demo/web. The controller deletes it, and says
	// so (event on the import, metric).
	forged := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-forged", Labels: map[string]string{
			mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: "cluster-a", discoveryv1.LabelManagedBy: mcsproxy.DefaultManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.66.6.6"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	if _, err := b.kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, forged, metav1.CreateOptions{FieldManager: "attacker"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the forged slice deleted", func() (bool, string) {
		_, err := b.kube.DiscoveryV1().EndpointSlices("demo").Get(ctx, "web-forged", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	waitSlices(t, b, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
	waitEventOn(t, b, "ServiceImport", "demo", "web", "ForeignEndpointSliceDeleted")
	replica1.waitMetric(t, "the forged slice counted", `mcs_controller_foreign_endpointslices_deleted_total{cluster="cluster-b"} 1`)

	// --- A member is not trusted blindly: a slice of the exported Service
	// that Kubernetes' EndpointSlice controllers did not write stays in its
	// cluster (with an event on the export saying so), and a cloud
	// metadata address in a trusted slice is never mirrored.
	webA, err := a.kube.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra := func(name, manager string, addrs ...string) {
		t.Helper()
		s := slice(name, map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: manager})
		// Owned as the EndpointSlice controller's slices are, with an
		// endpoint per Pod: only the manager differs.
		s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(webA, v1.SchemeGroupVersion.WithKind("Service"))}
		s.Endpoints = nil
		for i, addr := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: podOf("demo", "web", 10+i)})
		}
		if _, err := a.kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	extra("web-by-hand", "someone", "10.1.0.66")
	extra("web-metadata", "endpointslice-controller.k8s.io", "100.100.100.200", "10.1.0.3")
	for _, m := range members {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-a=10.1.0.3 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
	}
	waitEvent(t, a, "demo", "web", "EndpointSliceNotMirrored")
	replica1.waitMetric(t, "the unmirrored slice counted", `mcs_controller_unmirrored_endpointslices_total{cluster="cluster-a"} 1`)
	for _, name := range []string{"web-by-hand", "web-metadata"} {
		if err := a.kube.DiscoveryV1().EndpointSlices("demo").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range members {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
	}

	// --- Addresses outside the source cluster's pod ranges (its nodes'
	// pod CIDRs and addresses, once a node has a pod CIDR) are not
	// mirrored, even from a trusted slice.
	if _, err := a.kube.CoreV1().Nodes().Create(ctx, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec:       v1.NodeSpec{PodCIDR: "10.1.0.0/24", PodCIDRs: []string{"10.1.0.0/24"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	extra("web-elsewhere", "endpointslice-controller.k8s.io", "192.168.7.7", "10.1.0.4")
	for _, m := range members {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-a=10.1.0.4 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
	}
	waitEvent(t, a, "demo", "web", "EndpointsOutsidePodRanges")
	replica1.waitMetric(t, "the address outside the pod ranges counted", `mcs_controller_endpoints_outside_pod_ranges_total{cluster="cluster-a"} 1`)
	if err := a.kube.DiscoveryV1().EndpointSlices("demo").Delete(ctx, "web-elsewhere", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.kube.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
	}
}

// foreignClaims: imports someone else wrote: a foreign claim on the clusterset IP, a squatter on a predicted one.
func (s *controllerScenario) foreignClaims(t *testing.T) {
	ctx, a, b, c, replica1, vip := s.ctx, s.a, s.b, s.c, s.replica1, s.vip
	// --- A foreign claim: a user of c creates an import of their own with
	// web's clusterset IP. c's import of web says so (condition, event,
	// metric) and keeps its IP; the other members' imports are not
	// concerned.
	foreignImport := func(m *testMember, ns, name, ip string) {
		t.Helper()
		_, err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Create(ctx, &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{ip},
				Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	foreignImport(c, "demo", "evil", vip)
	waitImport(t, c, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		cond := meta.FindStatusCondition(si.Status.Conditions, "ClusterSetIPConflict")
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == "ForeignServiceImport" &&
			strings.Contains(cond.Message, "demo/evil ("+vip+")") && si.Spec.IPs[0] == vip
	})
	waitEventOn(t, c, "ServiceImport", "demo", "web", "ForeignServiceImport")
	replica1.waitMetric(t, "the foreign claim counted", `mcs_controller_foreign_clusterset_ip_claims{cluster="cluster-c"} 1`)
	for _, m := range []*testMember{a, b} {
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			cond := meta.FindStatusCondition(si.Status.Conditions, "ClusterSetIPConflict")
			return cond != nil && cond.Status == metav1.ConditionFalse
		})
	}
	if err := c.mcs.MulticlusterV1beta1().ServiceImports("demo").Delete(ctx, "evil", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitImport(t, c, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		cond := meta.FindStatusCondition(si.Status.Conditions, "ClusterSetIPConflict")
		return cond != nil && cond.Status == metav1.ConditionFalse
	})
	// The allocator is predictable (it probes from a hash of the name), so
	// a user can create an import with the IP a name is going to get. The
	// controller never hands out an IP a foreign import carries.
	predicted, err := clustersetip.New([]netip.Prefix{netip.MustParsePrefix(mcsproxy.DefaultClusterSetIPCIDRs[0])}).Allocate("demo/predicted", []v1.IPFamily{v1.IPv4Protocol})
	if err != nil {
		t.Fatal(err)
	}
	foreignImport(b, "demo", "squatter", predicted[0])
	time.Sleep(time.Second) // the controller's cache sees the squatter first
	exportService(t, a, "demo", "predicted", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.5"))
	si := waitImport(t, a, "demo", "predicted", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) == 1 })
	if si.Spec.IPs[0] == predicted[0] {
		t.Errorf("demo/predicted got %s, the IP a foreign import squats", predicted[0])
	}
	if err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "predicted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.mcs.MulticlusterV1beta1().ServiceImports("demo").Delete(ctx, "squatter", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

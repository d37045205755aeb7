package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crds"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/clustersetip"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// controllerUser is the identity the mcs-controller uses in every member;
// it has only what kind-config/mcs-controller-rbac.yaml grants, so these
// tests also check that manifest.
const controllerUser = "system:mcs-controller"

// member is one member cluster of the test clusterset.
type testMember struct {
	id      string
	cluster *framework.Cluster
	kube    kubernetes.Interface
	mcs     mcsclientset.Interface
	// link is the TCP path the controller reaches the member through, so
	// that a test can cut it to simulate an outage.
	link *tcpLink
}

// TestMCSController runs the mcs-controller (two replicas, leader elected)
// against three real apiservers and checks, in order: export → import in
// all three members, a port conflict, unexport, Service deletion, refused
// and missing namespaces, controller restart (same clusterset IPs, no
// writes), failover between replicas, and endpoint TTL across a member
// outage and return, and removing a member.
func TestMCSController(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)

	var members []*testMember
	for _, id := range []string{"cluster-a", "cluster-b", "cluster-c"} {
		members = append(members, startMember(t, etcd, dir, id))
	}
	a, b, c := members[0], members[1], members[2]
	kubeconfig := writeControllerKubeconfig(t, dir, members)
	for _, m := range members {
		createNamespace(t, m, "demo")
	}
	createNamespace(t, a, "partial")
	createNamespace(t, b, "partial")

	const ttl = 8 * time.Second
	replica1 := startController(t, kubeconfig, "replica-1", ttl)
	waitLeader(t, a, "replica-1")
	replica2 := startController(t, kubeconfig, "replica-2", ttl)

	// --- Export → import in every member, exporters included.
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1", "10.1.0.2"))
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	var vip string
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
		if vip == "" {
			vip = si.Spec.IPs[0]
		} else if si.Spec.IPs[0] != vip {
			t.Errorf("%s has clusterset IP %s, another member %s", m.id, si.Spec.IPs[0], vip)
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
	si = waitImport(t, a, "demo", "predicted", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) == 1 })
	if si.Spec.IPs[0] == predicted[0] {
		t.Errorf("demo/predicted got %s, the IP a foreign import squats", predicted[0])
	}
	if err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "predicted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.mcs.MulticlusterV1beta1().ServiceImports("demo").Delete(ctx, "squatter", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// --- Conflict: c exports "http" on another port, plus a port of its
	// own. The oldest export's "http" wins; the port sets are not
	// identical, so every export says so, naming the clusters without
	// "metrics"; and c's slices carry only the port c really serves.
	exportService(t, c, "demo", "web", servicePorts("http", 8080, "metrics", 9090), endpoints2("10.3.0.1", "http", 8080, "metrics", 9090))
	for _, m := range members {
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			return portsString(si.Spec.Ports) == "http:80/TCP,metrics:9090/TCP" && clustersString(si) == "cluster-a,cluster-b,cluster-c"
		})
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1 ports http:8080;cluster-c=10.3.0.1 ports metrics:9090")
		waitExportConditions(t, m, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=True/PortConflict")
	}
	for _, m := range members {
		se, _ := m.mcs.MulticlusterV1beta1().ServiceExports("demo").Get(ctx, "web", metav1.GetOptions{})
		msg := meta.FindStatusCondition(se.Status.Conditions, "Conflict").Message
		if !strings.Contains(msg, `port "http"`) || !strings.Contains(msg, `"cluster-a"`) {
			t.Errorf("%s: conflict message does not name the field and the winner: %s", m.id, msg)
		}
		if !strings.Contains(msg, `Conflicting port "metrics". Using 9090/TCP from oldest service export in "cluster-c". 2/3 clusters disagree: cluster-a, cluster-b. Not exposed by cluster-a, cluster-b.`) {
			t.Errorf("%s: conflict message does not name the port the others lack: %s", m.id, msg)
		}
	}
	waitEvent(t, c, "demo", "web", "PortConflict")

	// --- Unexport: c's endpoints leave every member, the conflict clears.
	if err := c.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			return portsString(si.Spec.Ports) == "http:80/TCP" && clustersString(si) == "cluster-a,cluster-b" && si.Spec.IPs[0] == vip
		})
	}
	waitExportConditions(t, a, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")

	// --- Service deletion: b's export becomes invalid, b's endpoints go.
	if err := b.kube.CoreV1().Services("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitExportConditions(t, b, "demo", "web", "Valid=False/NoService Ready=False/Failed Conflict=False/NoConflicts")
	for _, m := range members {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080")
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
			return clustersString(si) == "cluster-a" && si.Spec.IPs[0] == vip
		})
	}

	// --- Last export gone: the import and its slices go everywhere.
	if err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		eventually(t, 30*time.Second, "demo/web removed from "+m.id, func() (bool, string) {
			_, err := m.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
			n := len(importedSlices(t, m, "demo", "web"))
			return apierrors.IsNotFound(err) && n == 0, fmt.Sprintf("import err %v, %d slices", err, n)
		})
	}
	// Nothing is exported now: the controller forgets every name.
	eventually(t, 30*time.Second, "the controller to forget names nobody exports", func() (bool, string) {
		out, err := httpGet("http://" + replica1.metrics + "/metrics")
		return strings.Contains(out, "\nmcs_controller_names_tracked 0\n"), metricLine(out, "mcs_controller_names_tracked") + errString(err)
	})

	// --- Bad input: a refused namespace, an ExternalName Service, a
	// namespace missing in one member.
	exportService(t, a, "default", "refused", servicePorts("http", 80), endpoints("http", 80, "10.1.0.9"))
	waitExportConditions(t, a, "default", "refused", "Valid=False/NamespaceNotAllowed Ready=False/Failed Conflict=False/NoConflicts")
	createExternalName(t, a, "demo", "external")
	waitExportConditions(t, a, "demo", "external", "Valid=False/InvalidServiceType Ready=False/Failed Conflict=False/NoConflicts")
	exportService(t, a, "partial", "solo", servicePorts("http", 80), endpoints("http", 80, "10.1.0.7"))
	for _, m := range []*testMember{a, b} {
		waitSlices(t, m, "partial", "solo", "cluster-a=10.1.0.7 ports http:80")
	}
	se := waitExportConditions(t, a, "partial", "solo", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
	if msg := meta.FindStatusCondition(se.Status.Conditions, "Ready").Message; !strings.Contains(msg, "cluster-c") {
		t.Errorf("Ready message does not say where the namespace is missing: %s", msg)
	}
	for _, ns := range []string{"default", "partial"} {
		if list, _ := c.mcs.MulticlusterV1beta1().ServiceImports(ns).List(ctx, metav1.ListOptions{}); len(list.Items) > 0 {
			t.Errorf("cluster-c has imports in %s: %v", ns, list.Items)
		}
	}
	if list, _ := a.mcs.MulticlusterV1beta1().ServiceImports("default").List(ctx, metav1.ListOptions{}); len(list.Items) > 0 {
		t.Errorf("an export from a refused namespace was imported")
	}

	// --- A service for the restart, failover and outage phases.
	exportService(t, a, "demo", "api", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.1.1.1"))
	exportService(t, b, "demo", "api", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.2.1.1"))
	for _, m := range members {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000;cluster-b=10.2.1.1 ports grpc:9000")
	}
	time.Sleep(2 * time.Second) // let status writes settle
	before := snapshot(t, members, "demo", "api")

	// --- Failover: the leader stops, the standby takes over and serves.
	replica1.stop()
	waitLeader(t, a, "replica-2")
	exportService(t, c, "demo", "api", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.3.1.1"))
	for _, m := range members {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000;cluster-b=10.2.1.1 ports grpc:9000;cluster-c=10.3.1.1 ports grpc:9000")
	}
	deleteExport(t, c, "demo", "api")
	for _, m := range members {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000;cluster-b=10.2.1.1 ports grpc:9000")
	}
	time.Sleep(2 * time.Second)
	before = snapshot(t, members, "demo", "api")

	// --- Restart: a new controller process finds the same clusterset IP
	// and writes nothing.
	replica2.stop()
	replica3 := startController(t, kubeconfig, "replica-3", ttl)
	waitLeader(t, a, "replica-3")
	replica3.waitReady(t)
	eventually(t, 30*time.Second, "the controller's metrics", func() (bool, string) {
		out, err := httpGet("http://" + replica3.metrics + "/metrics")
		for _, want := range []string{"mcs_controller_clusters_reachable 3", "mcs_controller_clusterset_ips_allocated 2", "mcs_controller_member_queue_depth{cluster=\"cluster-a\"}", "mcs_controller_member_sync_duration_seconds_bucket"} {
			if !strings.Contains(out, want) {
				return false, "no " + want + errString(err)
			}
		}
		return true, ""
	})
	time.Sleep(5 * time.Second)
	if after := snapshot(t, members, "demo", "api"); after != before {
		t.Errorf("restart changed objects:\nbefore %s\nafter  %s", before, after)
	}

	// --- Outage: b's API is cut off from the controller. After the TTL
	// b's endpoints leave the members the controller can reach, and a's
	// slices are not touched; they come back when b returns.
	// A name only b exports keeps b's endpoints (fail static), marked
	// stale, since withdrawing them would help no client.
	exportService(t, b, "demo", "onlyb", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.2.2.1"))
	for _, m := range members {
		waitSlices(t, m, "demo", "onlyb", "cluster-b=10.2.2.1 ports grpc:9000")
	}
	aSlices := sliceVersions(t, c, "demo", "api", "cluster-a")
	b.link.cut()
	for _, m := range []*testMember{a, c} {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000")
	}
	for _, m := range []*testMember{a, c} {
		waitImport(t, m, "demo", "onlyb", func(si *mcsv1beta1.ServiceImport) bool {
			cond := meta.FindStatusCondition(si.Status.Conditions, "EndpointsStale")
			return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, "cluster-b")
		})
		waitSlices(t, m, "demo", "onlyb", "cluster-b=10.2.2.1 ports grpc:9000")
		waitImport(t, m, "demo", "api", func(si *mcsv1beta1.ServiceImport) bool {
			cond := meta.FindStatusCondition(si.Status.Conditions, "EndpointsStale")
			return cond != nil && cond.Status == metav1.ConditionFalse
		})
	}
	if got := sliceVersions(t, c, "demo", "api", "cluster-a"); got != aSlices {
		t.Errorf("cluster-a's slices moved during cluster-b's outage: %s -> %s", aSlices, got)
	}
	if si, err := c.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "api", metav1.GetOptions{}); err != nil || clustersString(si) != "cluster-a,cluster-b" {
		t.Errorf("the import changed during the outage: %v %v", describeImport(si), err)
	}
	b.link.restore()
	for _, m := range members {
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000;cluster-b=10.2.1.1 ports grpc:9000")
		waitImport(t, m, "demo", "onlyb", func(si *mcsv1beta1.ServiceImport) bool {
			cond := meta.FindStatusCondition(si.Status.Conditions, "EndpointsStale")
			return cond != nil && cond.Status == metav1.ConditionFalse
		})
	}

	// --- Removing a member: the controller restarts without cluster-b.
	// b's exports no longer count, and its endpoints leave the remaining
	// members once its lease (renewed by the previous run) expires.
	aSlices = sliceVersions(t, c, "demo", "api", "cluster-a")
	replica3.stop()
	replica4 := startController(t, kubeconfig, "replica-4", ttl, "cluster-a", "cluster-c")
	waitLeader(t, a, "replica-4")
	for _, m := range []*testMember{a, c} {
		waitImport(t, m, "demo", "api", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a" })
		waitSlices(t, m, "demo", "api", "cluster-a=10.1.1.1 ports grpc:9000")
	}
	if got := sliceVersions(t, c, "demo", "api", "cluster-a"); got != aSlices {
		t.Errorf("cluster-a's slices moved when cluster-b was removed: %s -> %s", aSlices, got)
	}
	replica4.stop()
}

func startMember(t *testing.T, etcd *framework.Etcd, dir, id string) *testMember {
	t.Helper()
	ctx := context.Background()
	cluster, err := framework.StartCluster(ctx, framework.ClusterOptions{Name: id, Etcd: etcd, Dir: filepath.Join(dir, id)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	cfg := cluster.RESTConfig()
	m := &testMember{id: id, cluster: cluster, kube: cluster.Client(), mcs: mcsclientset.NewForConfigOrDie(cfg)}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(cfg), all...); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	prop := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": aboutv1alpha1.SchemeGroupVersion.String(), "kind": "ClusterProperty",
		"metadata": map[string]any{"name": aboutv1alpha1.ClusterIDProperty},
		"spec":     map[string]any{"value": id},
	}}
	eventually(t, 30*time.Second, "ClusterProperty in "+id, func() (bool, string) {
		_, err := dyn.Resource(aboutv1alpha1.Resource).Create(ctx, prop, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), errString(err)
	})
	applyControllerRBAC(t, m.kube)
	return m
}

// membersWithDemo starts a member per id, on one etcd, each with
// namespace demo, and returns them with the controller's kubeconfig of
// them all.
func membersWithDemo(t *testing.T, ids ...string) ([]*testMember, string) {
	t.Helper()
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	var ms []*testMember
	for _, id := range ids {
		m := startMember(t, etcd, dir, id)
		createNamespace(t, m, "demo")
		ms = append(ms, m)
	}
	return ms, writeControllerKubeconfig(t, dir, ms)
}

// applyControllerRBAC creates the objects of kind-config/mcs-controller-rbac.yaml.
func applyControllerRBAC(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	applyRBAC(t, kube, repoPath(t, "kind-config", "mcs-controller-rbac.yaml"))
}

// applyRBAC creates the RBAC objects of a manifest.
func applyRBAC(t *testing.T, kube kubernetes.Interface, path string) {
	t.Helper()
	ctx := context.Background()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	decoder := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj unstructured.Unstructured
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		data, _ := obj.MarshalJSON()
		switch obj.GetKind() {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			mustUnmarshal(t, data, &o)
			_, err = kube.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			mustUnmarshal(t, data, &o)
			_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			mustUnmarshal(t, data, &o)
			_, err = kube.RbacV1().Roles(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			mustUnmarshal(t, data, &o)
			_, err = kube.RbacV1().RoleBindings(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected kind %q in the RBAC manifest", obj.GetKind())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func mustUnmarshal(t *testing.T, data []byte, into any) {
	t.Helper()
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}

// writeControllerKubeconfig writes one kubeconfig with a context per
// member, acting as controllerUser and reaching each member through a
// tcpLink.
func writeControllerKubeconfig(t *testing.T, dir string, members []*testMember) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for _, m := range members {
		one := controllerKubeconfig(t, m)
		m.link = newTCPLink(t, strings.TrimPrefix(m.cluster.URL(), "https://"))
		for name, cl := range one.Clusters {
			cl.Server = "https://" + m.link.addr()
			kc.Clusters[name] = cl
		}
		for name, u := range one.AuthInfos {
			kc.AuthInfos[name] = u
		}
		for name, c := range one.Contexts {
			kc.Contexts[name] = c
		}
	}
	kc.CurrentContext = members[0].id
	path := filepath.Join(dir, "clusterset.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// controllerKubeconfig returns a kubeconfig reaching m directly as the
// controller's user (impersonated by the admin).
func controllerKubeconfig(t *testing.T, m *testMember) *clientcmdapi.Config {
	t.Helper()
	path, err := m.cluster.ImpersonatingKubeconfig(controllerUser, []string{"system:authenticated"})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

type runningController struct {
	cancel context.CancelFunc
	// exited is closed when app.Run has returned err.
	exited  chan struct{}
	err     error
	health  string
	metrics string
}

func startController(t *testing.T, kubeconfig, identity string, ttl time.Duration, contexts ...string) *runningController {
	t.Helper()
	return startControllerWith(t, kubeconfig, identity, ttl, func(o *app.Options) { o.Contexts = contexts })
}

// startControllerWith starts a controller whose options mutate changes.
func startControllerWith(t *testing.T, kubeconfig, identity string, ttl time.Duration, mutate func(*app.Options)) *runningController {
	t.Helper()
	o := app.NewOptions()
	o.Kubeconfig = kubeconfig
	o.Identity = identity
	o.EndpointTTL = ttl
	o.InitialSyncTimeout = 20 * time.Second
	o.LeaderElectLeaseDuration = 4 * time.Second
	o.LeaderElectRenewDeadline = 3 * time.Second
	o.LeaderElectRetryPeriod = 500 * time.Millisecond
	o.ClusterIDTimeout = 3 * time.Second
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	o.HealthzBindAddress = fmt.Sprintf("127.0.0.1:%d", port)
	if port, err = framework.FreePort(); err != nil {
		t.Fatal(err)
	}
	o.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", port)
	// Several replicas run in one test: the secure port is the one test's
	// that asks for it (TestMCSControllerSecurePort).
	o.SecureServing.BindPort = 0
	mutate(o)
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningController{cancel: cancel, exited: make(chan struct{}), health: o.HealthzBindAddress, metrics: o.MetricsBindAddress}
	go func() {
		r.err = app.Run(ctx, o)
		close(r.exited)
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *runningController) stop() {
	r.cancel()
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
	}
}

func (r *runningController) waitReady(t *testing.T) {
	t.Helper()
	eventually(t, 60*time.Second, "the controller's /readyz", func() (bool, string) {
		out, err := httpGet("http://" + r.health + "/readyz")
		return err == nil && strings.TrimSpace(out) == "ok", out + errString(err)
	})
}

func waitLeader(t *testing.T, m *testMember, identity string) {
	t.Helper()
	eventually(t, 60*time.Second, identity+" to lead", func() (bool, string) {
		lease, err := m.kube.CoordinationV1().Leases("kube-system").Get(context.Background(), "mcs-controller", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		return holder == identity, holder
	})
}

func createNamespace(t *testing.T, m *testMember, name string) {
	t.Helper()
	_, err := m.kube.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func servicePorts(nameAndPort ...any) []v1.ServicePort {
	var out []v1.ServicePort
	for i := 0; i < len(nameAndPort); i += 2 {
		out = append(out, v1.ServicePort{Name: nameAndPort[i].(string), Port: int32(nameAndPort[i+1].(int)), Protocol: v1.ProtocolTCP})
	}
	return out
}

// slicePorts and addresses of a member's own EndpointSlice.
type localSlice struct {
	ports []discoveryv1.EndpointPort
	addrs []string
}

func endpoints(port string, number int32, addrs ...string) localSlice {
	return localSlice{ports: []discoveryv1.EndpointPort{{Name: ptr.To(port), Port: ptr.To(number), Protocol: ptr.To(v1.ProtocolTCP)}}, addrs: addrs}
}

func endpoints2(addr, p1 string, n1 int32, p2 string, n2 int32) localSlice {
	return localSlice{ports: []discoveryv1.EndpointPort{
		{Name: ptr.To(p1), Port: ptr.To(n1), Protocol: ptr.To(v1.ProtocolTCP)},
		{Name: ptr.To(p2), Port: ptr.To(n2), Protocol: ptr.To(v1.ProtocolTCP)},
	}, addrs: []string{addr}}
}

// exportService creates a Service selecting app=name (unless it exists),
// its EndpointSlice as the member's EndpointSlice controller would write
// it for Pods (owned by the Service, an endpoint per Pod: no
// kube-controller-manager runs here), and its export.
func exportService(t *testing.T, m *testMember, ns, name string, ports []v1.ServicePort, eps localSlice) {
	t.Helper()
	ctx := context.Background()
	svc, err := m.kube.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		svc, err = m.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-local", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, v1.SchemeGroupVersion.WithKind("Service"))},
			Annotations: map[string]string{
				// What the EndpointSlice controller records: when the change
				// the slice carries happened.
				v1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano),
			}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       eps.ports,
	}
	for i, addr := range eps.addrs {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To("node-1"),
			TargetRef: podOf(ns, name, i),
		})
	}
	if _, err := m.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	createExport(t, m, ns, name)
}

// podOf is the target the EndpointSlice controller writes for the i-th
// Pod of Service name.
func podOf(ns, name string, i int) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i)}
}

// waitMetric waits until the controller's /metrics holds line, e.g.
// `mcs_controller_clusters 3`; what is a line that says what.
func (r *runningController) waitMetric(t *testing.T, what, line string) {
	t.Helper()
	eventually(t, 30*time.Second, what, func() (bool, string) {
		out, err := httpGet("http://" + r.metrics + "/metrics")
		return strings.Contains(out, line), "no " + line + errString(err)
	})
}

// metricLine returns the lines of a /metrics text that start with name.
func metricLine(out, name string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, name) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// setExported sets the exportedLabels and exportedAnnotations of m's export.
func setExported(t *testing.T, m *testMember, ns, name string, labels, annotations map[string]string) {
	t.Helper()
	api := m.mcs.MulticlusterV1beta1().ServiceExports(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		se, err := api.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		se.Spec.ExportedLabels, se.Spec.ExportedAnnotations = labels, annotations
		_, err = api.Update(context.Background(), se, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func createExport(t *testing.T, m *testMember, ns, name string) {
	t.Helper()
	_, err := m.mcs.MulticlusterV1beta1().ServiceExports(ns).Create(context.Background(), &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func deleteExport(t *testing.T, m *testMember, ns, name string) {
	t.Helper()
	if err := m.mcs.MulticlusterV1beta1().ServiceExports(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createExternalName(t *testing.T, m *testMember, ns, name string) {
	t.Helper()
	_, err := m.kube.CoreV1().Services(ns).Create(context.Background(), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "example.com"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createExport(t, m, ns, name)
}

func waitImport(t *testing.T, m *testMember, ns, name string, ok func(*mcsv1beta1.ServiceImport) bool) *mcsv1beta1.ServiceImport {
	t.Helper()
	var got *mcsv1beta1.ServiceImport
	eventually(t, 60*time.Second, fmt.Sprintf("import %s/%s in %s", ns, name, m.id), func() (bool, string) {
		si, err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = si
		return ok(si), describeImport(si)
	})
	return got
}

// waitExportConditions waits until an export's conditions read want, e.g.
// "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts".
func waitExportConditions(t *testing.T, m *testMember, ns, name, want string) *mcsv1beta1.ServiceExport {
	t.Helper()
	var se *mcsv1beta1.ServiceExport
	eventually(t, 60*time.Second, fmt.Sprintf("conditions of export %s/%s in %s", ns, name, m.id), func() (bool, string) {
		var err error
		se, err = m.mcs.MulticlusterV1beta1().ServiceExports(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, typ := range []string{"Valid", "Ready", "Conflict"} {
			if c := meta.FindStatusCondition(se.Status.Conditions, typ); c != nil {
				got = append(got, fmt.Sprintf("%s=%s/%s", typ, c.Status, c.Reason))
			}
		}
		s := strings.Join(got, " ")
		return s == want, s
	})
	return se
}

// waitEvent waits for an event with reason on ServiceExport ns/name.
func waitEvent(t *testing.T, m *testMember, ns, name, reason string) {
	t.Helper()
	waitEventOn(t, m, "ServiceExport", ns, name, reason)
}

func waitEventOn(t *testing.T, m *testMember, kind, ns, name, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("a %s event on %s %s/%s in %s", reason, kind, ns, name, m.id), func() (bool, string) {
		events, err := m.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == kind {
				got = append(got, e.Reason)
				if strings.Contains(e.Reason, reason) {
					return true, ""
				}
			}
		}
		return false, strings.Join(got, ",")
	})
}

func importedSlices(t *testing.T, m *testMember, ns, name string) []discoveryv1.EndpointSlice {
	t.Helper()
	list, err := m.kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitSlices waits until a member's imported slices of ns/name read want:
// "<source>=<addrs> ports <name:port,...>" per source cluster, sorted, ";"
// separated.
func waitSlices(t *testing.T, m *testMember, ns, name, want string) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("imported slices of %s/%s in %s", ns, name, m.id), func() (bool, string) {
		got := slicesString(importedSlices(t, m, ns, name))
		return got == want, got
	})
}

func slicesString(slices []discoveryv1.EndpointSlice) string {
	var parts []string
	for _, s := range slices {
		var addrs, ports []string
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0)))
		}
		sort.Strings(addrs)
		sort.Strings(ports)
		parts = append(parts, fmt.Sprintf("%s=%s ports %s", s.Labels[mcsv1beta1.LabelSourceCluster], strings.Join(addrs, ","), strings.Join(ports, ",")))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// checkSliceMetadata checks the labels and owner of imported slices, and
// that kube-proxy would accept them.
func checkSliceMetadata(t *testing.T, m *testMember, ns, name string) {
	t.Helper()
	si, err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := &mcsproxy.Options{TrustedManagers: []string{mcsproxy.DefaultManagedBy}}
	for _, s := range importedSlices(t, m, ns, name) {
		if s.Labels[discoveryv1.LabelManagedBy] != mcsproxy.DefaultManagedBy {
			t.Errorf("%s: managed-by %q", s.Name, s.Labels[discoveryv1.LabelManagedBy])
		}
		// kubernetes.io/service-name names the import's synthetic
		// Service, never a local one: kube-proxy hands the slice on as it is.
		if !mcsproxy.IsMultiClusterEndpointSlice(&s) || !mcsproxy.SharesImportService(&s) {
			t.Errorf("%s is not an MCS slice naming its import's synthetic Service: %v", s.Name, s.Labels)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != si.UID || s.OwnerReferences[0].Kind != "ServiceImport" {
			t.Errorf("%s: owner references %v, want the ServiceImport %s", s.Name, s.OwnerReferences, si.UID)
		}
		// The source's node names stay for its own proxies, in its own
		// member only; hints are the import's (no trafficDistribution:
		// none); Pods stay private.
		source := s.Labels[mcsv1beta1.LabelSourceCluster]
		for _, e := range s.Endpoints {
			if own := source == m.id; (e.NodeName != nil && *e.NodeName == "node-1") != own || e.Hints != nil || e.TargetRef != nil {
				t.Errorf("%s in %s: endpoint %v: want the source's node name node-1 in the source's member only, no hints, no target", s.Name, m.id, e)
			}
		}
		for _, proxyIn := range []string{source, "elsewhere"} {
			opts.LocalClusterID = proxyIn
			got, err := mcsproxy.EndpointSliceForImport(&s, opts)
			if err != nil {
				t.Errorf("kube-proxy would reject %s: %v", s.Name, err)
				continue
			}
			for _, e := range got.Endpoints {
				if keep := proxyIn == source && source == m.id; (e.NodeName != nil) != keep {
					t.Errorf("%s as kube-proxy of %s programs it: node name %v, want kept=%v", s.Name, proxyIn, e.NodeName, keep)
				}
			}
		}
	}
	opts.ClusterSetIPCIDRs, _ = mcsproxy.ParseCIDRs(mcsproxy.DefaultClusterSetIPCIDRs)
	if _, err := mcsproxy.ServiceForImport(si, opts); err != nil {
		t.Errorf("kube-proxy would reject the import: %v", err)
	}
}

// snapshot describes the imports and slices of ns/name in every member
// with their resource versions and clusterset IPs.
func snapshot(t *testing.T, members []*testMember, ns, name string) string {
	t.Helper()
	var parts []string
	for _, m := range members {
		si, err := m.mcs.MulticlusterV1beta1().ServiceImports(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s import rv=%s ips=%v", m.id, si.ResourceVersion, si.Spec.IPs))
		for _, s := range importedSlices(t, m, ns, name) {
			parts = append(parts, fmt.Sprintf("%s slice %s rv=%s", m.id, s.Name, s.ResourceVersion))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func sliceVersions(t *testing.T, m *testMember, ns, name, source string) string {
	var parts []string
	for _, s := range importedSlices(t, m, ns, name) {
		if s.Labels[mcsv1beta1.LabelSourceCluster] == source {
			parts = append(parts, s.Name+"@"+s.ResourceVersion)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func describeImport(si *mcsv1beta1.ServiceImport) string {
	if si == nil {
		return "<nil>"
	}
	ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
	return fmt.Sprintf("type=%s ips=%v ports=%s families=%v clusters=%s ready=%v", si.Spec.Type, si.Spec.IPs, portsString(si.Spec.Ports), si.Spec.IPFamilies, clustersString(si), ready)
}

func importReady(si *mcsv1beta1.ServiceImport) bool {
	return meta.IsStatusConditionTrue(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
}

func portsString(ports []mcsv1beta1.ServicePort) string {
	var out []string
	for _, p := range ports {
		out = append(out, fmt.Sprintf("%s:%d/%s", p.Name, p.Port, p.Protocol))
	}
	return strings.Join(out, ",")
}

func clustersString(si *mcsv1beta1.ServiceImport) string {
	var out []string
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return strings.Join(out, ",")
}

func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), nil
}

// tcpLink forwards TCP connections to an apiserver and can be cut, which
// to the controller looks like the member's network going away.
type tcpLink struct {
	target string
	l      net.Listener

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newTCPLink(t *testing.T, target string) *tcpLink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &tcpLink{target: target, l: l, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { l.Close(); k.cut() })
	go k.serve()
	return k
}

func (k *tcpLink) addr() string { return k.l.Addr().String() }

func (k *tcpLink) serve() {
	for {
		in, err := k.l.Accept()
		if err != nil {
			return
		}
		k.mu.Lock()
		down := k.down
		if !down {
			k.conns[in] = true
		}
		k.mu.Unlock()
		if down {
			in.Close()
			continue
		}
		go func() {
			out, err := net.Dial("tcp", k.target)
			if err != nil {
				in.Close()
				return
			}
			k.mu.Lock()
			k.conns[out] = true
			k.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			_, _ = io.Copy(in, out)
			in.Close()
		}()
	}
}

// cut closes every connection and refuses new ones until restore.
func (k *tcpLink) cut() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.down = true
	for c := range k.conns {
		c.Close()
	}
	k.conns = map[net.Conn]bool{}
}

func (k *tcpLink) restore() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.down = false
}

// TestMCSControllerWithAMemberDownAtStart starts the controller while one
// member cannot be reached: the others work without it (an export of
// cluster-a is imported in cluster-a), the unreachable context is counted
// as pending, and once the member answers it joins the running controller
// and is imported into.
func TestMCSControllerWithAMemberDownAtStart(t *testing.T) {
	ms, kubeconfig := membersWithDemo(t, "cluster-a", "cluster-b")
	a, b := ms[0], ms[1]
	b.link.cut()

	const ttl = 8 * time.Second
	first := startController(t, kubeconfig, "replica-1", ttl)
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	waitImport(t, a, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		return len(si.Spec.IPs) == 1 && clustersString(si) == "cluster-a"
	})
	waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
	first.waitMetric(t, "the unreachable member in the controller's metrics", `mcs_controller_inventory_members{source="context",state="pending"} 1`)

	// cluster-b answers: it joins the running controller, no restart.
	b.link.restore()
	waitImport(t, b, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		return len(si.Spec.IPs) == 1 && clustersString(si) == "cluster-a"
	})
	waitSlices(t, b, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
	first.waitMetric(t, "both members joined", `mcs_controller_inventory_members{source="context",state="joined"} 2`)
	select {
	case <-first.exited:
		t.Fatalf("the controller exited when cluster-b came back: %v", first.err)
	default:
	}
}

// TestMCSControllerRefusesClusterSetRangesOverlappingServices: a member
// whose Service range overlaps the clusterset ranges would have clusterset
// IPs that are some Service's IPs. The controller refuses to run, saying
// which range of which member.
func TestMCSControllerRefusesClusterSetRangesOverlappingServices(t *testing.T) {
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	a := startMember(t, etcd, dir, "cluster-a")
	_, err := a.kube.NetworkingV1().ServiceCIDRs().Create(context.Background(), &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "overlap"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.250.16.0/24"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeControllerKubeconfig(t, dir, []*testMember{a})
	r := startController(t, kubeconfig, "replica-1", 8*time.Second)
	select {
	case <-r.exited:
		if r.err == nil || !strings.Contains(r.err.Error(), "ServiceCIDR overlap of cluster cluster-a 10.250.16.0/24") {
			t.Errorf("the controller exited with %v, want an error naming the overlapping range", r.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the controller runs with a clusterset range inside a member's Service range")
	}
}

// TestMCSControllerExportNamespacesPerMember: the operator lets cluster-b
// (another team's) export only from its own namespace. Its export of a
// name in a shared namespace is refused and publishes nothing; its export
// from its own namespace is imported everywhere.
func TestMCSControllerExportNamespacesPerMember(t *testing.T) {
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	a := startMember(t, etcd, dir, "cluster-a")
	b := startMember(t, etcd, dir, "cluster-b")
	for _, m := range []*testMember{a, b} {
		createNamespace(t, m, "demo")
		createNamespace(t, m, "team-b")
	}
	kubeconfig := writeControllerKubeconfig(t, dir, []*testMember{a, b})
	startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, func(o *app.Options) {
		o.ExportNamespaces = []string{"cluster-a=*", "cluster-b=team-b"}
	})
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.66"))
	exportService(t, b, "team-b", "api", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	se := waitExportConditions(t, b, "demo", "web", "Valid=False/NamespaceNotAllowed Ready=False/Failed Conflict=False/NoConflicts")
	if msg := meta.FindStatusCondition(se.Status.Conditions, "Valid").Message; !strings.Contains(msg, "cluster-b may export only from namespaces [team-b]") {
		t.Errorf("Valid message does not say why: %s", msg)
	}
	waitExportConditions(t, a, "demo", "web", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
	for _, m := range []*testMember{a, b} {
		waitSlices(t, m, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a" })
		waitSlices(t, m, "team-b", "api", "cluster-b=10.2.0.1 ports http:8080")
	}

	// Consumer clusters: team-b/api is imported only where its exporter
	// says; changing the list converges without a restart.
	ctx := context.Background()
	setExported(t, b, "team-b", "api", nil, map[string]string{"multiclusterservices.k8s.io/consumer-clusters": "cluster-b"})
	eventually(t, 30*time.Second, "team-b/api gone from cluster-a, a non-consumer", func() (bool, string) {
		_, err := a.mcs.MulticlusterV1beta1().ServiceImports("team-b").Get(ctx, "api", metav1.GetOptions{})
		n := len(importedSlices(t, a, "team-b", "api"))
		return apierrors.IsNotFound(err) && n == 0, fmt.Sprintf("import err %v, %d slices", err, n)
	})
	waitSlices(t, b, "team-b", "api", "cluster-b=10.2.0.1 ports http:8080")
	setExported(t, b, "team-b", "api", nil, map[string]string{"multiclusterservices.k8s.io/consumer-clusters": "cluster-a,cluster-b"})
	waitSlices(t, a, "team-b", "api", "cluster-b=10.2.0.1 ports http:8080")

	// Provider clusters: a exports team-b/api too, and serves it, until
	// b's export (the oldest, whose annotations count) names b alone.
	exportService(t, a, "team-b", "api", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.8"))
	for _, m := range []*testMember{a, b} {
		waitSlices(t, m, "team-b", "api", "cluster-a=10.1.0.8 ports http:8080;cluster-b=10.2.0.1 ports http:8080")
	}
	setExported(t, b, "team-b", "api", nil, map[string]string{"multiclusterservices.k8s.io/provider-clusters": "cluster-b"})
	for _, m := range []*testMember{a, b} {
		waitSlices(t, m, "team-b", "api", "cluster-b=10.2.0.1 ports http:8080")
		waitImport(t, m, "team-b", "api", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-b" })
	}
	se = waitExportConditions(t, a, "team-b", "api", "Valid=True/Valid Ready=False/NotAProvider Conflict=True/AnnotationsConflict")
	if msg := meta.FindStatusCondition(se.Status.Conditions, "Ready").Message; !strings.Contains(msg, "[cluster-b]") {
		t.Errorf("Ready message does not name the providers: %s", msg)
	}
}

package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestMCSControllerDerivedMember serves cluster-c in derived mode (its
// proxies would be upstream kube-proxy) beside two native members, with
// the admission policies installed in c so that every derived write is
// shown to pass them: c's imports are represented by derived Services and
// their EndpointSlices, the import's ips are those Services' cluster IPs,
// and c holds no MCS slice a proxy could not use. Then c is switched to
// native mode (its derived Service serves out the grace period, then goes)
// and back, and the name is unexported.
func TestMCSControllerDerivedMember(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	a := startMember(t, etcd, dir, "cluster-a")
	b := startMember(t, etcd, dir, "cluster-b")
	c := startMember(t, etcd, dir, "cluster-c")
	members := []*testMember{a, b, c}
	for _, m := range members {
		createNamespace(t, m, "demo")
	}
	kubeconfig := writeControllerKubeconfig(t, dir, members)
	derived := func(o *app.Options) { o.DerivedMembers = []string{"cluster-c"}; o.DerivedGrace = 5 * time.Second }
	ctrl := startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, derived)

	// A name squatted in c by a Service somebody else made: never touched.
	squatted := export.DerivedName("demo", "squat")
	if _, err := c.kube.CoreV1().Services("demo").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: squatted},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "mine"}, Ports: []v1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1", "10.1.0.2"))
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	const both = "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1 ports http:8080"
	var vip string
	for _, m := range []*testMember{a, b} {
		si := waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return len(si.Spec.IPs) == 1 && importReady(si) })
		vip = si.Spec.IPs[0]
		if _, ok := si.Annotations[export.AnnotationDerivedService]; ok {
			t.Errorf("%s is native but its import names a derived Service", m.id)
		}
		waitSlices(t, m, "demo", "web", both)
	}

	name := export.DerivedName("demo", "web")
	si, svc := waitDerived(t, c, "demo", "web", both)
	if si.Spec.IPs[0] == vip {
		t.Errorf("c's import carries the clusterset IP %s, want its derived Service's", vip)
	}
	if svc.Spec.Type != v1.ServiceTypeClusterIP || svc.Spec.Selector != nil || svc.Spec.ClusterIP == v1.ClusterIPNone ||
		portsOf(svc) != "http:80/TCP" {
		t.Errorf("derived Service %s: %+v, want a selector-less ClusterIP Service with http:80", name, svc.Spec)
	}
	if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].UID != si.UID {
		t.Errorf("derived Service owners %v, want the import %s", svc.OwnerReferences, si.UID)
	}
	for _, s := range importedSlices(t, c, "demo", "web") {
		want := export.DerivedSliceName(name, s.Labels[mcsv1beta1.LabelSourceCluster], "")
		if s.Name != want || s.Labels[discoveryv1.LabelServiceName] != name || s.Labels[discoveryv1.LabelManagedBy] != mcsproxy.DefaultManagedBy ||
			len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Service" || s.OwnerReferences[0].UID != svc.UID {
			t.Errorf("derived slice %s: labels %v owners %v, want %s of Service %s", s.Name, s.Labels, s.OwnerReferences, want, name)
		}
	}

	// Attacks on the derived Service by a user of c, in a member installed
	// without the admission policies (the controller must hold alone):
	// pointed at the user's pods and exposed on node ports, it is put
	// back, and said so.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := c.kube.CoreV1().Services("demo").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Selector = map[string]string{"app": "evil"}
		s.Spec.Type = v1.ServiceTypeNodePort
		_, err = c.kube.CoreV1().Services("demo").Update(ctx, s, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the derived Service put back", func() (bool, string) {
		s, err := c.kube.CoreV1().Services("demo").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return s.Spec.Type == v1.ServiceTypeClusterIP && s.Spec.Selector == nil && s.Spec.Ports[0].NodePort == 0,
			fmt.Sprintf("type %s selector %v ports %v", s.Spec.Type, s.Spec.Selector, s.Spec.Ports)
	})
	waitEventOn(t, c, "ServiceImport", "demo", "web", "DerivedServiceRestored")
	// A derived Service somebody deletes comes back.
	if err := c.kube.CoreV1().Services("demo").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDerived(t, c, "demo", "web", both)
	// A Service made first under a derived name, with the controller's
	// labels and no owner: never adopted, the import not served.
	forgedName := export.DerivedName("demo", "forged")
	if _, err := c.kube.CoreV1().Services("demo").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: forgedName, Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy, mcsv1beta1.LabelServiceName: "forged"}},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "evil"}, Ports: []v1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exportService(t, a, "demo", "forged", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.4"))
	waitEventOn(t, c, "ServiceImport", "demo", "forged", "DerivedServiceConflict")
	if s, err := c.kube.CoreV1().Services("demo").Get(ctx, forgedName, metav1.GetOptions{}); err != nil || s.Spec.Selector["app"] != "evil" || len(s.OwnerReferences) > 0 {
		t.Errorf("the forged Service was adopted: %v %v", s, err)
	}
	if n := len(importedSlices(t, c, "demo", "forged")); n != 0 {
		t.Errorf("%d slices were written for a derived Service somebody else made", n)
	}

	// With the admission policies, the same writes are refused, and the
	// controller's own still go through.
	installAdmissionPolicies(t, c)
	// As deploy/overlays/derived-member installs them: the controller
	// writes native names as slices of local Services for c's proxies.
	if err := c.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "multicluster.x-k8s.io-controller-native-member", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.kube.CoreV1().Services("demo").Delete(ctx, name, metav1.DeleteOptions{}); !deniedByPolicy(err) {
		t.Errorf("deleting the derived Service with the policies installed: %v, want refused by the admission policy", err)
	}

	// Endpoints follow their source.
	setEndpoints(t, b, "demo", "web", "10.2.0.1", "10.2.0.2")
	waitDerived(t, c, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1,10.2.0.2 ports http:8080")

	// A headless export: a headless derived Service, no IPs, the slices.
	exportHeadless(t, a, "demo", "db", "10.1.0.9")
	waitSlices(t, c, "demo", "db", "cluster-a=10.1.0.9 ports tcp:5432")
	eventually(t, 30*time.Second, "the headless derived Service of demo/db in cluster-c", func() (bool, string) {
		svc, err := c.kube.CoreV1().Services("demo").Get(ctx, export.DerivedName("demo", "db"), metav1.GetOptions{})
		si, err2 := c.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "db", metav1.GetOptions{})
		if err != nil || err2 != nil {
			return false, errString(err) + errString(err2)
		}
		return svc.Spec.ClusterIP == v1.ClusterIPNone && len(si.Spec.IPs) == 0 && si.Spec.Type == mcsv1beta1.Headless,
			fmt.Sprintf("clusterIP %q, import %s", svc.Spec.ClusterIP, describeImport(si))
	})

	// RemoteAndLocal in a derived member: c, which has no Service
	// demo/web, gets one, and the controller writes the other clusters'
	// endpoints as its slices (any Service proxy then serves them).
	setExported(t, a, "demo", "web", nil, map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)})
	setExported(t, b, "demo", "web", nil, map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.RemoteAndLocal)})
	eventually(t, 30*time.Second, "c's Service demo/web serving a's and b's endpoints", func() (bool, string) {
		svc, err := c.kube.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, s := range derivedSlicesOf(t, c, "demo", "web") {
			if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != svc.UID || !strings.HasPrefix(s.Name, name+"-local-") {
				return false, fmt.Sprintf("slice %s owners %v", s.Name, s.OwnerReferences)
			}
			got = append(got, slicesString([]discoveryv1.EndpointSlice{s}))
		}
		slices.Sort(got)
		return svc.Spec.Selector == nil && strings.Join(got, ";") == "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1,10.2.0.2 ports http:8080", strings.Join(got, ";")
	})
	waitImport(t, c, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		cond := meta.FindStatusCondition(si.Status.Conditions, "NativeNames")
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == "ServiceCreated"
	})

	// LocalFirst needs the multi-cluster kube-proxy: c says so, and its
	// Service and slices for RemoteAndLocal go.
	setExported(t, a, "demo", "web", nil, map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.LocalFirst)})
	setExported(t, b, "demo", "web", nil, map[string]string{mcsproxy.AnnotationNativeNames: string(mcsproxy.LocalFirst)})
	waitImport(t, c, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		cond := meta.FindStatusCondition(si.Status.Conditions, "NativeNames")
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == "DerivedMember" && strings.Contains(cond.Message, "LocalFirst")
	})
	eventually(t, 30*time.Second, "c's Service demo/web and its slices gone with RemoteAndLocal", func() (bool, string) {
		_, err := c.kube.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
		n := len(derivedSlicesOf(t, c, "demo", "web"))
		return apierrors.IsNotFound(err) && n == 0, fmt.Sprintf("%v, %d slices", err, n)
	})

	// The squatted name: the import is not served, and the Service is
	// left as it was.
	exportService(t, a, "demo", "squat", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.3"))
	waitEventOn(t, c, "ServiceImport", "demo", "squat", "DerivedServiceConflict")
	if s, err := c.kube.CoreV1().Services("demo").Get(ctx, squatted, metav1.GetOptions{}); err != nil || s.Spec.Selector["app"] != "mine" || len(s.OwnerReferences) > 0 {
		t.Errorf("the squatter's Service was changed: %v %v", s, err)
	}
	if n := len(importedSlices(t, c, "demo", "squat")); n != 0 {
		t.Errorf("%d slices were written for a Service somebody else owns", n)
	}

	// --- c switches to native mode: the import gets the clusterset IP and
	// MCS slices; the derived Service keeps serving for the grace period.
	ctrl.stop()
	ctrl = startControllerWith(t, kubeconfig, "replica-2", 8*time.Second, func(o *app.Options) { o.DerivedGrace = 5 * time.Second })
	// First the proxies are given the clusterset IP to program while the
	// import still names its derived Service (DNS answers the derived IP).
	waitImport(t, c, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		return si.Annotations[export.AnnotationDerivedService] == name && si.Annotations[mcsproxy.AnnotationClusterSetIPs] == vip &&
			!slices.Equal(si.Spec.IPs, []string{vip})
	})
	waitImport(t, c, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool {
		_, derived := si.Annotations[export.AnnotationDerivedService]
		_, announced := si.Annotations[mcsproxy.AnnotationClusterSetIPs]
		return !derived && !announced && slices.Equal(si.Spec.IPs, []string{vip})
	})
	switched := time.Now()
	if svc, err := c.kube.CoreV1().Services("demo").Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the derived Service went at once on the switch: %v", err)
	} else if n := len(derivedSlicesOf(t, c, "demo", name)); n != 2 {
		t.Errorf("the derived Service %s serves out its grace with %d slices, want 2", svc.Name, n)
	}
	eventually(t, 30*time.Second, "the derived Service gone after the grace period", func() (bool, string) {
		_, err := c.kube.CoreV1().Services("demo").Get(ctx, name, metav1.GetOptions{})
		n := len(derivedSlicesOf(t, c, "demo", name))
		return apierrors.IsNotFound(err) && n == 0, fmt.Sprintf("%v, %d derived slices", err, n)
	})
	if waited := time.Since(switched); waited < 3*time.Second {
		t.Errorf("the derived Service went %s after the switch, before the 5s grace", waited)
	}
	waitSlices(t, c, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1,10.2.0.2 ports http:8080")
	checkSliceMetadata(t, c, "demo", "web")

	// --- And back to derived mode.
	ctrl.stop()
	ctrl = startControllerWith(t, kubeconfig, "replica-3", 8*time.Second, derived)
	waitDerived(t, c, "demo", "web", "cluster-a=10.1.0.1,10.1.0.2 ports http:8080;cluster-b=10.2.0.1,10.2.0.2 ports http:8080")
	// The clusterset IP stays the import's in the native members.
	for _, m := range []*testMember{a, b} {
		waitImport(t, m, "demo", "web", func(si *mcsv1beta1.ServiceImport) bool { return slices.Equal(si.Spec.IPs, []string{vip}) })
	}

	// --- Unexported everywhere: c holds nothing of it.
	deleteExport(t, a, "demo", "web")
	deleteExport(t, b, "demo", "web")
	eventually(t, 30*time.Second, "demo/web gone from cluster-c", func() (bool, string) {
		_, err := c.mcs.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "web", metav1.GetOptions{})
		_, err2 := c.kube.CoreV1().Services("demo").Get(ctx, name, metav1.GetOptions{})
		n := len(importedSlices(t, c, "demo", "web"))
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(err2) && n == 0, fmt.Sprintf("import %v, Service %v, %d slices", err, err2, n)
	})
	ctrl.stop()
}

// waitDerived waits until derived member m serves import ns/name through
// its derived Service: the import names it and carries its cluster IPs,
// it is Ready, and its slices read want (as waitSlices) with none but the
// derived Service's. It returns the import and the derived Service.
func waitDerived(t *testing.T, m *testMember, ns, name, want string) (*mcsv1beta1.ServiceImport, *v1.Service) {
	t.Helper()
	ctx := context.Background()
	derived := export.DerivedName(ns, name)
	var si *mcsv1beta1.ServiceImport
	var svc *v1.Service
	eventually(t, 60*time.Second, fmt.Sprintf("%s/%s served through %s in %s", ns, name, derived, m.id), func() (bool, string) {
		var err error
		if si, err = m.mcs.MulticlusterV1beta1().ServiceImports(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		if svc, err = m.kube.CoreV1().Services(ns).Get(ctx, derived, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		got := slicesString(importedSlices(t, m, ns, name))
		all := len(importedSlices(t, m, ns, name)) == len(derivedSlicesOf(t, m, ns, derived))
		ok := si.Annotations[export.AnnotationDerivedService] == derived && len(si.Spec.IPs) > 0 &&
			slices.Equal(si.Spec.IPs, svc.Spec.ClusterIPs) && importReady(si) && got == want && all
		return ok, fmt.Sprintf("%s annotation %q, Service IPs %v, slices %s (all derived: %v)", describeImport(si), si.Annotations[export.AnnotationDerivedService], svc.Spec.ClusterIPs, got, all)
	})
	return si, svc
}

// derivedSlicesOf returns the EndpointSlices of local Service service.
func derivedSlicesOf(t *testing.T, m *testMember, ns, service string) []discoveryv1.EndpointSlice {
	t.Helper()
	list, err := m.kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func portsOf(svc *v1.Service) string {
	var out []string
	for _, p := range svc.Spec.Ports {
		out = append(out, fmt.Sprintf("%s:%d/%s", p.Name, p.Port, p.Protocol))
	}
	return strings.Join(out, ",")
}

// setEndpoints replaces the addresses of the local slice exportService made.
func setEndpoints(t *testing.T, m *testMember, ns, name string, addrs ...string) {
	t.Helper()
	ctx := context.Background()
	s, err := m.kube.DiscoveryV1().EndpointSlices(ns).Get(ctx, name+"-local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := true
	s.Endpoints = nil
	for i, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, TargetRef: podOf(ns, name, i)})
	}
	if _, err := m.kube.DiscoveryV1().EndpointSlices(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// exportHeadless exports a headless Service with one endpoint on port
// tcp:5432.
func exportHeadless(t *testing.T, m *testMember, ns, name, addr string) {
	t.Helper()
	ctx := context.Background()
	if _, err := m.kube.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Selector: map[string]string{"app": name}, Ports: []v1.ServicePort{{Name: "tcp", Port: 5432}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exportService(t, m, ns, name, servicePorts("tcp", 5432), endpoints("tcp", 5432, addr))
}

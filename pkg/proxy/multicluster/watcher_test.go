package multicluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientfeatures "k8s.io/client-go/features"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
)

func serviceImportCRD(served ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: ServiceImportCRDName}}
	for _, v := range served {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true})
	}
	crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	return crd
}

// waitCalls collects proxier calls until they include every wanted call,
// in order, and returns them.
func (f *fixture) waitCalls(want ...string) []string {
	return f.waitFor(containsInOrder, want)
}

// waitCallsAnyOrder is waitCalls for calls whose order depends on which
// informer delivers first.
func (f *fixture) waitCallsAnyOrder(want ...string) []string {
	return f.waitFor(func(got, want []string) bool {
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	}, want)
}

func (f *fixture) waitFor(match func(got, want []string) bool, want []string) []string {
	f.t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = append(got, f.provider.takeCalls()...)
		if match(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("proxier calls %q do not include %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestWatcherFollowsTheCRD drives the watcher with fake API clients and
// checks what reaches the proxier as the CRD, imports and slices change.
func TestWatcherFollowsTheCRD(t *testing.T) {
	// mcs-api's generated fake predates streaming lists: informers on it
	// would wait for a bookmark it never sends. Real apiservers have them.
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, featuregate.Feature(clientfeatures.WatchListClient), false)
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	slice := mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1")
	localSlice := mcsSlice("ns", "local-abc", "web", "cluster-a", "10.1.0.9")
	localSlice.Labels = map[string]string{"kubernetes.io/service-name": "local"}
	si := serviceImport("ns", "web", 0, "10.250.0.10")
	mcs := mcsfake.NewSimpleClientset(si)
	// The tracker without field management: Kubernetes 1.34's
	// field-managed fake cannot type a CRD it is given to create, and the
	// tests run on every release kube-proxy is built for.
	ext := apiextensionsfake.NewSimpleClientset()

	// What kube-proxy's own informers deliver: a local Service's slice
	// goes straight through, an MCS slice waits for its import.
	f.proxier.OnServiceSynced()
	f.proxier.OnEndpointSliceAdd(localSlice)
	f.proxier.OnEndpointSliceAdd(slice)
	f.proxier.OnEndpointSlicesSynced()
	f.expectCalls("SliceAdd ns/local-abc")
	w := &Watcher{Proxier: f.proxier, MCSClient: mcs, CRDClient: ext}
	w.Start(ctx)

	// No CRD: the proxier's first sync is released, nothing else happens.
	got := f.waitCalls("ServiceSynced", "SlicesSynced")
	if len(got) != 2 {
		t.Errorf("without the CRD the proxier got %q", got)
	}

	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, serviceImportCRD("v1alpha1", "v1beta1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = f.waitCallsAnyOrder("SliceAdd ns/web-a", "ServiceAdd ns/web.clusterset")
	for _, c := range got {
		if strings.Contains(c, "local-abc") {
			t.Errorf("a local Service's slice was handled again: %q", c)
		}
	}

	// Updates and deletions of imports and slices follow.
	changed := si.DeepCopy()
	changed.Spec.Ports[0].Port = 8080
	if _, err := mcs.MulticlusterV1beta1().ServiceImports("ns").Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitCalls("ServiceUpdate ns/web.clusterset")
	moved := slice.DeepCopy()
	moved.Endpoints[0].Addresses = []string{"10.1.0.2"}
	f.proxier.OnEndpointSliceUpdate(slice, moved)
	f.waitCalls("SliceUpdate ns/web-a")
	if got := f.provider.slices["ns/web-a"]; got == nil || got.Endpoints[0].Addresses[0] != "10.1.0.2" {
		t.Errorf("proxier holds %+v, want the updated slice", got)
	}

	// The CRD goes: everything it brought goes.
	if err := crds.Delete(ctx, ServiceImportCRDName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitCalls("ServiceDelete ns/web.clusterset", "SliceDelete ns/web-a")
	if len(f.provider.services) != 0 || len(f.provider.slices) != 1 || f.provider.slices["ns/local-abc"] == nil {
		t.Errorf("after the CRD was deleted the proxier holds %v %v, want only the local Service's slice", f.provider.services, f.provider.slices)
	}

	// An older CRD serving only v1alpha1 works too.
	alpha := &mcsv1alpha1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
		Spec: mcsv1alpha1.ServiceImportSpec{Type: mcsv1alpha1.ClusterSetIP, IPs: []string{"10.250.0.10"},
			Ports: []mcsv1alpha1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
	}
	if _, err := mcs.MulticlusterV1alpha1().ServiceImports("ns").Create(ctx, alpha, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Create(ctx, serviceImportCRD("v1alpha1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The MCS slice was kept while the API was away: kube-proxy's
	// informer does not deliver it again.
	f.waitCallsAnyOrder("SliceAdd ns/web-a", "ServiceAdd ns/web.clusterset")
	if got := f.provider.slices["ns/web-a"]; got == nil || got.Endpoints[0].Addresses[0] != "10.1.0.2" {
		t.Errorf("after the API came back the proxier holds %+v, want the last state of the slice", got)
	}
	if svc := f.provider.services["ns/web.clusterset"]; svc == nil || svc.Spec.Ports[0].Port != 80 {
		t.Errorf("v1alpha1 import not programmed as it is: %+v", svc)
	}
	if err := mcs.MulticlusterV1alpha1().ServiceImports("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got = f.waitCalls("ServiceDelete ns/web.clusterset", "SliceDelete ns/web-a")
	if slices.Contains(got, "ServiceSynced") {
		t.Errorf("synced was forwarded twice")
	}
}

// TestWatcherCannotReadTheCRD checks that local Services are not held
// hostage when kube-proxy may not read the CRD (RBAC not applied yet): the
// first sync is released after the sync timeout.
func TestWatcherCannotReadTheCRD(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ext := apiextensionsfake.NewSimpleClientset()
	ext.PrependReactor("list", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(apiextensionsv1.Resource("customresourcedefinitions"), "", errors.New("no RBAC"))
	})
	f.proxier.OnServiceSynced()
	f.proxier.OnEndpointSlicesSynced()
	w := &Watcher{Proxier: f.proxier, MCSClient: mcsfake.NewSimpleClientset(), CRDClient: ext, SyncTimeout: 200 * time.Millisecond}
	start := time.Now()
	w.Start(ctx)
	f.waitCalls("ServiceSynced", "SlicesSynced")
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("first sync released after %v, before the timeout", waited)
	}
}

func crdServing(name string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := serviceImportCRD(versions...)
	crd.Name = name
	return crd
}

func clusterProperty(value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(aboutv1alpha1.SchemeGroupVersion.String())
	u.SetKind("ClusterProperty")
	u.SetName(aboutv1alpha1.ClusterIDProperty)
	_ = unstructured.SetNestedField(u.Object, value, "spec", "value")
	return u
}

// TestWatcherLearnsTheClusterID: the ClusterProperty naming the cluster is
// read before the proxier's first sync, so that the cluster's own
// endpoints are node-local from the first rules on, and followed after.
func TestWatcherLearnsTheClusterID(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, featuregate.Feature(clientfeatures.WatchListClient), false)
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	node := "node-1"
	slice := mcsSlice("ns", "web-a", "web", "cluster-a", "10.1.0.1")
	slice.Endpoints[0].NodeName = &node
	mcs := mcsfake.NewSimpleClientset(serviceImport("ns", "web", 0, "10.250.0.10"))
	ext := apiextensionsfake.NewSimpleClientset(serviceImportCRD("v1beta1"), crdServing(ClusterPropertyCRDName, "v1alpha1"))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{aboutv1alpha1.Resource: "ClusterPropertyList"}, clusterProperty("cluster-a"))
	// The cluster ID comes later than the imports.
	dyn.PrependReactor("list", "clusterproperties", func(clienttesting.Action) (bool, runtime.Object, error) {
		time.Sleep(300 * time.Millisecond)
		return false, nil, nil
	})

	f.proxier.OnServiceSynced()
	f.proxier.OnEndpointSliceAdd(slice)
	f.proxier.OnEndpointSlicesSynced()
	w := &Watcher{Proxier: f.proxier, MCSClient: mcs, CRDClient: ext, DynamicClient: dyn}
	w.Start(ctx)
	f.waitCalls("ServiceSynced", "SlicesSynced")
	if got := f.provider.slices["ns/web-a"]; got == nil || got.Endpoints[0].NodeName == nil || *got.Endpoints[0].NodeName != node {
		t.Fatalf("at the first sync the proxier holds %+v, want cluster-a's own endpoint on %s", got, node)
	}

	properties := dyn.Resource(aboutv1alpha1.Resource)
	if _, err := properties.Update(ctx, clusterProperty("cluster-b"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitCalls("SliceUpdate ns/web-a")
	if got := f.provider.slices["ns/web-a"]; got.Endpoints[0].NodeName != nil {
		t.Errorf("in cluster-b, cluster-a's endpoint keeps its node name: %+v", got.Endpoints[0])
	}
	if _, err := properties.Update(ctx, clusterProperty("cluster-a"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitCalls("SliceUpdate ns/web-a")
	if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, ClusterPropertyCRDName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitCalls("SliceUpdate ns/web-a")
	if id := f.proxier.LocalClusterID(); id != "" {
		t.Errorf("the cluster ID outlived its CRD: %q", id)
	}
}

// TestWatcherHoldsTheFirstSyncForEveryImport: the proxier's first sync
// comes after every import that existed at start-up reached it, not merely
// after the informer listed them, or a restart would program a ruleset
// without some clusterset IPs.
func TestWatcherHoldsTheFirstSyncForEveryImport(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, featuregate.Feature(clientfeatures.WatchListClient), false)
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 20000
	var objs []runtime.Object
	for i := range n {
		objs = append(objs, serviceImport("ns", fmt.Sprintf("web-%d", i), 0, fmt.Sprintf("10.250.%d.%d", i/250, i%250+1)))
	}
	mcs := mcsfake.NewSimpleClientset(objs...)
	ext := apiextensionsfake.NewSimpleClientset(serviceImportCRD("v1beta1"))
	f.proxier.OnServiceSynced()
	f.proxier.OnEndpointSlicesSynced()
	w := &Watcher{Proxier: f.proxier, MCSClient: mcs, CRDClient: ext}
	w.Start(ctx)
	got := f.waitCalls("ServiceSynced")
	added := 0
	for _, c := range got {
		if c == "ServiceSynced" {
			break
		}
		if strings.HasPrefix(c, "ServiceAdd ") {
			added++
		}
	}
	if added != n {
		t.Errorf("the first sync was released after %d of %d imports reached the proxier", added, n)
	}
}

// A CRD that starts serving v1beta1 beside v1alpha1 (an upgrade of
// mcs-api) moves the watch to v1beta1. The imports both versions show stay
// programmed throughout, with no withdrawal while the new watch lists; an
// import deleted in between goes.
func TestWatcherSwitchesVersionsWithoutWithdrawing(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, featuregate.Feature(clientfeatures.WatchListClient), false)
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	alpha := func(name, ip string) *mcsv1alpha1.ServiceImport {
		return &mcsv1alpha1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}},
			Spec: mcsv1alpha1.ServiceImportSpec{Type: mcsv1alpha1.ClusterSetIP, IPs: []string{ip},
				Ports: []mcsv1alpha1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}}},
		}
	}
	// The fake keeps each version apart; a real apiserver converts. web is
	// in both; gone only in v1alpha1, as if deleted during the switch.
	mcs := mcsfake.NewSimpleClientset(alpha("web", "10.250.0.10"), alpha("gone", "10.250.0.11"), serviceImport("ns", "web", 0, "10.250.0.10"))
	ext := apiextensionsfake.NewSimpleClientset(serviceImportCRD("v1alpha1"))
	f.proxier.OnServiceSynced()
	f.proxier.OnEndpointSlicesSynced()
	w := &Watcher{Proxier: f.proxier, MCSClient: mcs, CRDClient: ext}
	w.Start(ctx)
	f.waitCallsAnyOrder("ServiceAdd ns/web.clusterset", "ServiceAdd ns/gone.clusterset", "ServiceSynced", "SlicesSynced")

	crd := serviceImportCRD("v1alpha1", "v1beta1")
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := f.waitCalls("ServiceDelete ns/gone.clusterset")
	time.Sleep(200 * time.Millisecond)
	got = append(got, f.provider.takeCalls()...)
	if slices.Contains(got, "ServiceDelete ns/web.clusterset") {
		t.Errorf("the switch withdrew web: %q", got)
	}
	if svc := f.provider.services["ns/web.clusterset"]; svc == nil || svc.Spec.ClusterIP != "10.250.0.10" {
		t.Errorf("web is not programmed after the switch: %+v", svc)
	}
}

// TestInformerKeepsWhatProxiesRead: the import cache holds the spec, the
// manager label and the annotations a proxy acts on (native names, the
// derived Service), nothing else.
func TestInformerKeepsWhatProxiesRead(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns",
			Labels: map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy, "team": "a"},
			Annotations: map[string]string{
				mcsproxy.AnnotationNativeNames:       "LocalFirst",
				mcsproxy.AnnotationDerivedService:    "derived-gapqrqeg1j",
				mcsproxy.AnnotationClusterSetIPs:     "10.250.0.1",
				"kubectl.kubernetes.io/last-applied": "{...}",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "mcs-controller"}},
		},
		Spec:   mcsv1beta1.ServiceImportSpec{IPs: []string{"10.250.0.1"}},
		Status: mcsv1beta1.ServiceImportStatus{Clusters: []mcsv1beta1.ClusterStatus{{Cluster: "a"}}},
	}
	obj, err := keepWhatProxiesRead([]string{mcsproxy.DefaultManagedBy})(si)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*mcsv1beta1.ServiceImport)
	wantAnnotations := map[string]string{mcsproxy.AnnotationNativeNames: "LocalFirst", mcsproxy.AnnotationDerivedService: "derived-gapqrqeg1j",
		mcsproxy.AnnotationClusterSetIPs: "10.250.0.1"}
	if !maps.Equal(got.Annotations, wantAnnotations) || got.ManagedFields != nil || len(got.Status.Clusters) != 0 ||
		!maps.Equal(got.Labels, map[string]string{mcsproxy.LabelImportManagedBy: mcsproxy.DefaultManagedBy}) || len(got.Spec.IPs) != 1 {
		t.Errorf("cached import: %+v", got)
	}
}

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	csv1beta1 "k8s.io/multiclusterservices/apis/clusterselection/v1beta1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/features"
)

const regionKey = "region.topology.k8s.io"

// storySelectors are story 1 of KEP-5939: my cluster, then my region.
var storySelectors = []csv1beta1.ClusterSelector{
	{PropertySelector: &csv1beta1.PropertySelector{MatchExpressions: []csv1beta1.PropertySelectorRequirement{
		{Key: aboutv1alpha1.ClusterIDProperty, Operator: csv1beta1.PropertySelectorOpIn, Values: []string{csv1beta1.SameAsImporter}},
	}}},
	{PropertySelector: &csv1beta1.PropertySelector{MatchProperties: map[string]string{regionKey: csv1beta1.SameAsImporter}}},
}

// TestClusterSelection runs the controller with the
// MultiClusterServiceClusterSelection gate against three real apiservers
// (cluster-a and cluster-b in eu, cluster-c in us) and checks: the
// exports' selectors copied into every import and the results per
// importing cluster; a region changed at run time moving them; a
// conflicting newer export (Conflict=True/ClusterSelectorsConflict on
// every export, the oldest list kept); an invalid selector and a headless
// Service with selectors refused; 17 selectors refused by the CRD; and
// that the controller's other writes to the import keep the results.
func TestClusterSelection(t *testing.T) {
	ctx := context.Background()
	members, kubeconfig := startRegions(t, "eu", "eu", "us")
	a, b, c := members[0], members[1], members[2]
	startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, withClusterSelection(t))

	for i, m := range members {
		exportService(t, m, "demo", "api", servicePorts("http", 80), endpoints("http", 8080, fmt.Sprintf("10.%d.0.1", i+1)))
		setSelectors(t, m, "demo", "api", storySelectors)
		time.Sleep(1100 * time.Millisecond) // creation timestamps have a resolution of a second: a is oldest
	}
	want := map[string]string{
		"cluster-a": "[cluster-a] [cluster-a cluster-b]",
		"cluster-b": "[cluster-b] [cluster-a cluster-b]",
		"cluster-c": "[cluster-c] [cluster-c]",
	}
	for _, m := range members {
		waitResults(t, m, "demo", "api", storySelectors, want[m.id])
		waitExportConditions(t, m, "demo", "api", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
	}

	// --- A property changed at run time moves the results.
	setProperty(t, c, regionKey, "eu")
	want = map[string]string{
		"cluster-a": "[cluster-a] [cluster-a cluster-b cluster-c]",
		"cluster-b": "[cluster-b] [cluster-a cluster-b cluster-c]",
		"cluster-c": "[cluster-c] [cluster-a cluster-b cluster-c]",
	}
	for _, m := range members {
		waitResults(t, m, "demo", "api", storySelectors, want[m.id])
	}

	// --- The controller's own writes of mcs-api's fields keep the KEP's:
	// an exported label rewrites every import.
	// (A merge patch: mcs-api's typed client would drop the selectors.)
	exports := dynamic.NewForConfigOrDie(a.cluster.RESTConfig()).Resource(csv1beta1.SchemeGroupVersion.WithResource("serviceexports")).Namespace("demo")
	if _, err := exports.Patch(ctx, "api", types.MergePatchType, []byte(`{"spec":{"exportedLabels":{"team":"x"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		waitImport(t, m, "demo", "api", func(si *mcsv1beta1.ServiceImport) bool { return si.Labels["team"] == "x" })
		waitResults(t, m, "demo", "api", storySelectors, want[m.id])
	}

	if _, err := exports.Patch(ctx, "api", types.MergePatchType, []byte(`{"spec":{"exportedLabels":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitExportConditions(t, a, "demo", "api", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")

	// --- A newer export with another list conflicts; the oldest's stays.
	onlyLocal := storySelectors[:1]
	setSelectors(t, c, "demo", "api", onlyLocal)
	for _, m := range members {
		waitExportConditions(t, m, "demo", "api", "Valid=True/Valid Ready=True/Exported Conflict=True/ClusterSelectorsConflict")
		waitResults(t, m, "demo", "api", storySelectors, want[m.id])
	}
	setSelectors(t, c, "demo", "api", storySelectors)
	waitExportConditions(t, a, "demo", "api", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")

	// --- An empty propertySelector is invalid: that export is refused.
	setSelectors(t, c, "demo", "api", []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{}}})
	waitExportConditions(t, c, "demo", "api", "Valid=False/InvalidClusterSelector Ready=False/Failed Conflict=False/NoConflicts")
	for _, m := range members {
		waitImport(t, m, "demo", "api", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a,cluster-b" })
	}

	// --- Selectors on a headless Service's export are refused.
	_, err := b.kube.CoreV1().Services("demo").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "headless"},
		Spec:       v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Selector: map[string]string{"app": "headless"}, Ports: servicePorts("http", 80)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createExport(t, b, "demo", "headless")
	setSelectors(t, b, "demo", "headless", storySelectors)
	waitExportConditions(t, b, "demo", "headless", "Valid=False/InvalidServiceType Ready=False/Failed Conflict=False/NoConflicts")

	// --- The CRD admits at most 16 selectors.
	err = updateSelectors(a, "demo", "api", slices.Repeat(storySelectors[:1], 17))
	if !apierrors.IsInvalid(err) {
		t.Errorf("17 selectors: %v, want Invalid", err)
	}
}

// startRegions starts a member per region given, cluster-a, cluster-b,
// ..., each in that region (ClusterProperty region.topology.k8s.io), with
// namespace demo, letting the controller read its ClusterProperties; and
// returns them with the controller's kubeconfig.
func startRegions(t *testing.T, regions ...string) ([]*testMember, string) {
	t.Helper()
	var ids []string
	for i := range regions {
		ids = append(ids, fmt.Sprintf("cluster-%c", 'a'+i))
	}
	members, kubeconfig := membersWithDemo(t, ids...)
	for i, m := range members {
		grantClusterPropertiesRead(t, m)
		setProperty(t, m, regionKey, regions[i])
	}
	return members, kubeconfig
}

// withClusterSelection turns the controller's
// MultiClusterServiceClusterSelection gate on.
func withClusterSelection(t *testing.T) func(*app.Options) {
	return func(o *app.Options) {
		if err := o.FeatureGates.SetFromMap(map[string]bool{string(features.MultiClusterServiceClusterSelection): true}); err != nil {
			t.Fatal(err)
		}
	}
}

// grantClusterPropertiesRead gives the controller's user what cluster
// selection needs beyond kind-config/mcs-controller-rbac.yaml: listing
// and watching every ClusterProperty.
func grantClusterPropertiesRead(t *testing.T, m *testMember) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "mcs-controller-cluster-selection"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{aboutv1alpha1.GroupName}, Resources: []string{"clusterproperties"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := m.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: controllerUser}},
	}
	if _, err := m.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setProperty creates or updates ClusterProperty name in m.
func setProperty(t *testing.T, m *testMember, name, value string) {
	t.Helper()
	api := dynamic.NewForConfigOrDie(m.cluster.RESTConfig()).Resource(aboutv1alpha1.Resource)
	patch, _ := json.Marshal(map[string]any{
		"apiVersion": aboutv1alpha1.SchemeGroupVersion.String(), "kind": "ClusterProperty",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"value": value},
	})
	if _, err := api.Patch(context.Background(), name, types.ApplyPatchType, patch, metav1.PatchOptions{FieldManager: "test", Force: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
}

func updateSelectors(m *testMember, ns, name string, sels []csv1beta1.ClusterSelector) error {
	api := dynamic.NewForConfigOrDie(m.cluster.RESTConfig()).Resource(csv1beta1.SchemeGroupVersion.WithResource("serviceexports")).Namespace(ns)
	var value any
	if len(sels) > 0 {
		value = sels
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"clusterSelectors": value}})
	_, err := api.Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func setSelectors(t *testing.T, m *testMember, ns, name string, sels []csv1beta1.ClusterSelector) {
	t.Helper()
	if err := updateSelectors(m, ns, name, sels); err != nil {
		t.Fatal(err)
	}
}

// waitResults waits until m's import ns/name carries sels and, as results,
// want (each result's clusters, space separated), for its generation.
func waitResults(t *testing.T, m *testMember, ns, name string, sels []csv1beta1.ClusterSelector, want string) {
	t.Helper()
	api := dynamic.NewForConfigOrDie(m.cluster.RESTConfig()).Resource(csv1beta1.SchemeGroupVersion.WithResource("serviceimports")).Namespace(ns)
	eventually(t, 60*time.Second, fmt.Sprintf("cluster selector results of %s/%s in %s", ns, name, m.id), func() (bool, string) {
		u, err := api.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		si := &csv1beta1.ServiceImport{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, si); err != nil {
			return false, err.Error()
		}
		var got []string
		for _, r := range si.Status.ClusterSelectorResults {
			got = append(got, fmt.Sprint(r.Clusters))
		}
		s := strings.Join(got, " ")
		have, _ := json.Marshal(si.Spec.ClusterSelectors)
		exported, _ := json.Marshal(sels)
		specOK := string(have) == string(exported)
		gen, _, _ := unstructured.NestedInt64(u.Object, "metadata", "generation")
		return specOK && s == want && si.Status.ObservedGeneration == gen,
			fmt.Sprintf("results %q, spec selectors as exported %v, observedGeneration %d of %d", s, specOK, si.Status.ObservedGeneration, gen)
	})
}

// TestClusterSelectionGateOff: with the gate off (the default), the
// controller neither resolves an export's clusterSelectors nor writes the
// KEP's fields (the export's Valid condition says they are ignored), and needs no more RBAC than today's (no ClusterProperty
// list or watch is granted here).
func TestClusterSelectionGateOff(t *testing.T) {
	ms, kubeconfig := membersWithDemo(t, "cluster-a")
	a := ms[0]
	setProperty(t, a, regionKey, "eu")
	startController(t, kubeconfig, "replica-1", 8*time.Second)

	exportService(t, a, "demo", "api", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	// Invalid with the gate on; ignored with it off.
	setSelectors(t, a, "demo", "api", []csv1beta1.ClusterSelector{{PropertySelector: &csv1beta1.PropertySelector{}}})
	waitImport(t, a, "demo", "api", func(si *mcsv1beta1.ServiceImport) bool { return clustersString(si) == "cluster-a" && importReady(si) })
	waitExportConditions(t, a, "demo", "api", "Valid=True/Valid Ready=True/Exported Conflict=False/NoConflicts")
	// The exporter is told that its selectors do nothing.
	eventually(t, 30*time.Second, "the export's Valid condition to say its selectors are ignored", func() (bool, string) {
		se, err := a.mcs.MulticlusterV1beta1().ServiceExports("demo").Get(context.Background(), "api", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid))
		if c == nil {
			return false, "no Valid condition"
		}
		return strings.Contains(c.Message, "its 1 clusterSelectors are ignored"), c.Message
	})
	// Nor, with MultiClusterServiceExportClusters off, status.clusters.
	exported, err := dynamic.NewForConfigOrDie(a.cluster.RESTConfig()).Resource(csv1beta1.SchemeGroupVersion.WithResource("serviceexports")).Namespace("demo").Get(context.Background(), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := statusClustersOf(exported.Object); len(got) != 0 {
		t.Errorf("gate off: the export has status.clusters %v", got)
	}
	api := dynamic.NewForConfigOrDie(a.cluster.RESTConfig()).Resource(csv1beta1.SchemeGroupVersion.WithResource("serviceimports")).Namespace("demo")
	u, err := api.Get(context.Background(), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range [][]string{{"spec", "clusterSelectors"}, {"status", "clusterSelectorResults"}, {"status", "observedGeneration"}} {
		if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...); found {
			t.Errorf("gate off: the import has %s = %v", strings.Join(path, "."), v)
		}
	}
}

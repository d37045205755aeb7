package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/crds"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestMCSControllerUpstreamInventory: a fleet written for upstream's
// newest APIs, with no field of ours. The hub serves ClusterProfile
// v1alpha2 only (cluster-inventory-api's newest: no credentialProviders),
// profiles say ControlPlaneHealthy and nothing else, two cluster managers
// write a profile each for one cluster (the same
// multicluster.x-k8s.io/inventory-member-id), the inventory namespace is
// labelled with its clusterset, and the member serves ClusterProperty
// v1beta1 only (about-api's newest). The member joins once, its second
// profile waits and takes over when the first goes, and a profile of
// another clusterset is refused. With cluster selection on, the region a
// profile states drives @SameAsImporter@, and moves it when the cluster
// manager changes it.
func TestMCSControllerUpstreamInventory(t *testing.T) {
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	webhook := newTokenWebhook(t, "test-signing-key")
	plugin := buildPlugin(t)
	a := startMember(t, etcd, dir, "cluster-a")
	b := startPluginMember(t, etcd, dir, "cluster-b", webhook)
	for _, m := range []*testMember{a, b} {
		createNamespace(t, m, "demo")
		grantClusterPropertiesRead(t, m)
	}
	// a is a member given as a context, in eu by its own ClusterProperty;
	// b's region is its profiles' word.
	setProperty(t, a, regionKey, "eu")
	serveNewestOnly(t, b, "clusterproperties."+aboutv1alpha1.GroupName, "v1alpha1", "v1beta1")
	hub, providers := installUpstreamInventory(t, a, dir, plugin)
	kubeconfig := writeControllerKubeconfig(t, dir, []*testMember{a})
	r := startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, func(o *app.Options) {
		o.Contexts = []string{"cluster-a"}
		o.HubContext = "cluster-a"
		o.InventoryNamespace = "fleet"
		o.InventoryAccessProviders = providers
		o.MemberRecheckPeriod = time.Second
		withClusterSelection(t)(o)
	})
	r.waitReady(t)
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	for _, m := range []*testMember{a, b} {
		setSelectors(t, m, "demo", "web", storySelectors)
	}
	const both = "cluster-a=10.1.0.1 ports http:8080;cluster-b=10.2.0.1 ports http:8080"

	t.Run("a v1alpha2 profile with upstream's fields only joins a member serving ClusterProperty v1beta1", func(t *testing.T) {
		putUpstreamProfile(t, hub, upstreamProfile(t, "ocm-b", "ocm", "member-b", b, "prod", "eu"))
		waitSlices(t, a, "demo", "web", both)
		waitSlices(t, b, "demo", "web", both)
		waitEventOn(t, a, "ClusterProfile", "fleet", "ocm-b", "MemberJoined")
		waitProfileCondition(t, hub, "ocm-b", "True", "cluster cluster-b is a member")
	})

	t.Run("the profile's region drives @SameAsImporter@ selection, and moves it when the cluster manager changes it", func(t *testing.T) {
		waitResults(t, a, "demo", "web", storySelectors, "[cluster-a] [cluster-a cluster-b]")
		waitResults(t, b, "demo", "web", storySelectors, "[cluster-b] [cluster-a cluster-b]")
		putUpstreamProfile(t, hub, upstreamProfile(t, "ocm-b", "ocm", "member-b", b, "prod", "us"))
		waitResults(t, a, "demo", "web", storySelectors, "[cluster-a] [cluster-a]")
		waitResults(t, b, "demo", "web", storySelectors, "[cluster-b] [cluster-b]")
	})

	t.Run("a second manager's profile of the same cluster waits, not refused", func(t *testing.T) {
		putUpstreamProfile(t, hub, upstreamProfile(t, "fleet-b", "fleet-manager", "member-b", b, "prod", "us"))
		waitEventOn(t, a, "ClusterProfile", "fleet", "fleet-b", "MemberPending")
		waitProfileCondition(t, hub, "fleet-b", "False", "served through profile/fleet/ocm-b")
		r.waitMetric(t, "one joined and one pending profile", `mcs_controller_inventory_members{source="profile",state="pending"} 1`)
		r.waitMetric(t, "no refused profile", `mcs_controller_inventory_members{source="profile",state="refused"} 0`)
	})

	t.Run("a profile of another clusterset is refused", func(t *testing.T) {
		putUpstreamProfile(t, hub, upstreamProfile(t, "elsewhere", "ocm", "member-x", b, "staging", "eu"))
		waitEventOn(t, a, "ClusterProfile", "fleet", "elsewhere", "MemberRefused")
		waitProfileCondition(t, hub, "elsewhere", "False", `names clusterset "staging", and this controller serves "prod"`)
		if err := hub.Resource(inventoryv1alpha1.ResourceOf("v1alpha2")).Namespace("fleet").Delete(context.Background(), "elsewhere", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the first profile deleted, the second serves the cluster", func(t *testing.T) {
		if err := hub.Resource(inventoryv1alpha1.ResourceOf("v1alpha2")).Namespace("fleet").Delete(context.Background(), "ocm-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEventOn(t, a, "ClusterProfile", "fleet", "fleet-b", "MemberJoined")
		waitProfileCondition(t, hub, "fleet-b", "True", "cluster cluster-b is a member")
		waitSlices(t, a, "demo", "web", both)
		// The region now is the second manager's word.
		waitResults(t, a, "demo", "web", storySelectors, "[cluster-a] [cluster-a]")
	})
}

// serveNewestOnly moves m's CRD name from serving version old to serving
// version newest only, with the same schema, as an upgrade of its API
// package leaves it (objects stored at old stay readable).
func serveNewestOnly(t *testing.T, m *testMember, name, old, newest string) {
	t.Helper()
	ctx := context.Background()
	client := apiextensionsclient.NewForConfigOrDie(m.cluster.RESTConfig())
	eventually(t, 30*time.Second, name+" serving "+newest+" only", func() (bool, string) {
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var next []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range crd.Spec.Versions {
			if v.Name == old {
				nv := *v.DeepCopy()
				nv.Name, nv.Served, nv.Storage = newest, true, true
				v.Served, v.Storage = false, false
				next = append(next, v, nv)
			}
		}
		crd.Spec.Versions = next
		_, err = client.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err == nil, errString(err)
	})
	disco := m.kube.Discovery()
	eventually(t, 30*time.Second, name+" not served at "+old, func() (bool, string) {
		group := strings.SplitN(name, ".", 2)[1]
		_, errOld := disco.ServerResourcesForGroupVersion(group + "/" + old)
		_, errNew := disco.ServerResourcesForGroupVersion(group + "/" + newest)
		return errOld != nil && errNew == nil, fmt.Sprint(errOld, errNew)
	})
}

// installUpstreamInventory makes m a hub whose ClusterProfile CRD serves
// v1alpha2 only, with v1alpha2's schema (v1alpha1's without
// credentialProviders), and whose inventory namespace fleet is labelled
// for clusterset prod; the RBAC and provider file are installInventory's.
func installUpstreamInventory(t *testing.T, m *testMember, dir, plugin string) (dynamic.Interface, string) {
	t.Helper()
	ctx := context.Background()
	crd, err := crds.ClusterProfile()
	if err != nil {
		t.Fatal(err)
	}
	v := &crd.Spec.Versions[0]
	v.Name = "v1alpha2"
	status := v.Schema.OpenAPIV3Schema.Properties["status"]
	delete(status.Properties, "credentialProviders")
	v.Schema.OpenAPIV3Schema.Properties["status"] = status
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(m.cluster.RESTConfig()), crd); err != nil {
		t.Fatal(err)
	}
	hub, providers := installInventory(t, m, dir, plugin, false)
	ns, err := m.kube.CoreV1().Namespaces().Get(ctx, "fleet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[inventoryv1alpha1.LabelClusterSet] = "prod"
	if _, err := m.kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return hub, providers
}

// upstreamProfile is a v1alpha2 ClusterProfile for m as a cluster manager
// named manager writes it: upstream's labels, ControlPlaneHealthy only,
// properties naming the cluster, its clusterset and its region, one
// access provider.
func upstreamProfile(t *testing.T, name, manager, memberID string, m *testMember, clusterset, region string) *unstructured.Unstructured {
	t.Helper()
	ca := caData(t, m)
	now := metav1.Now().UTC().Format(time.RFC3339)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": inventoryv1alpha1.GroupName + "/v1alpha2",
		"kind":       "ClusterProfile",
		"metadata": map[string]any{"name": name, "namespace": "fleet", "labels": map[string]any{
			inventoryv1alpha1.LabelClusterManager:    manager,
			inventoryv1alpha1.LabelInventoryMemberID: memberID,
		}},
		"spec": map[string]any{"displayName": m.id, "clusterManager": map[string]any{"name": manager}},
		"status": map[string]any{
			"conditions": []any{map[string]any{"type": inventoryv1alpha1.ConditionControlPlaneHealthy, "status": "True", "reason": "Healthy", "message": "", "lastTransitionTime": now}},
			"properties": []any{
				map[string]any{"name": aboutv1alpha1.ClusterIDProperty, "value": m.id},
				map[string]any{"name": aboutv1alpha1.ClusterSetProperty, "value": clusterset},
				map[string]any{"name": regionKey, "value": region},
			},
			"accessProviders": []any{map[string]any{"name": "token", "cluster": map[string]any{
				"server": m.cluster.URL(), "certificate-authority-data": base64.StdEncoding.EncodeToString(ca),
			}}},
		},
	}}
}

// putUpstreamProfile creates a v1alpha2 profile, status included.
func putUpstreamProfile(t *testing.T, hub dynamic.Interface, u *unstructured.Unstructured) {
	t.Helper()
	putProfileAt(t, hub.Resource(inventoryv1alpha1.ResourceOf("v1alpha2")).Namespace("fleet"), u)
}

// waitProfileCondition waits until the controller's condition on a
// v1alpha2 profile has status and a message containing message.
func waitProfileCondition(t *testing.T, hub dynamic.Interface, name, status, message string) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("profile %s's %s condition %s (%s)", name, inventory.ConditionMember, status, message), func() (bool, string) {
		u, err := hub.Resource(inventoryv1alpha1.ResourceOf("v1alpha2")).Namespace("fleet").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == inventory.ConditionMember {
				got := fmt.Sprintf("%v: %v", cm["status"], cm["message"])
				return cm["status"] == status && strings.Contains(fmt.Sprint(cm["message"]), message), got
			}
		}
		return false, "no condition"
	})
}

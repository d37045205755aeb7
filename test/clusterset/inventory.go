package clusterset

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/crds"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/kindconfig"
)

// InventoryNamespace is the hub namespace of the Cluster Inventory, the
// one deploy/mcs-controller/inventory-profiles-rbac.yaml grants.
const InventoryNamespace = "fleet"

// InventoryAccessProvider is the access provider every profile of the
// inventory lists, and the operator's file names the plugin for.
const InventoryAccessProvider = "clusterset-token"

// Inventory is a Cluster Inventory (KEP-4322) in a hub cluster of the
// clusterset: a ClusterProfile per member cluster, each reached with the
// credential plugin test/cmd/credential-plugin (KEP-5339), which hands
// out ControllerUser's token of the cluster it is asked for. A controller
// started with ControllerArgs knows the members only from the profiles.
type Inventory struct {
	hub *Cluster
	dyn dynamic.Interface
	// kubeconfig reaches the hub only, as ControllerUser.
	kubeconfig string
	providers  string
}

// NewInventory installs the ClusterProfile CRD, the inventory's namespace
// and the controller's RBAC there (deploy/mcs-controller's) in hub, and
// writes the controller's hub-only kubeconfig and the operator's access
// provider file naming plugin (tokens lasting ttl, or not expiring when
// 0). It writes no profile.
func (cs *ClusterSet) NewInventory(ctx context.Context, hub *Cluster, plugin, ttl string) (*Inventory, error) {
	crd, err := crds.ClusterProfile()
	if err != nil {
		return nil, err
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(hub.API.RESTConfig()), crd); err != nil {
		return nil, err
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: InventoryNamespace}}
	if _, err := hub.API.Client().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(hub.API.RESTConfig())
	if err != nil {
		return nil, err
	}
	rbac, err := repoFile("deploy", "mcs-controller", "inventory-profiles-rbac.yaml")
	if err != nil {
		return nil, err
	}
	objs, err := kindconfig.Objects(rbac, nil)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(hub.API.Client().Discovery()))
	for _, obj := range objs {
		if err := kindconfig.Apply(ctx, dyn, mapper, obj, false); err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}

	dir := filepath.Join(cs.Dir(), "inventory")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	inv := &Inventory{hub: hub, dyn: dyn, kubeconfig: filepath.Join(dir, "hub.kubeconfig"), providers: filepath.Join(dir, "access-providers.json")}
	if err := framework.WriteImpersonatingClusterSetKubeconfig(inv.kubeconfig, ControllerUser, []string{"system:authenticated"}, hub.API); err != nil {
		return nil, err
	}
	// The plugin's tokens, by server: what the operator's secret store
	// would hold.
	tokens := map[string]string{}
	for _, c := range cs.Clusters {
		cfg, err := c.API.RESTConfigFor(ControllerUser)
		if err != nil {
			return nil, err
		}
		tokens[c.API.URL()] = cfg.BearerToken
	}
	tokensFile := filepath.Join(dir, "tokens.json")
	data, _ := json.Marshal(tokens)
	if err := os.WriteFile(tokensFile, data, 0o600); err != nil {
		return nil, err
	}
	env := []map[string]string{{"name": "CREDENTIAL_PLUGIN_TOKENS", "value": tokensFile}}
	if ttl != "" && ttl != "0" {
		env = append(env, map[string]string{"name": "CREDENTIAL_PLUGIN_TTL", "value": ttl})
	}
	file := map[string]any{"providers": []any{map[string]any{
		"name": InventoryAccessProvider,
		"execConfig": map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1", "command": plugin, "provideClusterInfo": true, "env": env,
		},
	}}}
	data, _ = json.MarshalIndent(file, "", "  ")
	if err := os.WriteFile(inv.providers, data, 0o600); err != nil {
		return nil, err
	}
	return inv, nil
}

// ControllerArgs are the mcs-controller flags that take the members from
// the inventory only: the hub's kubeconfig (no member context; given
// after StartController's own --kubeconfig, it is the one used), the
// inventory's namespace and the access provider file.
func (inv *Inventory) ControllerArgs() []string {
	return []string{"--kubeconfig=" + inv.kubeconfig, "--hub-context=" + inv.hub.Name,
		"--inventory-namespace=" + InventoryNamespace, "--inventory-access-providers=" + inv.providers}
}

// PutProfile writes the ClusterProfile of c, named after it, as a cluster
// manager would: joined, its control plane healthy, reached at its
// apiserver with the inventory's access provider, with properties as its
// status.properties.
func (inv *Inventory) PutProfile(ctx context.Context, c *Cluster, properties ...inventoryv1alpha1.Property) error {
	caFile, err := c.API.CAFile()
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cp := &inventoryv1alpha1.ClusterProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: inventoryv1alpha1.SchemeGroupVersion.String(), Kind: "ClusterProfile"},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: InventoryNamespace, Labels: map[string]string{inventoryv1alpha1.LabelClusterManager: "clusterset"}},
		Spec:       inventoryv1alpha1.ClusterProfileSpec{DisplayName: c.Name, ClusterManager: inventoryv1alpha1.ClusterManager{Name: "clusterset"}},
		Status: inventoryv1alpha1.ClusterProfileStatus{
			Conditions: []metav1.Condition{
				{Type: inventoryv1alpha1.ConditionJoined, Status: metav1.ConditionTrue, Reason: "Joined", LastTransitionTime: metav1.Now()},
				{Type: inventoryv1alpha1.ConditionControlPlaneHealthy, Status: metav1.ConditionTrue, Reason: "Healthy", LastTransitionTime: metav1.Now()},
			},
			Properties:      properties,
			AccessProviders: []inventoryv1alpha1.AccessProvider{{Name: InventoryAccessProvider, Cluster: inventoryv1alpha1.Cluster{Server: c.API.URL(), CertificateAuthorityData: ca}}},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cp)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	profiles := inv.dyn.Resource(inventoryv1alpha1.Resource).Namespace(InventoryNamespace)
	if _, err := profiles.Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The status is a subresource: written as the cluster manager does,
	// after the object.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := profiles.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next := u.DeepCopy()
		next.SetResourceVersion(cur.GetResourceVersion())
		_, err = profiles.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		return err
	})
}

// DeleteProfile deletes c's ClusterProfile: c leaves the clusterset.
func (inv *Inventory) DeleteProfile(ctx context.Context, c *Cluster) error {
	err := inv.dyn.Resource(inventoryv1alpha1.Resource).Namespace(InventoryNamespace).Delete(ctx, c.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

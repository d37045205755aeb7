package clusterset

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/crds"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/kindconfig"
)

const (
	// kubeProxyUser is kube-proxy's identity: upstream's system:node-proxier
	// role plus kind-config/kube-proxy-rbac.yaml, as in a real cluster.
	kubeProxyUser = "system:kube-proxy"
	// ClusterSetName is the value of every cluster's clusterset.k8s.io
	// ClusterProperty.
	ClusterSetName = "local-clusterset"
	// harnessManager manages the kube-dns EndpointSlice the harness writes
	// (CoreDNS is not a pod, so no controller would).
	harnessManager = "clusterset-harness"
)

// controllers are kube-controller-manager's: the endpoint controllers that
// make real EndpointSlices, what namespaces and owned objects need to go
// away, the workload controllers (Deployments, StatefulSets, Jobs) so users
// can deploy as usual, and the publisher of kube-root-ca.crt, which pods'
// service account volumes hold.
var controllers = append(append([]string{}, framework.DefaultControllers...),
	"deployment", "replicaset", "statefulset", "job", "root-ca-certificate-publisher-controller")

func (cs *ClusterSet) startEtcd(ctx context.Context) error {
	started := time.Now()
	etcd, err := framework.StartEtcd(ctx, filepath.Join(cs.opts.Dir, "etcd"))
	if err != nil {
		return err
	}
	cs.etcd = etcd
	cs.onDown(levelEtcd, etcd.Stop)
	cs.progress.timed("etcd", "ready at "+etcd.Endpoint(), started)
	return nil
}

func (cs *ClusterSet) startAPIServer(ctx context.Context, c *Cluster) error {
	started := time.Now()
	egress, err := cs.startEgress(c)
	if err != nil {
		return err
	}
	// ControllerUser's token is what the Cluster Inventory's credential
	// plugin hands out (NewInventory).
	users := []framework.User{{Name: kubeProxyUser}, {Name: ControllerUser}}
	api, err := framework.StartCluster(ctx, framework.ClusterOptions{
		Name:             c.Name,
		Etcd:             cs.etcd,
		ServiceCIDR:      strings.Join(c.ServiceCIDRs, ","),
		Dir:              c.dir,
		ExtraUsers:       users,
		EgressSocket:     egress,
		AdvertiseAddress: c.APIServerIP,
		// A node's name is no DNS name here; its address is what the
		// egress proxy dials from the node's namespace.
		ExtraArgs: []string{"--kubelet-preferred-address-types=InternalIP,Hostname"},
	})
	if err != nil {
		return err
	}
	c.API = api
	cs.onDown(levelAPIServer, api.Stop)
	cs.progress.timed(c.Name, "kube-apiserver ready at "+api.URL(), started)
	return nil
}

func (cs *ClusterSet) startControllerManager(ctx context.Context, c *Cluster) error {
	started := time.Now()
	ca, err := c.API.CAFile()
	if err != nil {
		return err
	}
	kcm, err := framework.StartControllerManager(ctx, c.API, framework.ControllerManagerOptions{
		Controllers: controllers,
		ExtraArgs:   []string{"--root-ca-file=" + ca},
	})
	if err != nil {
		return err
	}
	cs.onDown(levelControllers, kcm.Stop)
	cs.progress.timed(c.Name, "kube-controller-manager ready", started)
	return nil
}

// setUpAPI writes what the node components need: the MCS and
// ClusterProperty CRDs, kube-proxy's RBAC and the kube-dns Service; and
// what a member of a real clusterset has: the mcs-controller's RBAC and
// the admission policies that keep imports and MCS slices to it.
func (cs *ClusterSet) setUpAPI(ctx context.Context, c *Cluster) error {
	started := time.Now()
	all, err := crds.All()
	if err != nil {
		return err
	}
	ext, err := apiextensionsclient.NewForConfig(c.API.RESTConfig())
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, ext, all...); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	if err := grantKubeProxy(ctx, c.API.Client()); err != nil {
		return fmt.Errorf("cluster %s: kube-proxy RBAC: %w", c.Name, err)
	}
	if err := applyManifests(ctx, c.API, "mcs-controller-rbac.yaml", "mcs-admission-policy.yaml"); err != nil {
		return fmt.Errorf("cluster %s: mcs-controller RBAC and admission policies: %w", c.Name, err)
	}
	if slices.Contains(cs.opts.UpstreamKubeProxy, c.Name) {
		// A derived member, as deploy/overlays/derived-member installs
		// it: the controller writes native names as slices of local
		// Services for its stock proxies.
		err := c.API.Client().AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, nativeMemberBinding, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster %s: derived member's admission policies: %w", c.Name, err)
		}
	}
	if !cs.opts.NoDNS {
		if err := createDNSService(ctx, c); err != nil {
			return fmt.Errorf("cluster %s: kube-dns Service: %w", c.Name, err)
		}
	}
	cs.progress.timed(c.Name, "MCS and ClusterProperty CRDs, RBAC, admission policies, kube-dns Service", started)
	return nil
}

// writeClusterID writes the cluster's ClusterProperties. It runs beside the
// node components' start: the first write to a fresh CRD takes about two
// seconds (the apiserver's, polling does not help), and nothing but an
// mcs-controller needs the properties.
func (cs *ClusterSet) writeClusterID(ctx context.Context, c *Cluster) error {
	started := time.Now()
	if err := writeClusterProperties(ctx, c, cs.opts.ClusterProperties[c.Name]); err != nil {
		return fmt.Errorf("cluster %s: ClusterProperty: %w", c.Name, err)
	}
	line := "ClusterProperty " + aboutv1alpha1.ClusterIDProperty + " = " + c.Name
	for _, key := range slices.Sorted(maps.Keys(cs.opts.ClusterProperties[c.Name])) {
		line += ", " + key + " = " + cs.opts.ClusterProperties[c.Name][key]
	}
	cs.progress.timed(c.Name, line, started)
	return nil
}

// writeClusterProperties records the cluster's ID and its clusterset
// (KEP-2149), which the mcs-controller reads, and the operator's extra
// properties (Options.ClusterProperties).
func writeClusterProperties(ctx context.Context, c *Cluster, extra map[string]string) error {
	client, err := dynamic.NewForConfig(c.API.RESTConfig())
	if err != nil {
		return err
	}
	props := client.Resource(aboutv1alpha1.Resource)
	all := map[string]string{aboutv1alpha1.ClusterIDProperty: c.Name, aboutv1alpha1.ClusterSetProperty: ClusterSetName}
	maps.Copy(all, extra)
	for name, value := range all {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": aboutv1alpha1.SchemeGroupVersion.String(),
			"kind":       "ClusterProperty",
			"metadata":   map[string]any{"name": name},
			"spec":       map[string]any{"value": value},
		}}
		if _, err := props.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// grantKubeProxy binds kube-proxy's user to upstream's role and to the
// project's manifest.
func grantKubeProxy(ctx context.Context, client kubernetes.Interface) error {
	rbac := client.RbacV1()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-node-proxier"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeProxyUser}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	path, err := repoFile("kind-config", "kube-proxy-rbac.yaml")
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	decoder := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var role rbacv1.ClusterRole
	var roleBinding rbacv1.ClusterRoleBinding
	if err := decoder.Decode(&role); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := decoder.Decode(&roleBinding); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := rbac.ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &roleBinding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// createDNSService makes kube-system/kube-dns at the cluster DNS IP, with
// CoreDNS (on the first node's address) as its only endpoint, so that pods
// resolve through a ClusterIP and kube-proxy, as in a real cluster.
func createDNSService(ctx context.Context, c *Cluster) error {
	client := c.API.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: v1.ServiceSpec{
			ClusterIP:  c.DNSIP,
			ClusterIPs: c.DNSIPs,
			IPFamilies: c.family.families(),
			Ports: []v1.ServicePort{
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53},
				{Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53},
			},
		},
	}
	if c.family == DualStack {
		policy := v1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &policy
	}
	if _, err := client.CoreV1().Services(metav1.NamespaceSystem).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ready := true
	node := c.Nodes[0]
	port := func(name string, proto v1.Protocol) discoveryv1.EndpointPort {
		p := int32(53)
		return discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &p}
	}
	// One slice per family, as the EndpointSlice controller makes them.
	for k, fam := range c.family.families() {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:      "kube-dns-coredns-" + strings.ToLower(string(fam)),
				Namespace: metav1.NamespaceSystem,
				Labels: map[string]string{
					discoveryv1.LabelServiceName: "kube-dns",
					discoveryv1.LabelManagedBy:   harnessManager,
				},
			},
			AddressType: discoveryv1.AddressType(fam),
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{node.IPs[k]},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				NodeName:   &node.Name,
			}},
			Ports: []discoveryv1.EndpointPort{port("dns", v1.ProtocolUDP), port("dns-tcp", v1.ProtocolTCP)},
		}
		if _, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// applyManifests applies files of kind-config/ server-side, as
// hack/kind-e2e.sh does in kind clusters.
func applyManifests(ctx context.Context, api *framework.Cluster, files ...string) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(api.Client().Discovery()))
	dyn, err := dynamic.NewForConfig(api.RESTConfig())
	if err != nil {
		return err
	}
	for _, f := range files {
		path, err := repoFile("kind-config", f)
		if err != nil {
			return err
		}
		objs, err := kindconfig.Objects(path, nil)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if err := kindconfig.Apply(ctx, dyn, mapper, obj, false); err != nil {
				return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// nativeMemberBinding binds the admission policy that keeps the
// mcs-controller from local Services' slices in a member served natively
// (deploy/member/mcs-admission-policy.yaml); derived members go without.
const nativeMemberBinding = "multicluster.x-k8s.io-controller-native-member"

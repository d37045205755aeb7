package kindconfig

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestDeployPackages builds each install package of deploy/ with kustomize
// (the library `kubectl apply -k` runs) and applies what it gives to a
// real kube-apiserver with server-side dry-run: the CRDs (their remote
// mcs-api files read from the pinned module), the native and derived
// member overlays and the hub. It also checks that kind-config/ and
// deploy/ are one source: every manifest both use is a link into deploy/.
func TestDeployPackages(t *testing.T) {
	ctx := context.Background()
	root := repoRoot(t)
	cluster := framework.StartTestCluster(t, framework.StartTestEtcd(t), framework.ClusterOptions{Name: "deploy"})
	dyn := dynamic.NewForConfigOrDie(cluster.RESTConfig())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cluster.Client().Discovery()))
	apply := func(what string, objs []*unstructured.Unstructured) {
		t.Helper()
		for _, obj := range objs {
			if err := Apply(ctx, dyn, mapper, obj, true); err != nil {
				t.Errorf("%s: %s %s: %v", what, obj.GetKind(), obj.GetName(), err)
			}
			if obj.GetKind() == "Namespace" {
				_, _ = cluster.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName()}}, metav1.CreateOptions{})
			}
		}
	}

	// The CRDs: the remote files must be mcs-api's at the version go.mod
	// pins; the package is built with them read from that module.
	mcsDir := moduleDir(t, "sigs.k8s.io/mcs-api")
	version := moduleVersion(t, "sigs.k8s.io/mcs-api")
	fsys := diskCopy(t, root, "deploy", "staging/src/k8s.io/multiclusterservices/crds")
	kustomization := filepath.Join(root, "deploy", "crds", "kustomization.yaml")
	data, err := fsys.ReadFile(kustomization)
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	remote := 0
	for i, r := range k.Resources {
		if !strings.HasPrefix(r, "https://") {
			continue
		}
		remote++
		prefix := "https://raw.githubusercontent.com/kubernetes-sigs/mcs-api/" + version + "/"
		if !strings.HasPrefix(r, prefix) {
			t.Errorf("deploy/crds: %s is not mcs-api's %s (go.mod)", r, version)
			continue
		}
		local, err := os.ReadFile(filepath.Join(mcsDir, strings.TrimPrefix(r, prefix)))
		if err != nil {
			t.Errorf("deploy/crds: %s is no file of mcs-api %s: %v", r, version, err)
			continue
		}
		name := filepath.Base(r)
		if err := fsys.WriteFile(filepath.Join(root, "deploy", "crds", name), local); err != nil {
			t.Fatal(err)
		}
		k.Resources[i] = name
	}
	if remote != 2 {
		t.Errorf("deploy/crds names %d remote CRDs, want ServiceExport and ServiceImport", remote)
	}
	data, _ = yaml.Marshal(k)
	if err := fsys.WriteFile(kustomization, data); err != nil {
		t.Fatal(err)
	}
	crdObjs := build(t, fsys, filepath.Join(root, "deploy", "crds"))
	if got := names(crdObjs); !slices.Equal(got, []string{
		"CustomResourceDefinition/clusterproperties.about.k8s.io",
		"CustomResourceDefinition/serviceexports.multicluster.x-k8s.io",
		"CustomResourceDefinition/serviceimports.multicluster.x-k8s.io",
	}) {
		t.Errorf("deploy/crds gives %v", got)
	}
	apply("deploy/crds", crdObjs)
	prepareMember(t, cluster)

	native := build(t, fsys, filepath.Join(root, "deploy", "overlays", "native-member"))
	derived := build(t, fsys, filepath.Join(root, "deploy", "overlays", "derived-member"))
	for _, want := range []string{"ValidatingAdmissionPolicy/multicluster.x-k8s.io-controller-scope", "ClusterRole/multicluster:mcs-controller",
		"ServiceAccount/mcs-system/mcs-controller", "ConfigMap/kube-system/coredns"} {
		for overlay, objs := range map[string][]*unstructured.Unstructured{"native-member": native, "derived-member": derived} {
			if !slices.Contains(names(objs), want) {
				t.Errorf("%s has no %s: %v", overlay, want, names(objs))
			}
		}
	}
	if !slices.Contains(names(native), "DaemonSet/kube-system/kube-proxy") {
		t.Errorf("native-member does not swap kube-proxy: %v", names(native))
	}
	for _, n := range names(derived) {
		if strings.Contains(n, "kube-proxy") {
			t.Errorf("derived-member touches kube-proxy (%s): its members keep their own", n)
		}
	}
	// The native-member policy binds in native members only: a derived
	// member's stock proxies need the controller's slices of local
	// Services for native names.
	const nativeOnly = "ValidatingAdmissionPolicyBinding/multicluster.x-k8s.io-controller-native-member"
	if !slices.Contains(names(native), nativeOnly) || slices.Contains(names(derived), nativeOnly) {
		t.Errorf("%s: native-member has it %v, derived-member %v; want native only", nativeOnly, slices.Contains(names(native), nativeOnly), slices.Contains(names(derived), nativeOnly))
	}
	apply("native-member", native)
	apply("derived-member", derived)

	// The catalog, in the hub.
	catalogObjs := build(t, fsys, filepath.Join(root, "deploy", "catalog"))
	for _, want := range []string{
		"CustomResourceDefinition/globalservices.catalog.multiclusterservices.k8s.io", "CustomResourceDefinition/servicebindings.catalog.multiclusterservices.k8s.io",
		"CustomResourceDefinition/globalserviceimports.catalog.multiclusterservices.k8s.io", "ClusterRole/multicluster:catalog-team", "ClusterRole/multicluster:mcs-controller-catalog",
	} {
		if !slices.Contains(names(catalogObjs), want) {
			t.Errorf("deploy/catalog has no %s: %v", want, names(catalogObjs))
		}
	}
	apply("deploy/catalog", catalogObjs)

	// Pull mode's hub: the plan's namespace and the agents' ClusterRoles
	// (a member's part is kubectl mcs hub member's).
	pullObjs := build(t, fsys, filepath.Join(root, "deploy", "hub-pull"))
	for _, want := range []string{"Namespace/mcs-plan", "ClusterRole/multicluster:member-agent", "ClusterRole/multicluster:member-agent-plan-reader",
		"ClusterRole/multicluster:planner", "Deployment/mcs-system/mcs-planner"} {
		if !slices.Contains(names(pullObjs), want) {
			t.Errorf("deploy/hub-pull has no %s: %v", want, names(pullObjs))
		}
	}
	apply("deploy/hub-pull", pullObjs)

	// Pull mode's member agent, in a member.
	agentObjs := build(t, fsys, filepath.Join(root, "deploy", "member-agent"))
	for _, want := range []string{"Deployment/mcs-system/mcs-member-agent", "ServiceAccount/mcs-system/mcs-controller", "ClusterRole/multicluster:mcs-controller", "Role/mcs-system/multicluster:mcs-member-agent-leader-election"} {
		if !slices.Contains(names(agentObjs), want) {
			t.Errorf("deploy/member-agent has no %s: %v", want, names(agentObjs))
		}
	}
	apply("deploy/member-agent", agentObjs)
	// In a member that keeps its stock kube-proxy: the agent writes derived
	// Services, and the native-member binding is left out.
	derivedAgent := build(t, fsys, filepath.Join(root, "deploy", "overlays", "derived-member-agent"))
	if slices.Contains(names(derivedAgent), "ValidatingAdmissionPolicyBinding/multicluster.x-k8s.io-controller-native-member") {
		t.Errorf("deploy/overlays/derived-member-agent binds the native-member policy: %v", names(derivedAgent))
	}
	for _, o := range derivedAgent {
		if o.GetKind() != "Deployment" {
			continue
		}
		var args []string
		if c, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers"); len(c) > 0 {
			args, _, _ = unstructured.NestedStringSlice(c[0].(map[string]any), "args")
		}
		if !slices.Contains(args, "--derived") {
			t.Errorf("deploy/overlays/derived-member-agent's agent runs %v, without --derived", args)
		}
	}

	// The hub, with a kubeconfig next to it as its README says.
	hub := filepath.Join(root, "deploy", "overlays", "hub")
	if err := fsys.WriteFile(filepath.Join(hub, "clusterset.kubeconfig"), []byte("apiVersion: v1\nkind: Config\n")); err != nil {
		t.Fatal(err)
	}
	hubObjs := build(t, fsys, hub)
	for _, want := range []string{"RoleBinding/mcs-system/multicluster:mcs-controller-inventory", "RoleBinding/fleet/multicluster:mcs-controller-profiles"} {
		if !slices.Contains(names(hubObjs), want) {
			t.Errorf("the hub has no %s (the member inventory's RBAC): %v", want, names(hubObjs))
		}
	}
	apply("hub", hubObjs)
	for _, obj := range hubObjs {
		if obj.GetKind() != "Deployment" {
			continue
		}
		pod, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		text, _ := yaml.Marshal(pod)
		if !strings.Contains(string(text), "--derived-members=") || !strings.Contains(string(text), "mcs-controller-kubeconfig") {
			t.Errorf("hub Deployment lacks --derived-members or its kubeconfig Secret:\n%s", text)
		}
	}

	// One source: kind-config uses deploy/'s files through links.
	links, err := filepath.Glob(filepath.Join(root, "kind-config", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	linked := 0
	for _, path := range links {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			t.Fatal(err)
		}
		if target == path {
			continue
		}
		linked++
		if !strings.HasPrefix(target, filepath.Join(root, "deploy")+string(filepath.Separator)) {
			t.Errorf("kind-config/%s links to %s, outside deploy/", filepath.Base(path), target)
		}
	}
	if linked < 6 {
		t.Errorf("only %d kind-config manifests are deploy/'s files", linked)
	}
}

// build runs kustomize on dir of fsys and decodes what it gives.
func build(t *testing.T, fsys filesys.FileSystem, dir string) []*unstructured.Unstructured {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, objectName(o))
	}
	slices.Sort(out)
	return out
}

// objectName is KIND/NAME, or KIND/NAMESPACE/NAME for a namespaced object.
func objectName(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetKind() + "/" + o.GetName()
}

// diskCopy returns an in-memory file system holding the files under the
// given directories of root, at their own paths, so that a test can add
// files without touching the tree.
func diskCopy(t *testing.T, root string, dirs ...string) filesys.FileSystem {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	for _, dir := range dirs {
		err := filepath.Walk(filepath.Join(root, dir), func(path string, info os.FileInfo, err error) error {
			// Links (the chart's files/ into deploy/) are not followed:
			// what they name is copied at its own path.
			if err != nil || info.IsDir() || info.Mode()&os.ModeSymlink != 0 {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return fsys.WriteFile(path, data)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return fsys
}

// moduleDir is where the Go module cache holds module path.
func moduleDir(t *testing.T, path string) string {
	t.Helper()
	return goListModule(t, path, "{{.Dir}}")
}

// moduleVersion is the version of module path that go.mod pins.
func moduleVersion(t *testing.T, path string) string {
	t.Helper()
	return goListModule(t, path, "{{.Version}}")
}

func goListModule(t *testing.T, path, format string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", format, path).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

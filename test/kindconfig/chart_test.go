package kindconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/multiclusterservices/crds"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// chartDir is the Helm chart, relative to the repository.
const chartDir = "deploy/helm/multicluster-services"

// TestChartCRDs: the chart's crds/ are the CRDs crds.Install installs
// (mcs-api's with the cluster selection fields, and ClusterProperty),
// written by MCS_UPDATE_CHART=1 go test ./test/kindconfig -run
// TestChartCRDs (hack/update-codegen.sh).
func TestChartCRDs(t *testing.T) {
	dir := filepath.Join(repoRoot(t), chartDir, "crds")
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, crd := range all {
		crd.TypeMeta.APIVersion, crd.TypeMeta.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		data, err := yaml.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		want[crd.Name+".yaml"] = append([]byte("# Generated from k8s.io/multiclusterservices/crds (crds.All); do not edit.\n"), data...)
	}
	if os.Getenv("MCS_UPDATE_CHART") == "1" {
		old, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range old {
			_ = os.Remove(f)
		}
		for name, data := range want {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) != len(want) {
		t.Errorf("%s holds %v, want %d CRDs (MCS_UPDATE_CHART=1 go test ./test/kindconfig -run TestChartCRDs)", dir, files, len(want))
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s/%s is not crds.All's (%v): MCS_UPDATE_CHART=1 go test ./test/kindconfig -run TestChartCRDs", chartDir, name, err)
		}
	}
}

// TestChart: the Helm chart passes helm lint and renders, for each of its
// parts, the objects the kustomize package of that part builds (the
// chart's files/ are links to them), differences named: the chart keeps
// the mcs-system Namespace at uninstall, names the kubeconfig Secret
// without kustomize's content hash and rolls the controller out by a
// digest of it instead (the member agent's hub kubeconfig too), and
// leaves CoreDNS and kube-proxy to the
// distribution. Everything it renders applies, server-side dry-run, to a
// real kube-apiserver with the CRDs.
func TestChart(t *testing.T) {
	helm := helmBinary(t)
	root := repoRoot(t)
	chart := filepath.Join(root, chartDir)
	if out, err := exec.Command(helm, "lint", chart, "--kube-version", kubeVersion).CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	fsys := diskCopy(t, root, "deploy", "staging/src/k8s.io/multiclusterservices/crds")
	if err := fsys.WriteFile(filepath.Join(root, "deploy", "overlays", "hub", "clusterset.kubeconfig"), []byte(kubeconfigValue)); err != nil {
		t.Fatal(err)
	}
	coredns := buildParsed(t, fsys, filepath.Join(root, "deploy", "coredns"))
	without := func(objs, drop []*unstructured.Unstructured) []*unstructured.Unstructured {
		gone := map[string]bool{}
		for _, n := range names(drop) {
			gone[n] = true
		}
		var out []*unstructured.Unstructured
		for _, o := range objs {
			if !gone[objectName(o)] {
				out = append(out, o)
			}
		}
		return out
	}
	kubeconfigFile := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigFile, []byte(kubeconfigValue), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		args      []string
		kustomize []*unstructured.Unstructured
	}{
		{"a native member (the defaults)", nil, buildParsed(t, fsys, filepath.Join(root, "deploy", "member"))},
		{"a derived member", []string{"--set", "member.mode=derived"},
			without(buildParsed(t, fsys, filepath.Join(root, "deploy", "overlays", "derived-member")), coredns)},
		{"the hub's mcs-controller", []string{"--set", "member.enabled=false", "--set", "controller.enabled=true",
			"--set-file", "controller.kubeconfig=" + kubeconfigFile, "--set", "controller.derivedMembers={cluster-c}"},
			buildParsed(t, fsys, filepath.Join(root, "deploy", "overlays", "hub"))},
		{"pull mode's hub and planner", []string{"--set", "member.enabled=false", "--set", "planner.enabled=true"},
			buildParsed(t, fsys, filepath.Join(root, "deploy", "hub-pull"))},
		{"pull mode's member agent", []string{"--set", "memberAgent.enabled=true", "--set", "memberAgent.existingSecret=mcs-member-agent-hub"},
			buildParsed(t, fsys, filepath.Join(root, "deploy", "member-agent"))},
		{"pull mode's member agent in a derived member", []string{"--set", "member.mode=derived", "--set", "memberAgent.enabled=true", "--set", "memberAgent.existingSecret=mcs-member-agent-hub"},
			buildParsed(t, fsys, filepath.Join(root, "deploy", "overlays", "derived-member-agent"))},
		// deploy/monitoring assumes mcs-system exists (a member's or
		// the hub's package made it); the chart makes it for any part.
		{"monitoring", []string{"--set", "member.enabled=false", "--set", "monitoring.enabled=true"},
			append(buildParsed(t, fsys, filepath.Join(root, "deploy", "monitoring")), &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "mcs-system"}}})},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := normalize(helmTemplate(t, helm, chart, c.args...))
			want := normalize(c.kustomize)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("helm template %v differs from the kustomize package (-kustomize +chart):\n%s", c.args, diff)
			}
		})
	}

	t.Run("bad values are refused", func(t *testing.T) {
		for _, args := range [][]string{
			{"--set", "member.mode=sideways"},
			{"--set", "controller.enabled=true"},
			{"--set", "memberAgent.enabled=true"},
			{"--set", "member.enabled=false", "--set", "memberAgent.enabled=true", "--set", "memberAgent.existingSecret=hub"},
		} {
			if out, err := exec.Command(helm, append([]string{"template", "mcs", chart, "--kube-version", kubeVersion}, args...)...).CombinedOutput(); err == nil {
				t.Errorf("helm template %v renders, want refused:\n%s", args, out)
			}
		}
	})

	t.Run("everything applies to a real kube-apiserver", func(t *testing.T) {
		ctx := context.Background()
		cluster := framework.StartTestCluster(t, framework.StartTestEtcd(t), framework.ClusterOptions{Name: "chart"})
		dyn := dynamic.NewForConfigOrDie(cluster.RESTConfig())
		all := helmTemplate(t, helm, chart, "--include-crds", "--set", "controller.enabled=true", "--set-file", "controller.kubeconfig="+kubeconfigFile,
			"--set", "planner.enabled=true", "--set", "memberAgent.enabled=true", "--set-file", "memberAgent.hubKubeconfig="+kubeconfigFile)
		// The CRDs first, for real, then the rest as a dry-run.
		for _, pass := range []bool{true, false} {
			mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cluster.Client().Discovery()))
			for _, obj := range all {
				if (obj.GetKind() == "CustomResourceDefinition") != pass {
					continue
				}
				if err := Apply(ctx, dyn, mapper, obj, !pass && obj.GetKind() != "Namespace"); err != nil {
					t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
		}
	})
}

// buildParsed runs kustomize on dir of fsys and returns its objects as
// kustomize parsed them, not as it writes them out again: its writer
// turns the line break before a folded scalar's more-indented line into
// two (YAML keeps one), a blank line inside the admission policies' CEL
// expressions that kubectl apply -k sends on and helm does not. CEL
// ignores it; the comparison is of what the files say.
func buildParsed(t *testing.T, fsys filesys.FileSystem, dir string) []*unstructured.Unstructured {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, res := range resMap.Resources() {
		m, err := res.Map()
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// kubeVersion is the Kubernetes helm template renders for (the pinned
// release; Helm otherwise assumes its own default, older than the chart's
// kubeVersion allows).
const kubeVersion = "1.37.2"

// kubeconfigValue stands for the controller's kubeconfig of the members.
const kubeconfigValue = "apiVersion: v1\nkind: Config\n"

// helmBinary is the helm hack/build-tools.sh builds.
func helmBinary(t *testing.T) string {
	t.Helper()
	path := filepath.Join(repoRoot(t), "_output", "bin", "helm")
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (hack/build-tools.sh helm)", path)
		}
		t.Skipf("needs %s (hack/build-tools.sh helm)", path)
	}
	return path
}

// helmTemplate renders the chart with args and decodes the objects.
func helmTemplate(t *testing.T, helm, chart string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(helm, append([]string{"template", "mcs", chart, "--kube-version", kubeVersion}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, stderr.String())
	}
	objs, err := decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// generatedSuffix is the content hash kustomize appends to a generated
// Secret's name.
var generatedSuffix = regexp.MustCompile(`^(mcs-controller-kubeconfig)-[a-z0-9]{10}$`)

// normalize keys objects by kind, namespace and name and takes out the
// differences the chart makes on purpose (TestChart).
func normalize(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		o = o.DeepCopy()
		if o.GetKind() == "Namespace" {
			unstructured.RemoveNestedField(o.Object, "metadata", "annotations", "helm.sh/resource-policy")
			if len(o.GetAnnotations()) == 0 {
				unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
			}
		}
		if o.GetKind() == "Secret" {
			o.SetName(generatedSuffix.ReplaceAllString(o.GetName(), "$1"))
			// kustomize writes the data as given; the chart base64s it.
			unstructured.RemoveNestedField(o.Object, "type")
		}
		if o.GetKind() == "Deployment" {
			unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations", "multiclusterservices.k8s.io/kubeconfig-sha256")
			if a, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "metadata", "annotations"); len(a) == 0 {
				unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations")
			}
			volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range volumes {
				if s, ok := v.(map[string]any)["secret"].(map[string]any); ok {
					s["secretName"] = generatedSuffix.ReplaceAllString(s["secretName"].(string), "$1")
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, volumes, "spec", "template", "spec", "volumes")
		}
		out[objectName(o)] = o.Object
	}
	return out
}

package kindconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/multiclusterservices/crds"
)

// What `kubectl apply -k deploy/crds` installs is what crds.Install does
// (test/clusterset, the tests): mcs-api's published ServiceExport and
// ServiceImport plus the cluster selection fields, and ClusterProperty.
func TestDeployCRDsAreTheInstalledCRDs(t *testing.T) {
	root := repoRoot(t)
	mcsDir := moduleDir(t, "sigs.k8s.io/mcs-api")
	prefix := "https://raw.githubusercontent.com/kubernetes-sigs/mcs-api/" + moduleVersion(t, "sigs.k8s.io/mcs-api") + "/"
	fsys := diskCopy(t, root, "deploy", "staging/src/k8s.io/multiclusterservices/crds")
	kustomization := filepath.Join(root, "deploy", "crds", "kustomization.yaml")
	data, err := fsys.ReadFile(kustomization)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, name := range []string{"config/crd/multicluster.x-k8s.io_serviceexports.yaml", "config/crd/multicluster.x-k8s.io_serviceimports.yaml"} {
		local, err := os.ReadFile(filepath.Join(mcsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile(filepath.Join(root, "deploy", "crds", filepath.Base(name)), local); err != nil {
			t.Fatal(err)
		}
		text = strings.ReplaceAll(text, prefix+name, filepath.Base(name))
	}
	if err := fsys.WriteFile(kustomization, []byte(text)); err != nil {
		t.Fatal(err)
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range all {
		want[c.Name] = c
	}
	for _, obj := range build(t, fsys, filepath.Join(root, "deploy", "crds")) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, got); err != nil {
			t.Fatal(err)
		}
		w, ok := want[got.Name]
		if !ok {
			t.Errorf("deploy/crds installs %s, crds.All does not", got.Name)
			continue
		}
		delete(want, got.Name)
		if diff := cmp.Diff(w.Spec, got.Spec); diff != "" {
			t.Errorf("%s: deploy/crds differs from crds.All (-All +deploy):\n%s", got.Name, diff)
		}
	}
	for name := range want {
		t.Errorf("deploy/crds does not install %s", name)
	}
}

// Package kindconfig checks kind-config/ where Docker cannot run: kind
// cluster configs are decoded strictly by kind's own types, every manifest
// is applied to a real kube-apiserver with server-side dry-run after the
// CRDs are installed, and the Dockerfile's build context is built the way
// the Dockerfile builds it and must give the same binary as hack/build.sh.
package kindconfig

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/multiclusterservices/crds"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "..", "..")
}

// TestKindClusterConfigs decodes every kind config strictly and checks that
// no two members' pod or Service ranges overlap, nor the clusterset range.
func TestKindClusterConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "kind-config", "clusters", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("want configs for 3 clusters, found %v (%v)", files, err)
	}
	ranges := map[string]netip.Prefix{
		"clusterset IPv4": netip.MustParsePrefix("10.250.0.0/16"),
		"clusterset IPv6": netip.MustParsePrefix("fd00:10:250::/108"),
	}
	names := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c kindv1alpha4.Cluster
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" || c.Name == "" || names[c.Name] {
			t.Errorf("%s: kind %q apiVersion %q name %q (names must be unique)", f, c.Kind, c.APIVersion, c.Name)
		}
		names[c.Name] = true
		if c.Networking.KubeProxyMode != kindv1alpha4.NFTablesProxyMode {
			t.Errorf("%s: kube-proxy mode %q, want nftables", f, c.Networking.KubeProxyMode)
		}
		for what, s := range map[string]string{"pods": c.Networking.PodSubnet, "services": c.Networking.ServiceSubnet} {
			// A dual-stack cluster has a range per family, IPv4 first.
			families := strings.Split(s, ",")
			if want := map[kindv1alpha4.ClusterIPFamily]int{kindv1alpha4.DualStackFamily: 2}[c.Networking.IPFamily]; want != 0 && len(families) != want {
				t.Errorf("%s: %s ranges %q, want one per family of a dual-stack cluster", f, what, s)
			}
			for i, r := range families {
				p, err := netip.ParsePrefix(r)
				if err != nil {
					t.Errorf("%s: %s range %q: %v", f, what, r, err)
					continue
				}
				if p.Addr().Is4() != (i == 0) {
					t.Errorf("%s: %s range %d is %s: IPv4 first, then IPv6", f, what, i, p)
				}
				for other, q := range ranges {
					if p.Overlaps(q) {
						t.Errorf("%s: %s range %s overlaps %s %s", f, what, p, other, q)
					}
				}
				ranges[fmt.Sprintf("%s %s %d", c.Name, what, i)] = p
			}
		}
	}
}

// TestManifestsDryRun applies every manifest of kind-config/ to a real
// kube-apiserver with server-side dry-run, as hack/kind-e2e.sh fills them in.
func TestManifestsDryRun(t *testing.T) {
	ctx := context.Background()
	cluster := framework.StartTestCluster(t, framework.StartTestEtcd(t), framework.ClusterOptions{Name: "mcs-a"})
	prepareMember(t, cluster)

	dyn := dynamic.NewForConfigOrDie(cluster.RESTConfig())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cluster.Client().Discovery()))
	values := map[string]string{"CLUSTER": "mcs-a", "POD_SUBNET": "10.101.0.0/16", "KUBECONFIG_B64": "e30K"}

	manifests, err := filepath.Glob(filepath.Join(repoRoot(t), "kind-config", "*.yaml"))
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	applied := 0
	for _, path := range manifests {
		objs, err := Objects(path, values)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			if err := Apply(ctx, dyn, mapper, obj, true); err != nil {
				t.Errorf("%s: %s %s: %v", filepath.Base(path), obj.GetKind(), obj.GetName(), err)
			}
			if obj.GetKind() == "Namespace" {
				// Objects in it can only be dry-run once it exists.
				_, _ = cluster.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName()}}, metav1.CreateOptions{})
			}
			applied++
		}
	}
	t.Logf("%d objects from %d manifests accepted by kube-apiserver (server-side dry-run)", applied, len(manifests))
}

// TestDockerBuildContextBuildsTheSameBinary builds the images' binaries
// (kube-proxy, mcs-controller, echoserver) from a copy of the Dockerfile's
// build context (the repository minus .dockerignore), with the command the
// Dockerfile runs, and compares them with the binaries hack/build.sh made:
// the images carry exactly what the tests tested.
func TestDockerBuildContextBuildsTheSameBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kube-proxy")
	}
	root := repoRoot(t)
	dockerfile, err := os.ReadFile(filepath.Join(root, "kind-config", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	run := regexp.MustCompile(`(?m)^RUN (hack/build\.sh .*)$`).FindSubmatch(dockerfile)
	if run == nil || !bytes.Contains(run[1], []byte("kube-proxy")) {
		t.Fatalf("the Dockerfile does not build kube-proxy with hack/build.sh")
	}
	if _, err := framework.Binary("kube-proxy"); err != nil {
		t.Skipf("kube-proxy not built (make build): %v", err)
	}

	ignored := readDockerignore(t, root)
	context := t.TempDir()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		for _, ig := range ignored {
			if rel == ig || strings.HasPrefix(rel, ig+string(filepath.Separator)) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		target := filepath.Join(context, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		info, err := d.Info()
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", string(run[1]))
	cmd.Dir = context
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building in the Docker build context: %v\n%s", err, out)
	}
	for _, name := range strings.Fields(string(run[1]))[1:] {
		built, err := framework.Binary(name)
		if err != nil {
			t.Errorf("the Dockerfile builds %s, which make build did not: %v", name, err)
			continue
		}
		if a, b := sum(t, built), sum(t, filepath.Join(context, "_output", "bin", name)); a != b {
			t.Errorf("the build context gives a different %s: %s vs %s", name, a, b)
		}
	}
}

func readDockerignore(t *testing.T, root string) []string {
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.TrimSuffix(line, "/"))
	}
	return out
}

func sum(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

// prepareMember gives cluster what a member has before any manifest of
// ours is applied: the MCS CRDs, and the ServiceAccounts kubeadm creates.
func prepareMember(t *testing.T, cluster *framework.Cluster) {
	t.Helper()
	ctx := context.Background()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, apiextensionsclient.NewForConfigOrDie(cluster.RESTConfig()), all...); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"kube-proxy", "coredns"} {
		_, _ = cluster.Client().CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	}
}

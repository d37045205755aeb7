package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/crds"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// tokenTTL is how long the credential plugin's tokens live: several
// expire during the test.
const tokenTTL = 3 * time.Second

// The credential plugin (KEP-541/KEP-5339): a token valid for
// PLUGIN_TTL, signed with PLUGIN_KEY for the server it is asked for
// (KUBERNETES_EXEC_INFO's spec.cluster.server), its expiry said to
// client-go; each run appends a line to PLUGIN_LOG.
const pluginSource = `package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	var info struct {
		Spec struct {
			Cluster struct {
				Server string ` + "`json:\"server\"`" + `
			} ` + "`json:\"cluster\"`" + `
		} ` + "`json:\"spec\"`" + `
	}
	if err := json.Unmarshal([]byte(os.Getenv("KUBERNETES_EXEC_INFO")), &info); err != nil || info.Spec.Cluster.Server == "" {
		fmt.Fprintln(os.Stderr, "no cluster info (provideClusterInfo)")
		os.Exit(1)
	}
	ttl, _ := time.ParseDuration(os.Getenv("PLUGIN_TTL"))
	exp := time.Now().Add(ttl)
	mac := hmac.New(sha256.New, []byte(os.Getenv("PLUGIN_KEY")))
	fmt.Fprintf(mac, "%d|%s", exp.Unix(), info.Spec.Cluster.Server)
	token := strconv.FormatInt(exp.Unix(), 10) + "." + hex.EncodeToString(mac.Sum(nil))
	f, _ := os.OpenFile(os.Getenv("PLUGIN_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	fmt.Fprintln(f, info.Spec.Cluster.Server)
	f.Close()
	fmt.Printf(` + "`" + `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":%q,"expirationTimestamp":%q}}` + "`" + `, token, exp.UTC().Format(time.RFC3339))
}
`

// tokenWebhook is the members' token authenticator: it accepts a
// plugin token, for the member it was asked for, until it expires, as the
// controller's user. It counts the expired tokens it was shown.
type tokenWebhook struct {
	key string
	srv *httptest.Server
	mu  sync.Mutex
	// servers are the members' URLs, by cluster ID: a token is good for
	// the member it was signed for only.
	servers map[string]string
}

func newTokenWebhook(t *testing.T, key string) *tokenWebhook {
	w := &tokenWebhook{key: key, servers: map[string]string{}}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var review authenticationv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		review.Status = authenticationv1.TokenReviewStatus{}
		expS, sig, _ := strings.Cut(review.Spec.Token, ".")
		exp, err := strconv.ParseInt(expS, 10, 64)
		// The audience is the member: the apiserver's URL the plugin
		// signed for, the member told by the webhook's path.
		w.mu.Lock()
		server := w.servers[strings.TrimPrefix(r.URL.Path, "/member/")]
		w.mu.Unlock()
		mac := hmac.New(sha256.New, []byte(w.key))
		fmt.Fprintf(mac, "%d|%s", exp, server)
		switch {
		case err != nil || server == "" || !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))):
		case time.Now().Unix() > exp:
			// Expired: refused.
		default:
			review.Status.Authenticated = true
			review.Status.User = authenticationv1.UserInfo{Username: controllerUser, Groups: []string{"system:authenticated"}}
		}
		_ = json.NewEncoder(rw).Encode(review)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// configFor writes the apiserver's webhook kubeconfig for member id.
func (w *tokenWebhook) configFor(t *testing.T, dir, id string) string {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["webhook"] = &clientcmdapi.Cluster{Server: w.srv.URL + "/member/" + id,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})}
	kc.AuthInfos["apiserver"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["webhook"] = &clientcmdapi.Context{Cluster: "webhook", AuthInfo: "apiserver"}
	kc.CurrentContext = "webhook"
	path := filepath.Join(dir, "token-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startPluginMember starts a member whose apiserver takes the plugin's
// tokens through w, besides the framework's static ones.
func startPluginMember(t *testing.T, etcd *framework.Etcd, dir, id string, w *tokenWebhook) *testMember {
	t.Helper()
	ctx := context.Background()
	mdir := filepath.Join(dir, id)
	if err := os.MkdirAll(mdir, 0o700); err != nil {
		t.Fatal(err)
	}
	cluster, err := framework.StartCluster(ctx, framework.ClusterOptions{Name: id, Etcd: etcd, Dir: mdir, ExtraArgs: []string{
		"--authentication-token-webhook-config-file=" + w.configFor(t, mdir, id),
		"--authentication-token-webhook-version=v1",
		// No cache: an expired token must be refused the moment it is.
		"--authentication-token-webhook-cache-ttl=0s",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	w.mu.Lock()
	w.servers[id] = cluster.URL()
	w.mu.Unlock()
	return prepareMember(t, cluster, id)
}

// buildPlugin builds the credential plugin.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(pluginSource), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "plugin")
	cmd := exec.Command("go", "build", "-o", bin, "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the credential plugin: %v\n%s", err, out)
	}
	return bin
}

// caData is the CA bundle of m's apiserver, as a profile's access
// provider carries it.
func caData(t *testing.T, m *testMember) []byte {
	t.Helper()
	caFile, err := m.cluster.CAFile()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// clusterProfile returns a ClusterProfile for m in the hub's fleet
// namespace, reached through access provider "token".
func clusterProfile(t *testing.T, name string, m *testMember, healthy metav1.ConditionStatus, properties ...inventoryv1alpha1.Property) *unstructured.Unstructured {
	t.Helper()
	ca := caData(t, m)
	cp := &inventoryv1alpha1.ClusterProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: inventoryv1alpha1.SchemeGroupVersion.String(), Kind: "ClusterProfile"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet", Labels: map[string]string{inventoryv1alpha1.LabelClusterManager: "test-manager"}},
		Spec:       inventoryv1alpha1.ClusterProfileSpec{ClusterManager: inventoryv1alpha1.ClusterManager{Name: "test-manager"}},
		Status: inventoryv1alpha1.ClusterProfileStatus{
			Conditions: []metav1.Condition{
				{Type: inventoryv1alpha1.ConditionJoined, Status: metav1.ConditionTrue, Reason: "Joined", LastTransitionTime: metav1.Now()},
				{Type: inventoryv1alpha1.ConditionControlPlaneHealthy, Status: healthy, Reason: "Probed", LastTransitionTime: metav1.Now()},
			},
			Properties:      properties,
			AccessProviders: []inventoryv1alpha1.AccessProvider{{Name: "token", Cluster: inventoryv1alpha1.Cluster{Server: m.cluster.URL(), CertificateAuthorityData: ca}}},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cp)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// putProfile creates or replaces a profile, status included, as a
// cluster manager writes it.
func putProfile(t *testing.T, hub dynamic.Interface, u *unstructured.Unstructured) {
	t.Helper()
	putProfileAt(t, hub.Resource(inventoryv1alpha1.Resource).Namespace("fleet"), u)
}

// putProfileAt creates or replaces a profile through profiles (one
// version's), status included.
func putProfileAt(t *testing.T, profiles dynamic.ResourceInterface, u *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	_, err := profiles.Get(ctx, u.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err = profiles.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the status of profile "+u.GetName(), func() (bool, string) {
		cur, err := profiles.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		next := u.DeepCopy()
		next.SetResourceVersion(cur.GetResourceVersion())
		_, err = profiles.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		return err == nil, errString(err)
	})
}

// installInventory makes m a hub with an inventory, fleet: the
// ClusterProfile CRD (unless installCRD is false: the caller installed
// one), the namespace and deploy/'s RBAC for it; and writes
// the operator's access provider file, naming plugin for the "token"
// provider (its tokens signed with the webhook's key, living tokenTTL, its
// runs logged to dir/plugin.log). It returns a client of the hub and the
// file.
func installInventory(t *testing.T, m *testMember, dir, plugin string, installCRD bool) (dynamic.Interface, string) {
	t.Helper()
	createNamespace(t, m, "fleet")
	if installCRD {
		crd, err := crds.ClusterProfile()
		if err != nil {
			t.Fatal(err)
		}
		if err := crds.Install(context.Background(), apiextensionsclient.NewForConfigOrDie(m.cluster.RESTConfig()), crd); err != nil {
			t.Fatal(err)
		}
	}
	applyRBAC(t, m.kube, repoPath(t, "deploy", "mcs-controller", "inventory-profiles-rbac.yaml"))
	providers := filepath.Join(dir, "access-providers.json")
	if err := os.WriteFile(providers, []byte(fmt.Sprintf(`{"providers": [{"name": "token", "execConfig": {
	  "apiVersion": "client.authentication.k8s.io/v1", "command": %q, "provideClusterInfo": true,
	  "env": [{"name": "PLUGIN_KEY", "value": "test-signing-key"}, {"name": "PLUGIN_TTL", "value": %q}, {"name": "PLUGIN_LOG", "value": %q}]}}]}`,
		plugin, tokenTTL.String(), filepath.Join(dir, "plugin.log"))), 0o600); err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(m.cluster.RESTConfig()), providers
}

// TestMCSControllerClusterProfiles: members given only as ClusterProfiles
// of the hub's inventory, reached with a credential plugin whose tokens
// expire during the test, join, leave when unhealthy or deleted, and
// are refused for the attacks a member Secret is refused for.
func TestMCSControllerClusterProfiles(t *testing.T) {
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	webhook := newTokenWebhook(t, "test-signing-key")
	plugin := buildPlugin(t)
	a := startMember(t, etcd, dir, "cluster-a")
	b := startPluginMember(t, etcd, dir, "cluster-b", webhook)
	c := startPluginMember(t, etcd, dir, "cluster-c", webhook)
	for _, m := range []*testMember{a, b, c} {
		createNamespace(t, m, "demo")
	}
	hub, providers := installInventory(t, a, dir, plugin, true)
	pluginLog := filepath.Join(dir, "plugin.log")
	kubeconfig := writeControllerKubeconfig(t, dir, []*testMember{a})
	r := startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, func(o *app.Options) {
		o.Contexts = []string{"cluster-a"}
		o.HubContext = "cluster-a"
		o.InventoryNamespace = "fleet"
		o.InventorySelector = inventoryv1alpha1.LabelClusterManager + "=test-manager"
		o.InventoryAccessProviders = providers
		o.MemberRecheckPeriod = time.Second
	})
	r.waitReady(t)
	exportService(t, a, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.1.0.1"))
	exportService(t, b, "demo", "web", servicePorts("http", 80), endpoints("http", 8080, "10.2.0.1"))
	waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080")
	const both = "cluster-a=10.1.0.1 ports http:8080;cluster-b=10.2.0.1 ports http:8080"
	const onlyA = "cluster-a=10.1.0.1 ports http:8080"

	t.Run("a profile created is a member joining", func(t *testing.T) {
		start := time.Now()
		putProfile(t, hub, clusterProfile(t, "b", b, metav1.ConditionTrue))
		waitSlices(t, b, "demo", "web", both)
		waitSlices(t, a, "demo", "web", both)
		t.Logf("FIGURE profile created -> imports written in every member: %s", time.Since(start).Round(time.Millisecond))
		waitEventOn(t, a, "ClusterProfile", "fleet", "b", "MemberJoined")
		r.waitMetric(t, "one joined profile", `mcs_controller_inventory_members{source="profile",state="joined"} 1`)
	})

	t.Run("a profile naming another cluster than its server's is refused", func(t *testing.T) {
		// Points at cluster-c's server (a cluster no member holds yet)
		// and says it is cluster-a.
		putProfile(t, hub, clusterProfile(t, "liar", c, metav1.ConditionTrue, inventoryv1alpha1.Property{Name: aboutv1alpha1.ClusterIDProperty, Value: "cluster-a"}))
		waitEventOn(t, a, "ClusterProfile", "fleet", "liar", "MemberRefused")
		// Points at cluster-b's server with no claim: the ID is taken.
		putProfile(t, hub, clusterProfile(t, "second-b", b, metav1.ConditionTrue))
		waitEventOn(t, a, "ClusterProfile", "fleet", "second-b", "MemberRefused")
		r.waitMetric(t, "two refused profiles", `mcs_controller_inventory_members{source="profile",state="refused"} 2`)
		for _, name := range []string{"liar", "second-b"} {
			if err := hub.Resource(inventoryv1alpha1.Resource).Namespace("fleet").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("a member whose Service range overlaps the clusterset's is refused", func(t *testing.T) {
		if _, err := c.kube.NetworkingV1().ServiceCIDRs().Create(context.Background(), &networkingv1.ServiceCIDR{
			ObjectMeta: metav1.ObjectMeta{Name: "overlap"},
			Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.250.16.0/24"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		putProfile(t, hub, clusterProfile(t, "c", c, metav1.ConditionTrue))
		waitEventOn(t, a, "ClusterProfile", "fleet", "c", "MemberRefused")
		r.waitMetric(t, "still two members", "\nmcs_controller_clusters 2\n")
	})

	t.Run("the plugin's tokens expire and are renewed", func(t *testing.T) {
		// Several lifetimes of a token, each needing a new one for the
		// controller's requests to cluster-b (its source Lease renewals).
		eventually(t, 8*tokenTTL, "the plugin run four times for cluster-b", func() (bool, string) {
			data, _ := os.ReadFile(pluginLog)
			n := strings.Count(string(data), b.cluster.URL())
			return n >= 4, fmt.Sprint(n)
		})
		// Still written to after they expired (a watch opened earlier
		// would not prove it): a new export's import and slices are
		// created in b, and b's change arrives in a.
		// Each run is counted, and timed, in the controller's metrics.
		out, err := httpGet("http://" + r.metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if v := metricValue(out, `mcs_controller_credential_plugin_runs_total{call_status="no_error",exit_code="0"}`); v < 4 {
			t.Errorf("%v plugin runs without error counted after four", v)
		}
		// Runs for two members may overlap, and only those that do not
		// are timed.
		if v := metricValue(out, "mcs_controller_credential_plugin_duration_seconds_count"); v < 1 {
			t.Errorf("%v plugin runs timed after four", v)
		}
		exportService(t, a, "demo", "api", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.1.0.9"))
		waitSlices(t, b, "demo", "api", "cluster-a=10.1.0.9 ports grpc:9000")
		setEndpoints(t, b, "demo", "web", "10.2.0.2")
		waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080;cluster-b=10.2.0.2 ports http:8080")
	})

	t.Run("a profile marked unhealthy is a member leaving, and healthy again joining", func(t *testing.T) {
		start := time.Now()
		putProfile(t, hub, clusterProfile(t, "b", b, metav1.ConditionFalse))
		waitSlices(t, a, "demo", "web", onlyA)
		t.Logf("FIGURE profile unhealthy -> its endpoints gone from the others: %s", time.Since(start).Round(time.Millisecond))
		waitEventOn(t, a, "ClusterProfile", "fleet", "b", "MemberLeft")
		putProfile(t, hub, clusterProfile(t, "b", b, metav1.ConditionTrue))
		waitSlices(t, a, "demo", "web", "cluster-a=10.1.0.1 ports http:8080;cluster-b=10.2.0.2 ports http:8080")
	})

	t.Run("a profile deleted is a member leaving", func(t *testing.T) {
		start := time.Now()
		if err := hub.Resource(inventoryv1alpha1.Resource).Namespace("fleet").Delete(context.Background(), "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlices(t, a, "demo", "web", onlyA)
		t.Logf("FIGURE profile deleted -> its endpoints gone from the others: %s", time.Since(start).Round(time.Millisecond))
		eventually(t, 30*time.Second, "nothing of the controller's left in cluster-b", func() (bool, string) {
			imports, err := b.mcs.MulticlusterV1beta1().ServiceImports("").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(imports.Items) == 0, fmt.Sprint(len(imports.Items))
		})
		r.waitMetric(t, "one member", "\nmcs_controller_clusters 1\n")
	})
}

// metricValue returns the value of the sample named (with its labels)
// name in a /metrics text, or -1.
func metricValue(out, name string) float64 {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

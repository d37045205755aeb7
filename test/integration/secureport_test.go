package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// TestMCSControllerSecurePort: the controller's /metrics (with member
// names, queue depths, conflicts) and profiles answer only callers the
// cluster it runs in authenticates and authorizes, as a Kubernetes
// component's do; /healthz, /livez and /readyz answer anyone, for the
// probes. Tried as a caller on the network without credentials, with a
// token of a user granted nothing, and with one granted get on /metrics,
// against a real kube-apiserver doing the reviews.
func TestMCSControllerSecurePort(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	etcd := framework.StartTestEtcd(t)
	a := startMember(t, etcd, dir, "cluster-a")
	// The cluster the controller runs in, which reviews its callers.
	viewer := framework.User{Name: "prometheus", Token: "viewer-token-0123456789"}
	nobody := framework.User{Name: "nobody", Token: "nobody-token-0123456789"}
	home, err := framework.StartCluster(ctx, framework.ClusterOptions{Name: "home", Etcd: etcd, Dir: filepath.Join(dir, "home"), ExtraUsers: []framework.User{viewer, nobody}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(home.Stop)
	if _, err := home.Client().RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := home.Client().RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: viewer.Name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeControllerKubeconfig(t, dir, []*testMember{a})
	startControllerWith(t, kubeconfig, "replica-1", 8*time.Second, func(o *app.Options) {
		o.SecureServing.BindAddress = []byte{127, 0, 0, 1}
		o.SecureServing.BindPort = port
		o.Authentication.RemoteKubeConfigFile = home.Kubeconfig()
		o.Authorization.RemoteKubeConfigFile = home.Kubeconfig()
		o.Profiling = true
	})
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The certificate is self-signed; what is checked here is who
		// may read, not who serves.
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	eventually(t, 60*time.Second, "the secure port's /readyz", func() (bool, string) {
		code, body := get("/readyz", "")
		return code == http.StatusOK, fmt.Sprint(code, " ", body)
	})
	for _, tc := range []struct {
		what, path, token string
		want              int
	}{
		{"attack: anyone on the network reads /metrics", "/metrics", "", http.StatusForbidden},
		{"attack: a user granted nothing reads /metrics", "/metrics", nobody.Token, http.StatusForbidden},
		{"attack: a made-up token reads /metrics", "/metrics", "not-a-token", http.StatusUnauthorized},
		{"attack: anyone on the network takes a profile", "/debug/pprof/", "", http.StatusForbidden},
		{"a user granted get on /metrics reads it", "/metrics", viewer.Token, http.StatusOK},
		{"anyone reads /healthz", "/healthz", "", http.StatusOK},
		{"anyone reads /livez", "/livez", "", http.StatusOK},
	} {
		code, body := get(tc.path, tc.token)
		if code != tc.want {
			t.Errorf("%s: %d, want %d: %s", tc.what, code, tc.want, body)
		}
		if code == http.StatusOK && tc.path == "/metrics" && !strings.Contains(body, "mcs_controller_") {
			t.Errorf("%s: no mcs_controller metrics in the answer", tc.what)
		}
	}
}

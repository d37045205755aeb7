package inventory

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	"k8s.io/multiclusterservices/export"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

func TestMain(m *testing.M) {
	// The test binary stands in for the controller's executable as the
	// credential plugins' runner (TestPluginRunsPerProvider).
	if RunsCredentialPlugin() {
		os.Exit(RunCredentialPlugin())
	}
	// The fake clientset serves no streaming lists.
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

// member serves the ClusterProperty of a member cluster whose ID can be
// changed.
type member struct {
	url string
	ca  []byte
	id  atomic.Value
}

func newMemberAPI(t *testing.T, id string) *member {
	t.Helper()
	m := &member{}
	m.id.Store(id)
	path := fmt.Sprintf("/apis/%s/v1alpha1/clusterproperties/%s", aboutv1alpha1.GroupName, aboutv1alpha1.ClusterIDProperty)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != path || r.Header.Get("Authorization") != "Bearer member-token" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		fmt.Fprintf(w, `{"apiVersion":"about.k8s.io/v1alpha1","kind":"ClusterProperty","metadata":{"name":%q},"spec":{"value":%q}}`, aboutv1alpha1.ClusterIDProperty, m.id.Load().(string))
	}))
	t.Cleanup(srv.Close)
	m.url = srv.URL
	m.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return m
}

// kubeconfig returns a kubeconfig reaching m, changed by mutate.
func kubeconfig(t *testing.T, m *member, mutate func(*clientcmdapi.AuthInfo, *clientcmdapi.Cluster)) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server, cluster.CertificateAuthorityData = m.url, m.ca
	user := clientcmdapi.NewAuthInfo()
	user.Token = "member-token"
	if mutate != nil {
		mutate(user, cluster)
	}
	kc.Clusters["m"], kc.AuthInfos["m"] = cluster, user
	kc.Contexts["m"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "m"}
	kc.CurrentContext = "m"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestConfigFromKubeconfig(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(*clientcmdapi.AuthInfo, *clientcmdapi.Cluster)
		allowProxy bool
		wantErr    string
	}{
		{name: "inline token"},
		{name: "a proxying front end's path prefix", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.Server = "https://192.0.2.1:6443/k8s/clusters/c-1/"
		}},
		{name: "proxy-url, allowed", allowProxy: true, mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.ProxyURL = "http://proxy.example:3128"
		}},
		// The member's credentials to whoever answers, or is on the path.
		{name: "insecure-skip-tls-verify", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
		}, wantErr: "insecure-skip-tls-verify"},
		{name: "insecure-skip-tls-verify, proxy allowed", allowProxy: true, mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
		}, wantErr: "insecure-skip-tls-verify"},
		{name: "http server", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.Server = "http://192.0.2.1:8080"
		}, wantErr: "not https"},
		// Every request, and the token, through a host of the Secret
		// writer's choosing.
		{name: "proxy-url", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.ProxyURL = "http://proxy.example:3128"
		}, wantErr: "proxy-url"},
		{name: "credentials in the server URL", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.Server = "https://admin:hunter2@192.0.2.1:6443"
		}, wantErr: "credentials in its URL"},
		{name: "query", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.Server = "https://192.0.2.1:6443/?x=1"
		}, wantErr: "query"},
		// Through an apiserver's service proxy to a Service behind it.
		{name: "a path into an API", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.Server = "https://192.0.2.1:6443/api/v1/namespaces/kube-system/services/https:metrics-server:443/proxy"
		}, wantErr: "path into an API"},
		{name: "dot segments", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.Server = "https://192.0.2.1:6443/k8s/../apis"
		}, wantErr: "path into an API"},
		{name: "escaped path", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.Server = "https://192.0.2.1:6443/k8s%2Fclusters"
		}, wantErr: "escaped path"},
		{name: "no host", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.Server = "https:///k8s"
		}, wantErr: "no host"},
		{name: "inline client certificate", mutate: func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
			u.Token, u.ClientCertificateData, u.ClientKeyData = "", []byte("cert"), []byte("key")
		}},
		{name: "exec plugin", mutate: func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "sh", APIVersion: "client.authentication.k8s.io/v1"}
		}, wantErr: "exec credential plugins"},
		{name: "auth provider", mutate: func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		}, wantErr: "auth-provider"},
		{name: "token file", mutate: func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
			u.Token, u.TokenFile = "", "/var/run/secrets/kubernetes.io/serviceaccount/token"
		}, wantErr: "tokenFile"},
		{name: "client key file", mutate: func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
			u.ClientCertificate, u.ClientKey = "/etc/kubernetes/pki/apiserver.crt", "/etc/kubernetes/pki/apiserver.key"
		}, wantErr: "file paths"},
		{name: "CA file", mutate: func(_ *clientcmdapi.AuthInfo, c *clientcmdapi.Cluster) {
			c.CertificateAuthority = "/etc/kubernetes/pki/ca.crt"
		}, wantErr: "certificate-authority is a file path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ConfigFromKubeconfig(kubeconfig(t, &member{url: "https://192.0.2.1:6443"}, tc.mutate), tc.allowProxy)
			if tc.wantErr == "" {
				if err != nil || !strings.HasPrefix(cfg.Host, "https://192.0.2.1:6443") {
					t.Fatalf("got %v, %v", cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got error %v, want one saying %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the refusal repeats the URL's password: %v", err)
			}
		})
	}
	if _, err := ConfigFromKubeconfig(nil, false); err == nil {
		t.Error("an empty Secret was accepted")
	}
	two := clientcmdapi.NewConfig()
	for _, n := range []string{"x", "y"} {
		two.Clusters[n] = &clientcmdapi.Cluster{Server: "https://192.0.2.1"}
		two.Contexts[n] = &clientcmdapi.Context{Cluster: n}
	}
	data, _ := clientcmd.Write(*two)
	if _, err := ConfigFromKubeconfig(data, false); err == nil || !strings.Contains(err.Error(), "current context") {
		t.Errorf("two contexts and no current one: %v", err)
	}
}

// recorder is a Membership that records what it was told.
type recorder struct {
	mu    sync.Mutex
	calls []string
	// props are the members whose properties it was told changed.
	props []string
}

func (r *recorder) Join(_ context.Context, m topology.Member) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "join "+m.ClusterID+" as "+m.Context)
	return nil
}

func (r *recorder) PropertiesChanged(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.props = append(r.props, id)
}

func (r *recorder) propsTold() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.props)
}

func (r *recorder) Leave(_ context.Context, id, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "leave "+id)
	return nil
}

func (r *recorder) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got := slices.Clone(r.calls)
		r.mu.Unlock()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("membership calls\n got %q\nwant %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func secret(name string, kubeconfig []byte) *v1.Secret {
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mcs-system", Labels: map[string]string{DefaultSelector: ""}},
		Data:       map[string][]byte{KubeconfigKey: kubeconfig},
	}
}

// Secrets added, refused, changed and deleted drive joins and leaves;
// a cluster ID taken is refused until it is free again.
func TestInventoryFollowsSecrets(t *testing.T) {
	ctx := t.Context()
	b, dup := newMemberAPI(t, "cluster-b"), newMemberAPI(t, "cluster-b")
	pwned := filepath.Join(t.TempDir(), "pwned")
	hub := kubefake.NewSimpleClientset(
		// Not labelled as a member: ignored.
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "mcs-system"}, Data: map[string][]byte{KubeconfigKey: kubeconfig(t, b, nil)}},
	)
	sel, _ := labels.Parse(DefaultSelector)
	inv := New(Config{Hub: hub, Namespace: "mcs-system", Selector: sel, ClusterIDTimeout: time.Second,
		SyncTimeout: time.Second, LeaveTimeout: time.Second, RecheckPeriod: 100 * time.Millisecond}, nil)
	r := &recorder{}
	go inv.Run(ctx, r)

	secrets := hub.CoreV1().Secrets("mcs-system")
	if _, err := secrets.Create(ctx, secret("b", kubeconfig(t, b, nil)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "join cluster-b as secret/mcs-system/b")

	// An exec plugin would run in the controller: refused, never run.
	evil := kubeconfig(t, b, func(u *clientcmdapi.AuthInfo, _ *clientcmdapi.Cluster) {
		u.Token = ""
		u.Exec = &clientcmdapi.ExecConfig{Command: "touch", Args: []string{pwned}, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	})
	if _, err := secrets.Create(ctx, secret("evil", evil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A second Secret for the ID cluster-b holds: refused.
	if _, err := secrets.Create(ctx, secret("dup", kubeconfig(t, dup, nil)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState(t, inv, map[string]State{"secret/mcs-system/b": Joined, "secret/mcs-system/evil": Refused, "secret/mcs-system/dup": Refused})
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("the exec plugin of a member Secret ran")
	}

	// Attack: b's administrator renames it (its own ClusterProperty) to
	// escape what the operator confined cluster-b to. It leaves and is
	// refused, never served as cluster-z; the ID it was bound to stays
	// its own, so dup does not take it while b is away.
	b.id.Store("cluster-z")
	r.waitFor(t, "join cluster-b as secret/mcs-system/b", "leave cluster-b")
	waitState(t, inv, map[string]State{"secret/mcs-system/b": Refused, "secret/mcs-system/evil": Refused, "secret/mcs-system/dup": Refused})
	time.Sleep(300 * time.Millisecond) // three recheck periods
	r.waitFor(t, "join cluster-b as secret/mcs-system/b", "leave cluster-b")
	inv.mu.Lock()
	msg := inv.entries["secret/mcs-system/b"].message
	inv.mu.Unlock()
	if !strings.Contains(msg, `it joined as cluster "cluster-b"`) || !strings.Contains(msg, `holds "cluster-z"`) {
		t.Errorf("b's refusal says %q", msg)
	}
	// Back to the ID it was bound to: served again.
	b.id.Store("cluster-b")
	r.waitFor(t, "join cluster-b as secret/mcs-system/b", "leave cluster-b", "join cluster-b as secret/mcs-system/b")

	// Attack: a Secret whose operator states cluster-c, reaching a
	// cluster that calls itself cluster-x, is refused.
	x := newMemberAPI(t, "cluster-x")
	stated := secret("c", kubeconfig(t, x, nil))
	stated.Annotations = map[string]string{export.AnnotationMemberClusterID: "cluster-c"}
	if _, err := secrets.Create(ctx, stated, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState(t, inv, map[string]State{"secret/mcs-system/b": Joined, "secret/mcs-system/c": Refused, "secret/mcs-system/evil": Refused, "secret/mcs-system/dup": Refused})
	// Its cluster agreeing, it joins as the ID stated.
	x.id.Store("cluster-c")
	r.waitFor(t, "join cluster-b as secret/mcs-system/b", "leave cluster-b", "join cluster-b as secret/mcs-system/b", "join cluster-c as secret/mcs-system/c")

	if err := secrets.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "join cluster-b as secret/mcs-system/b", "leave cluster-b", "join cluster-b as secret/mcs-system/b", "join cluster-c as secret/mcs-system/c", "leave cluster-b", "join cluster-b as secret/mcs-system/dup")
	waitState(t, inv, map[string]State{"secret/mcs-system/c": Joined, "secret/mcs-system/evil": Refused, "secret/mcs-system/dup": Joined})

	// Events are recorded in the background: the last may still be on
	// its way.
	wanted := []string{"evil/MemberRefused", "b/MemberJoined", "b/MemberLeft", "dup/MemberRefused", "dup/MemberJoined"}
	var reasons []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		events, _ := hub.EventsV1().Events("mcs-system").List(ctx, metav1.ListOptions{})
		reasons = reasons[:0]
		for _, e := range events.Items {
			reasons = append(reasons, e.Regarding.Name+"/"+e.Reason)
		}
		if !slices.ContainsFunc(wanted, func(w string) bool { return !slices.Contains(reasons, w) }) || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range wanted {
		if !slices.Contains(reasons, want) {
			t.Errorf("no event %s in %v", want, reasons)
		}
	}
}

func waitState(t *testing.T, inv *Inventory, want map[string]State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := inv.States()
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("inventory states\n got %v\nwant %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Whoever writes a member Secret names any https server, such as a
// service only the controller reaches, and reads the Secret's events:
// what the server answers never reaches them, whether a bare body (which
// client-go quotes, up to 2 KiB) or a Status's message. The event says
// the status code.
func TestRefusedReplyNeverInEvents(t *testing.T) {
	const marker = "INTERNAL-SECRET-d41d8cd98f00"
	serve := func(code int, contentType, body string) *member {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(code)
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return &member{url: srv.URL, ca: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	}
	servers := map[string]*member{
		"text-403": serve(http.StatusForbidden, "text/plain", "db password: "+marker),
		"status-403": serve(http.StatusForbidden, "application/json",
			`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"`+marker+`"}`),
		"text-500": serve(http.StatusInternalServerError, "text/plain", marker),
	}
	ctx := t.Context()
	hub := kubefake.NewSimpleClientset()
	sel, _ := labels.Parse(DefaultSelector)
	// Between two reads: the 500 is the last error when it gives up.
	inv := New(Config{Hub: hub, Namespace: "mcs-system", Selector: sel, ClusterIDTimeout: 1500 * time.Millisecond,
		SyncTimeout: time.Second, LeaveTimeout: time.Second, RecheckPeriod: time.Hour}, nil)
	go inv.Run(ctx, &recorder{})
	for name, m := range servers {
		if _, err := hub.CoreV1().Secrets("mcs-system").Create(ctx, secret(name, kubeconfig(t, m, nil)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"text-403": "HTTP 403 Forbidden", "status-403": "HTTP 403 Forbidden", "text-500": "HTTP 500 Internal Server Error"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		events, _ := hub.EventsV1().Events("mcs-system").List(ctx, metav1.ListOptions{})
		said := map[string]string{}
		for _, e := range events.Items {
			if strings.Contains(e.Note, marker) {
				t.Fatalf("event %s on Secret %s carries the server's reply: %q", e.Reason, e.Regarding.Name, e.Note)
			}
			said[e.Regarding.Name] = e.Note
		}
		done := true
		for name, w := range want {
			done = done && strings.Contains(said[name], w)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %v, want each Secret's to say %v", said, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCheckContextIDs: at start-up, what a member answers decides its
// own membership only. A context whose cluster answers with another ID
// than the operator states for it is refused, saying both IDs; one with
// no usable ID is refused saying why, in the controller's words; an ID
// the operator states for another context (reachable or not) is that
// context's; an ID two contexts answer with, stated for neither, is
// given to neither; a context with no statement is admitted with the ID
// it answers.
func TestCheckContextIDs(t *testing.T) {
	members := []topology.Member{
		{Context: "a", ClusterID: "cluster-a"}, {Context: "b", ClusterID: "prod"}, {Context: "c", ClusterID: "cluster-c"},
		// d takes the ID stated for e, which did not answer.
		{Context: "d", ClusterID: "cluster-e"},
		// f and g both say cluster-f; stated for neither.
		{Context: "f", ClusterID: "cluster-f"}, {Context: "g", ClusterID: "cluster-f"},
		// h and i both say cluster-h; the operator states it for i.
		{Context: "h", ClusterID: "cluster-h"}, {Context: "i", ClusterID: "cluster-h"},
		// k is stated as cluster-k and answers with l's ID: refused for
		// that alone, it disputes nothing, and l keeps its own.
		{Context: "k", ClusterID: "cluster-l"}, {Context: "l", ClusterID: "cluster-l"},
		// m states no ID and answers with one --export-namespaces names
		// (say, renamed while its namesake is away): refused, as a
		// restart would otherwise let it be.
		{Context: "m", ClusterID: "cluster-n"},
	}
	failed := map[string]error{"j": fmt.Errorf("%w: ClusterProperty not found", topology.ErrNoClusterID)}
	admitted, refused := CheckContextIDs(map[string]string{"a": "cluster-a", "b": "cluster-b", "e": "cluster-e", "i": "cluster-h", "k": "cluster-k"},
		// a is named too, and states its ID: admitted.
		map[string]string{"cluster-a": "--member-pod-cidrs", "cluster-n": "--export-namespaces"}, members, failed)
	var got []string
	for _, m := range admitted {
		got = append(got, m.Context+"="+m.ClusterID)
	}
	if want := []string{"a=cluster-a", "c=cluster-c", "i=cluster-h", "l=cluster-l"}; !slices.Equal(got, want) {
		t.Errorf("admitted %v, want %v", got, want)
	}
	if len(refused) != 8 {
		t.Errorf("refused %v, want b, d, f, g, h, j, k and m", refused)
	}
	if r := refused["m"]; !strings.Contains(r.Why, `holds "cluster-n", which the operator's --export-namespaces names`) || !strings.Contains(r.Why, "--member-cluster-ids CONTEXT=ID") || r.Claimed != "" {
		t.Errorf("refused m: %+v, want the named ID refused to a context that states none", r)
	}
	if r := refused["k"]; !strings.Contains(r.Why, `states cluster "cluster-k"`) || r.Claimed != "" {
		t.Errorf("refused k: %+v, want its stated ID missed, and no claim", r)
	}
	if why := refused["b"].Why; !strings.Contains(why, `states cluster "cluster-b"`) || !strings.Contains(why, `holds "prod"`) || !strings.Contains(why, "--member-cluster-ids") {
		t.Errorf("refused b: %q", why)
	}
	for name, holder := range map[string]string{"d": "context/e", "h": "context/i"} {
		if r := refused[name]; !strings.Contains(r.Why, holder) || r.Claimed != "" {
			t.Errorf("refused %s: %+v, want the ID said to be %s's, and no claim", name, r, holder)
		}
	}
	for _, name := range []string{"f", "g"} {
		if r := refused[name]; r.Claimed != "cluster-f" || !strings.Contains(r.Why, "f, g") || !strings.Contains(r.Why, "--member-cluster-ids") {
			t.Errorf("refused %s: %+v, want cluster-f disputed between f and g", name, r)
		}
	}
	if why := refused["j"].Why; !strings.Contains(why, "not found") {
		t.Errorf("refused j: %q", why)
	}
}

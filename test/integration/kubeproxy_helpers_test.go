package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// kubeProxyUser is the identity kube-proxy uses in these tests; it gets
// only upstream's system:node-proxier role and kind-config's
// multicluster:kube-proxy role, so the tests also check the RBAC manifest.
const kubeProxyUser = "system:kube-proxy"

func startControlPlane(t *testing.T) *framework.Cluster {
	t.Helper()
	cluster := framework.StartTestCluster(t, framework.StartTestEtcd(t), framework.ClusterOptions{
		Name:       "cluster-a",
		ExtraUsers: []framework.User{{Name: kubeProxyUser}},
	})
	grantKubeProxy(t, cluster.Client())
	return cluster
}

func grantKubeProxy(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "node-proxier"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-proxier"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: kubeProxyUser}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(repoPath(t, "kind-config", "kube-proxy-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	decoder := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	if err := decoder.Decode(&role); err != nil {
		t.Fatal(err)
	}
	if err := decoder.Decode(&binding); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func repoPath(t *testing.T, elem ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !strings.Contains(dir, "staging") {
			if _, err := os.Stat(filepath.Join(dir, "kind-config")); err == nil {
				return filepath.Join(append([]string{dir}, elem...)...)
			}
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("repository root not found above the working directory")
		}
	}
}

func createNode(t *testing.T, client kubernetes.Interface, name, ip string) {
	t.Helper()
	_, err := client.CoreV1().Nodes().Create(context.Background(), &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// node is a network namespace standing for a node, with an uplink whose
// gateway never answers, and the apiserver reachable on its loopback.
type node struct {
	name       string
	kubeconfig string
}

func newNode(t *testing.T, cluster *framework.Cluster, name, ip string) *node {
	t.Helper()
	netns.Add(t, name)
	netns.Run(t, "ip", "-n", name, "link", "add", "up0", "type", "veth", "peer", "name", "up1")
	netns.Run(t, "ip", "-n", name, "link", "set", "up0", "up")
	netns.Run(t, "ip", "-n", name, "link", "set", "up1", "up")
	netns.Run(t, "ip", "-n", name, "addr", "add", ip+"/24", "dev", "up0")
	netns.Run(t, "ip", "-n", name, "route", "add", "default", "via", strings.TrimSuffix(ip, ".1")+".254")

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	host := strings.TrimPrefix(cluster.URL(), "https://")
	if err := netns.Forward(ctx, name, host, host); err != nil {
		t.Fatal(err)
	}
	cfg, err := cluster.RESTConfigFor(kubeProxyUser)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return &node{name: name, kubeconfig: path}
}

// podNamespace makes a namespace standing for a pod at ip, wired to the
// node namespace by a veth pair, as a CNI plugin would.
func podNamespace(t *testing.T, n *node, name, ip, gateway string) {
	t.Helper()
	netns.Add(t, name)
	hostSide := "v" + name
	if len(hostSide) > 15 {
		hostSide = hostSide[:15]
	}
	netns.Run(t, "ip", "link", "add", hostSide, "netns", n.name, "type", "veth", "peer", "name", "eth0", "netns", name)
	netns.Run(t, "ip", "-n", name, "addr", "add", ip+"/24", "dev", "eth0")
	netns.Run(t, "ip", "-n", name, "link", "set", "eth0", "up")
	netns.Run(t, "ip", "-n", name, "route", "add", "default", "via", gateway)
	netns.Run(t, "ip", "-n", n.name, "addr", "add", gateway+"/24", "dev", hostSide)
	netns.Run(t, "ip", "-n", n.name, "link", "set", hostSide, "up")
}

// kubeProxy is a kube-proxy process running in a node namespace.
type kubeProxy struct {
	cmd *exec.Cmd
	log string
}

func startKubeProxy(t *testing.T, binary string, n *node, args ...string) *kubeProxy {
	t.Helper()
	path, err := framework.Binary(binary)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not built: %v", binary, err)
		}
		t.Skipf("%s is not built (make build): %v", binary, err)
	}
	log := filepath.Join(t.TempDir(), n.name+"-"+binary+".log")
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	full := append([]string{"netns", "exec", n.name, path,
		"--kubeconfig=" + n.kubeconfig,
		"--hostname-override=" + n.name,
		// Leave the host's conntrack limits alone.
		"--conntrack-max-per-core=0", "--conntrack-min=0",
		"--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256",
		"--v=2",
	}, args...)
	cmd := exec.Command("ip", full...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kp := &kubeProxy{cmd: cmd, log: log}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		out.Close()
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", log, tail(log, 40))
		}
	})
	return kp
}

// alive reports whether the process is still the one that was started.
func (k *kubeProxy) alive() bool {
	return k.cmd.ProcessState == nil && k.cmd.Process.Signal(syscall.Signal(0)) == nil
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// eventually polls cond every 200ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func nftRuleset(t *testing.T, ns string) string {
	t.Helper()
	out, err := netns.Output("ip", "netns", "exec", ns, "nft", "list", "ruleset")
	if err != nil {
		t.Fatalf("nft list ruleset in %s: %v\n%s", ns, err, out)
	}
	return out
}

func metricsOf(ns string) (string, error) {
	c, err := netns.Dial(ns, "tcp", "127.0.0.1:10249", 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n"); err != nil {
		return "", err
	}
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String(), nil
}

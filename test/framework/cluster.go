package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	defaultServiceCIDR   = "10.96.0.0/16"
	defaultStartTimeout  = 2 * time.Minute
	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
)

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Name identifies the cluster: it is the etcd prefix (/<Name>) and the
	// kubeconfig context name. It must be a DNS label and unique among the
	// clusters that share an etcd.
	Name string
	// Etcd stores the cluster's objects; one Etcd serves many clusters.
	Etcd *Etcd
	// ServiceCIDR is --service-cluster-ip-range (default 10.96.0.0/16; a
	// dual-stack cluster has one range per family, separated by a comma).
	ServiceCIDR string
	// Dir holds certificates, keys, the token file, kubeconfigs and
	// kube-apiserver.log. When empty a temporary directory is created and
	// removed by Stop.
	Dir string
	// ExtraUsers get static tokens besides the admin; see KubeconfigFor.
	ExtraUsers []User
	// ExtraArgs are appended to kube-apiserver's flags; for scalar flags
	// the last occurrence wins, so they can override the defaults.
	ExtraArgs []string
	// StartTimeout bounds start-up (default 2m: a loaded 2-core machine
	// can be much slower than the usual few seconds).
	StartTimeout time.Duration
	// EgressSocket, when set, is a Unix socket where an HTTP CONNECT proxy
	// serves the apiserver's "cluster" egress (kubelets, pods, Services,
	// webhooks), as konnectivity does where the control plane has no route
	// to the nodes: kube-apiserver never dials those addresses itself.
	EgressSocket string
	// AdvertiseAddress, when set, is the address the apiserver publishes
	// in the `kubernetes` Service's endpoints (its port is the apiserver's);
	// whoever runs the nodes makes it lead to the apiserver. Unset, the
	// apiserver advertises loopback, which endpoints cannot hold, and the
	// `kubernetes` Service has none.
	AdvertiseAddress string
}

// Cluster is a running kube-apiserver.
type Cluster struct {
	name      string
	dir       string
	removeDir bool
	proc      *childProcess
	// binary and args are the command line, for Restart.
	binary       string
	args         []string
	startTimeout time.Duration
	config       *rest.Config // admin
	client       kubernetes.Interface
	users        map[string]User
	kubeconfigs  map[string]string // user name -> path
	kubelet      *kubeletPKI
}

// StartCluster starts kube-apiserver on a free loopback port against
// opts.Etcd and waits until /readyz succeeds.
func StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	if errs := validation.IsDNS1123Label(opts.Name); len(errs) > 0 {
		return nil, fmt.Errorf("cluster name %q: %v", opts.Name, errs)
	}
	if opts.Etcd == nil {
		return nil, errors.New("cluster " + opts.Name + ": no Etcd")
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = defaultServiceCIDR
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	binary, err := Binary("kube-apiserver")
	if err != nil {
		return nil, err
	}

	c := &Cluster{name: opts.Name, dir: opts.Dir, users: map[string]User{}, kubeconfigs: map[string]string{}}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "cluster-"+opts.Name+"-"); err != nil {
			return nil, err
		}
		c.removeDir = true
	}
	defer func() {
		if err != nil && c.removeDir {
			os.RemoveAll(c.dir)
		}
	}()
	if err := os.MkdirAll(c.certDir(), 0o755); err != nil {
		return nil, err
	}
	if err := c.writeCredentials(opts.ExtraUsers); err != nil {
		return nil, err
	}
	if err := c.writeKubeletPKI(); err != nil {
		return nil, err
	}

	for attempt := 1; ; attempt++ {
		err = c.startAPIServer(ctx, binary, opts)
		if err == nil || attempt == startAttempts || !isAddrInUse(err) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
	}
	if err := c.writeKubeconfigs(); err != nil {
		c.proc.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) certDir() string     { return filepath.Join(c.dir, "certs") }
func (c *Cluster) tokenFile() string   { return filepath.Join(c.dir, "tokens.csv") }
func (c *Cluster) saKeyFile() string   { return filepath.Join(c.dir, "sa.key") }
func (c *Cluster) saPubFile() string   { return filepath.Join(c.dir, "sa.pub") }
func (c *Cluster) servingCert() string { return filepath.Join(c.certDir(), "apiserver.crt") }

// writeCredentials writes the token file (admin plus extra users) and, unless
// the directory already has one from an earlier start, the service account
// key, so that a restarted cluster keeps accepting the tokens it issued.
func (c *Cluster) writeCredentials(extra []User) error {
	token, err := randomToken()
	if err != nil {
		return err
	}
	kcmToken, err := randomToken()
	if err != nil {
		return err
	}
	users := []User{{Name: AdminUser, Groups: []string{"system:masters"}, Token: token}, {Name: ControllerManagerUser, Token: kcmToken}}
	for _, u := range extra {
		if u.Name == "" || u.Name == AdminUser || u.Name == ControllerManagerUser {
			return fmt.Errorf("invalid extra user name %q", u.Name)
		}
		if u.Token == "" {
			if u.Token, err = randomToken(); err != nil {
				return err
			}
		}
		users = append(users, u)
	}
	for _, u := range users {
		if _, dup := c.users[u.Name]; dup {
			return fmt.Errorf("user %q declared twice", u.Name)
		}
		c.users[u.Name] = u
	}
	if err := writeTokenFile(c.tokenFile(), users); err != nil {
		return err
	}
	if _, err := os.Stat(c.saKeyFile()); err == nil {
		return nil
	}
	return writeServiceAccountKey(c.saKeyFile(), c.saPubFile())
}

func (c *Cluster) startAPIServer(ctx context.Context, binary string, opts ClusterOptions) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	args := []string{
		"--etcd-servers=" + opts.Etcd.Endpoint(),
		"--etcd-prefix=/" + opts.Name,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		// The apiserver generates a CA and a serving certificate for
		// 127.0.0.1 here; the kubeconfigs trust that CA.
		"--cert-dir=" + c.certDir(),
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + c.saPubFile(),
		"--service-account-signing-key-file=" + c.saKeyFile(),
		"--token-auth-file=" + c.tokenFile(),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-cluster-ip-range=" + opts.ServiceCIDR,
		"--allow-privileged=true",
		// APF adds start-up work and request queuing that tests do not need.
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		// The kubelet API: both sides check the other's certificate.
		"--kubelet-client-certificate=" + c.kubeletClientCertFile(),
		"--kubelet-client-key=" + c.kubeletClientKeyFile(),
		"--kubelet-certificate-authority=" + c.kubeletCAFile(),
	}
	if opts.AdvertiseAddress != "" {
		args = append(args, "--advertise-address="+opts.AdvertiseAddress, "--endpoint-reconciler-type=lease")
	} else {
		// Loopback, which Endpoints and EndpointSlices reject; the
		// reconciler would only log errors.
		args = append(args, "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none")
	}
	if opts.EgressSocket != "" {
		config := filepath.Join(c.dir, "egress-selector.yaml")
		if err := writeEgressSelectorConfig(config, opts.EgressSocket); err != nil {
			return err
		}
		args = append(args, "--egress-selector-config-file="+config)
	}
	args = append(args, opts.ExtraArgs...)

	proc, err := startProcess("kube-apiserver", binary, args, filepath.Join(c.dir, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	host := fmt.Sprintf("https://127.0.0.1:%d", port)
	probe := func(ctx context.Context) error {
		if c.config == nil {
			// The serving certificate appears shortly after start.
			ca, err := caFromServingCert(c.servingCert())
			if err != nil {
				return err
			}
			c.config = &rest.Config{
				Host:            host,
				BearerToken:     c.users[AdminUser].Token,
				TLSClientConfig: rest.TLSClientConfig{CAData: ca},
				// Tests create many objects quickly; client-side
				// throttling would only slow them down.
				QPS:   100,
				Burst: 200,
			}
			if c.client, err = kubernetes.NewForConfig(c.config); err != nil {
				return err
			}
		}
		return c.readyz(ctx)
	}
	if err := proc.waitReady(ctx, opts.StartTimeout, probe); err != nil {
		proc.Stop()
		c.config, c.client = nil, nil
		return err
	}
	c.proc, c.binary, c.args, c.startTimeout = proc, binary, args, opts.StartTimeout
	return nil
}

// writeEgressSelectorConfig sends the apiserver's "cluster" egress through
// an HTTP CONNECT proxy on a Unix socket.
func writeEgressSelectorConfig(path, socket string) error {
	config := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, socket)
	return os.WriteFile(path, []byte(config), 0o644)
}

// readyz asks kube-apiserver whether it is ready.
func (c *Cluster) readyz(ctx context.Context) error {
	_, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

// Crash kills kube-apiserver with SIGKILL, as a crash would: no graceful
// shutdown draining watches. Its state (etcd, certificates, tokens) stays,
// for Restart.
func (c *Cluster) Crash() { c.proc.Kill() }

// Restart runs kube-apiserver again after Crash, with the same command line
// (address, certificates, tokens), and waits until it is ready: clients
// and kubeconfigs made before keep working.
func (c *Cluster) Restart(ctx context.Context) error {
	select {
	case <-c.proc.Exited():
	default:
		return fmt.Errorf("cluster %s: kube-apiserver is still running", c.name)
	}
	proc, err := startProcess("kube-apiserver", c.binary, c.args, filepath.Join(c.dir, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	if err := proc.waitReady(ctx, c.startTimeout, c.readyz); err != nil {
		proc.Stop()
		return fmt.Errorf("cluster %s: %w", c.name, err)
	}
	c.proc = proc
	return nil
}

// writeKubeconfigs writes one kubeconfig per token user.
func (c *Cluster) writeKubeconfigs() error {
	for name := range c.users {
		cfg, err := c.RESTConfigFor(name)
		if err != nil {
			return err
		}
		path := kubeconfigPath(c.dir, "", name)
		if err := clientcmd.WriteToFile(*kubeconfigFor(c.name, cfg), path); err != nil {
			return err
		}
		c.kubeconfigs[name] = path
	}
	return nil
}

// Name returns the cluster name.
func (c *Cluster) Name() string { return c.name }

// Dir returns the directory holding the cluster's files and log.
func (c *Cluster) Dir() string { return c.dir }

// URL returns the apiserver URL, e.g. https://127.0.0.1:41234.
func (c *Cluster) URL() string { return c.config.Host }

// LogFile returns the path of kube-apiserver's log.
func (c *Cluster) LogFile() string { return c.proc.logPath }

// ServiceAccountKeyFile returns the PEM RSA private key that signs service
// account tokens (for kube-controller-manager).
func (c *Cluster) ServiceAccountKeyFile() string { return c.saKeyFile() }

// CAFile writes (once) and returns the PEM file of the CA that signed the
// apiserver's serving certificate: what in-cluster clients trust
// (kube-controller-manager's --root-ca-file publishes it to every namespace
// as the kube-root-ca.crt ConfigMap).
func (c *Cluster) CAFile() (string, error) {
	path := filepath.Join(c.certDir(), "ca.crt")
	if err := os.WriteFile(path, c.config.CAData, 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// Kubeconfig returns the path of the admin kubeconfig (system:masters).
func (c *Cluster) Kubeconfig() string { return c.kubeconfigs[AdminUser] }

// KubeconfigFor returns the path of the kubeconfig of a user declared in
// ClusterOptions.ExtraUsers (or AdminUser).
func (c *Cluster) KubeconfigFor(user string) (string, error) {
	path, ok := c.kubeconfigs[user]
	if !ok {
		return "", fmt.Errorf("cluster %s: no user %q; declare it in ClusterOptions.ExtraUsers", c.name, user)
	}
	return path, nil
}

// ImpersonatingKubeconfig writes and returns the path of a kubeconfig that
// acts as user in groups by impersonation through the admin. Unlike
// ExtraUsers, it works for identities chosen after start-up (the static
// token file cannot change then); authorization sees only the impersonated
// identity.
func (c *Cluster) ImpersonatingKubeconfig(user string, groups []string) (string, error) {
	cfg := c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: slices.Clone(groups)}
	path := kubeconfigPath(c.dir, "as-", user)
	if err := clientcmd.WriteToFile(*kubeconfigFor(c.name, cfg), path); err != nil {
		return "", err
	}
	return path, nil
}

// RESTConfig returns a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.config) }

// RESTConfigFor returns a client configuration for a token user.
func (c *Cluster) RESTConfigFor(user string) (*rest.Config, error) {
	u, ok := c.users[user]
	if !ok {
		return nil, fmt.Errorf("cluster %s: no user %q; declare it in ClusterOptions.ExtraUsers", c.name, user)
	}
	cfg := c.RESTConfig()
	cfg.BearerToken = u.Token
	return cfg, nil
}

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Pid is kube-apiserver's process ID.
func (c *Cluster) Pid() int { return c.proc.Pid() }

// Stop terminates kube-apiserver, waits for it to exit and removes Dir if
// StartCluster created it. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.proc.Stop()
	if c.removeDir {
		os.RemoveAll(c.dir)
	}
}

// Package fakekubelet is a kubelet without a container runtime for the local
// clusterset harness. It registers a Ready Node and, for every pod bound to
// that node, creates a network namespace with an address from the node's
// pod CIDR, wired to the node's namespace by a veth pair as a CNI plugin
// would, and runs each container as a real process in it (see
// test/podimage for what the "images" do). It reports the pod Running with
// its IP, Ready while its processes run and pass their TCP/HTTP readiness
// probes, and finishes deleting pods, so that kube-controller-manager makes
// real EndpointSlices and kube-proxy carries real traffic to real sockets.
//
// With Config.Serving it also serves the kubelet API that the apiserver
// proxies `kubectl exec`, `attach`, `port-forward` and `logs` to, with the
// kubelet's own protocol handlers (k8s.io/cri-streaming) and log reader
// (k8s.io/cri-client): exec'd commands run in the pod's network namespace
// with the host's binaries; logs are CRI logs, one per container restart.
//
// Volumes: emptyDir, ConfigMap, Secret and projected (service account
// token, ConfigMap, Secret, downward API) volumes, so that every pod has
// its service account credentials where in-cluster clients look.
//
// Not implemented: other volumes, init containers, exec probes (treated as
// passing), liveness and startup probes, hostNetwork, resource limits,
// image pulls, containers with a TTY, UTS namespaces (a pod's host name is
// its HOSTNAME and /etc/hosts). It uses whatever credentials its client has
// (the harness gives it the admin's), not a node identity.
package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Config configures a Kubelet.
type Config struct {
	// Client talks to the node's cluster.
	Client kubernetes.Interface
	// ClusterName is passed to pod processes as CLUSTER_NAME.
	ClusterName string
	// NodeName is the Node's name.
	NodeName string
	// NodeIPs are the Node's InternalIPs, addresses of the node namespace,
	// one per family, the primary first.
	NodeIPs []string
	// NodeNetns is the node's network namespace; pods' veth pairs end there
	// and readiness probes are sent from there, as a real kubelet's are.
	NodeNetns string
	// PodCIDRs are the node's pod ranges, one per family of NodeIPs, in
	// the same order (IPv4: a /24 or larger, whose first address is the
	// pods' gateway on the node side; IPv6: a /64, say).
	PodCIDRs []string
	// NetnsPrefix starts the name of every pod network namespace.
	NetnsPrefix string
	// DNS is the cluster DNS that ClusterFirst pods resolve through; nil
	// leaves pods with the host's resolv.conf.
	DNS *DNSConfig
	// LogDir receives the containers' logs, as a kubelet's /var/log/pods.
	LogDir string
	// StateDir holds the files of pods' volumes (default: a directory in
	// the system's temporary directory).
	StateDir string
	// Logger records what the kubelet does (default: stderr).
	Logger *log.Logger
	// Executable is the binary re-executed as a pod process (default: this
	// process's own executable); it must import test/podimage.
	Executable string
	// ImageBinDir holds the binaries of this project's images (the build's
	// output): it comes first on pods' PATH, so that a command an image
	// holds at its root (/kubectl-mcs in the mcs-controller's image) runs
	// the binary of that name (see podimage).
	ImageBinDir string
	// Serving, when set, serves the kubelet API (exec, attach,
	// port-forward, container logs) at NodeIP in NodeNetns.
	Serving *ServingConfig
}

// DNSConfig is what a real kubelet gets from --cluster-dns and
// --cluster-domain.
type DNSConfig struct {
	Nameserver    string
	ClusterDomain string
}

// Kubelet serves one node.
type Kubelet struct {
	cfg   Config
	log   *log.Logger
	ipams []*ipam // one per pod CIDR

	mu      sync.Mutex
	workers map[string]*podWorker // by pod UID
	wg      sync.WaitGroup
}

// New checks cfg and returns a Kubelet; Run starts it.
func New(cfg Config) (*Kubelet, error) {
	if cfg.Client == nil || cfg.NodeName == "" || len(cfg.NodeIPs) == 0 || cfg.NodeNetns == "" || cfg.NetnsPrefix == "" {
		return nil, errors.New("fakekubelet: Client, NodeName, NodeIPs, NodeNetns and NetnsPrefix are required")
	}
	if len(cfg.PodCIDRs) != len(cfg.NodeIPs) {
		return nil, fmt.Errorf("fakekubelet %s: %d pod CIDRs for %d node IPs, want one per family", cfg.NodeName, len(cfg.PodCIDRs), len(cfg.NodeIPs))
	}
	var ipams []*ipam
	for i, cidr := range cfg.PodCIDRs {
		a, err := newIPAM(cidr)
		if err != nil {
			return nil, fmt.Errorf("fakekubelet %s: %w", cfg.NodeName, err)
		}
		if ip := net.ParseIP(cfg.NodeIPs[i]); ip == nil || (ip.To4() == nil) != a.ipv6 {
			return nil, fmt.Errorf("fakekubelet %s: node IP %s and pod CIDR %s are not of one family", cfg.NodeName, cfg.NodeIPs[i], cidr)
		}
		ipams = append(ipams, a)
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(os.Stderr, cfg.NodeName+" ", log.LstdFlags|log.Lmicroseconds)
	}
	if cfg.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Executable = exe
	}
	if cfg.Serving != nil && cfg.Serving.Port == 0 {
		cfg.Serving.Port = DefaultPort
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(os.TempDir(), "fakekubelet-"+cfg.NodeName)
	}
	if cfg.LogDir == "" {
		cfg.LogDir = os.TempDir()
	}
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, err
	}
	return &Kubelet{cfg: cfg, log: cfg.Logger, ipams: ipams, workers: map[string]*podWorker{}}, nil
}

// Register creates (or updates) the Node object, Ready, with its address
// and pod CIDR. Run calls it; the harness calls it earlier to wait for it.
func (k *Kubelet) Register(ctx context.Context) error { return k.registerNode(ctx) }

// Run registers the node and runs the pods bound to it until ctx is done.
// Then it stops every pod process and deletes every pod network namespace
// (the pods stay in the API, as they do when a real node goes away).
func (k *Kubelet) Run(ctx context.Context) error {
	defer k.wg.Wait()
	if err := k.registerNode(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(k.cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.cfg.NodeName).String()
		}))
	pods := factory.Core().V1().Pods().Informer()
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.dispatch(ctx, obj.(*v1.Pod), false) },
		UpdateFunc: func(_, obj any) { k.dispatch(ctx, obj.(*v1.Pod), false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				k.dispatch(ctx, pod, true)
			}
		},
	})
	if err != nil {
		return err
	}
	if k.cfg.Serving != nil {
		stop, err := k.serve(ctx)
		if err != nil {
			return err
		}
		defer stop()
	}
	factory.Start(ctx.Done())
	k.log.Printf("node %s registered (InternalIPs %v, pod CIDRs %v, netns %s)", k.cfg.NodeName, k.cfg.NodeIPs, k.cfg.PodCIDRs, k.cfg.NodeNetns)
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// dispatch hands the latest state of a pod to its worker, starting one for
// a pod this kubelet has not run yet.
func (k *Kubelet) dispatch(ctx context.Context, pod *v1.Pod, gone bool) {
	if ctx.Err() != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	uid := string(pod.UID)
	w := k.workers[uid]
	if w == nil {
		terminal := pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
		if gone || terminal && pod.DeletionTimestamp == nil {
			return
		}
		w = newPodWorker(k, pod)
		k.workers[uid] = w
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			w.run(ctx)
			k.mu.Lock()
			delete(k.workers, uid)
			k.mu.Unlock()
		}()
	}
	w.update(pod, gone)
}

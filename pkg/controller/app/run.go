package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/proxy"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// leaderLeaseName is the leader election Lease.
const leaderLeaseName = "mcs-controller"

// Run runs the controller until ctx ends. With leader election it returns
// an error when leadership is lost, so that the process restarts clean.
func Run(ctx context.Context, o *Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	exportNamespaces, err := o.exportNamespaces()
	if err != nil {
		return err
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = host + "_" + uuid.NewString()[:8]
	}
	configs, order, err := topology.Contexts(o.Kubeconfig, o.Contexts)
	if err != nil {
		return err
	}
	for _, cfg := range configs {
		cfg.QPS, cfg.Burst = o.APIQPS, o.APIBurst
		cfg.UserAgent = "mcs-controller"
	}
	members, unreachable, err := topology.Resolve(ctx, configs, order, o.ClusterIDTimeout)
	if err != nil {
		return err
	}
	ranges, _ := proxy.ParseCIDRs(o.ClusterSetIPCIDRs)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	unreachableGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcs_controller_unreachable_member_contexts",
		Help: "Member contexts whose cluster ID could not be read at start-up; the controller runs without them and exits to be restarted once one answers.",
	})
	unreachableGauge.Set(float64(len(unreachable)))
	reg.MustRegister(unreachableGauge)
	// A member that could not be reached at start-up joins through a
	// restart, as kube-proxy restarts on a configuration change: everything
	// that depends on the member set (queues, Leases, merges) is built once.
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	if len(unreachable) > 0 {
		klog.InfoS("Running without unreachable member clusters; exiting to be restarted once one answers", "contexts", unreachable)
		known := map[string]string{}
		for _, m := range members {
			known[m.ClusterID] = m.Context
		}
		go watchUnreachable(ctx, configs, unreachable, known, min(o.ClusterIDTimeout, 10*time.Second), stopRun)
	}
	metrics := mcs.NewMetrics(reg)
	h := &health{}
	if err := serve(ctx, o.MetricsBindAddress, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", h.healthz)
	mux.HandleFunc("/livez", h.healthz)
	mux.HandleFunc("/readyz", h.readyz)
	if err := serve(ctx, o.HealthzBindAddress, "/", mux); err != nil {
		return err
	}

	ctrl, err := mcs.New(mcs.Config{
		Members:            members,
		ManagedBy:          o.ManagedBy,
		ClusterSetIPRanges: ranges,
		RefusedNamespaces:  o.RefusedNamespaces,
		SourceManagers:     o.SourceManagers,
		ExportNamespaces:   exportNamespaces,
		DerivedMembers:     derivedMembers(o.DerivedMembers, members),
		DerivedGrace:       o.DerivedGrace,
		EndpointTTL:        o.EndpointTTL,
		LeaseNamespace:     o.LeaseNamespace,
		Identity:           o.Identity,
		Workers:            o.Workers,
		InitialSyncTimeout: o.InitialSyncTimeout,
	}, metrics)
	if err != nil {
		return err
	}
	h.set(ctrl)
	if !o.LeaderElect {
		h.lead()
		if err := ctrl.Run(ctx); err != nil {
			return err
		}
		return memberJoined(ctx)
	}

	leaderCfg := configs[order[0]]
	if o.LeaderElectContext != "" {
		if leaderCfg = configs[o.LeaderElectContext]; leaderCfg == nil {
			return fmt.Errorf("--leader-elect-context %q is not a member context", o.LeaderElectContext)
		}
	}
	kube, err := kubernetes.NewForConfig(rest.CopyConfig(leaderCfg))
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.LeaseNamespace, leaderLeaseName, kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: o.Identity})
	if err != nil {
		return err
	}
	// client-go runs OnStartedLeading in a goroutine it does not wait
	// for: le.Run can return (the lease lost) while the controller still
	// runs. Its result comes back on ran, and is waited for.
	ran := make(chan error, 1)
	var led atomic.Bool
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaderElectLeaseDuration,
		RenewDeadline:   o.LeaderElectRenewDeadline,
		RetryPeriod:     o.LeaderElectRetryPeriod,
		ReleaseOnCancel: true,
		Name:            "mcs-controller",
		WatchDog:        h.watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				klog.InfoS("Leading", "identity", o.Identity)
				led.Store(true)
				h.lead()
				err := ctrl.Run(ctx)
				cancel()
				ran <- err
			},
			OnStoppedLeading: func() { klog.InfoS("Stopped leading", "identity", o.Identity) },
			OnNewLeader: func(id string) {
				if id != o.Identity {
					klog.InfoS("Another replica leads", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(lctx)
	if led.Load() {
		// le.Run has cancelled the controller's context on its way out.
		if err := <-ran; err != nil {
			return err
		}
	}
	if err := memberJoined(ctx); err != nil {
		return err
	}
	if ctx.Err() == nil && led.Load() {
		return errors.New("leadership lost")
	}
	return nil
}

// MemberJoinedError ends Run when a member context that could not be
// reached at start-up answers with a valid cluster ID: a restart adds it.
type MemberJoinedError struct {
	Context, ClusterID string
}

func (e *MemberJoinedError) Error() string {
	return fmt.Sprintf("member context %q (cluster %s) answers now; exiting so that a restart adds it", e.Context, e.ClusterID)
}

func memberJoined(ctx context.Context) error {
	var joined *MemberJoinedError
	if errors.As(context.Cause(ctx), &joined) {
		return joined
	}
	return nil
}

// watchUnreachable reads the cluster ID of the unreachable contexts every
// period until one answers with one, then stops the run with a
// *MemberJoinedError. A member that answers without a usable ID, or with
// the ID of a running member (known: ID -> context), is logged and watched
// on: the others keep working.
func watchUnreachable(ctx context.Context, configs map[string]*rest.Config, contexts []string, known map[string]string, period time.Duration, stop context.CancelCauseFunc) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for _, name := range contexts {
			id, err := topology.ClusterID(ctx, configs[name], period)
			var down *topology.UnreachableError
			switch {
			case errors.As(err, &down):
				klog.V(2).InfoS("Member cluster still unreachable", "context", name, "err", err)
			case err != nil:
				klog.ErrorS(err, "Member cluster answers but cannot join", "context", name)
			case known[id] != "":
				klog.ErrorS(nil, "Member cluster answers with the cluster ID of another member and cannot join", "context", name, "clusterID", id, "otherContext", known[id])
			default:
				stop(&MemberJoinedError{Context: name, ClusterID: id})
				return
			}
		}
	}, period)
}

func serve(ctx context.Context, addr, pattern string, handler http.Handler) error {
	if addr == "" || addr == "0" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(pattern, handler)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	klog.InfoS("Serving", "address", l.Addr().String(), "path", pattern)
	return nil
}

// health answers /healthz and /readyz: healthy while leader election (if
// any) is renewing; ready when leading with every member's caches synced.
type health struct {
	mu       sync.Mutex
	ctrl     *mcs.Controller
	leading  bool
	watchdog *leaderelection.HealthzAdaptor
}

func (h *health) set(c *mcs.Controller) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ctrl = c
	if h.watchdog == nil {
		h.watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
}

func (h *health) lead() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leading = true
}

func (h *health) healthz(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	watchdog := h.watchdog
	h.mu.Unlock()
	if watchdog != nil {
		if err := watchdog.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

func (h *health) readyz(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	ctrl, leading := h.ctrl, h.leading
	h.mu.Unlock()
	if ctrl == nil || !leading {
		http.Error(w, "standby: another replica leads", http.StatusServiceUnavailable)
		return
	}
	select {
	case <-ctrl.Ready():
	default:
		http.Error(w, "starting: waiting for member caches", http.StatusServiceUnavailable)
		return
	}
	var unsynced []string
	for id, ok := range ctrl.Synced() {
		if !ok {
			unsynced = append(unsynced, id)
		}
	}
	if len(unsynced) > 0 {
		http.Error(w, fmt.Sprintf("caches not synced for members %v", unsynced), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// derivedMembers returns the set of cluster IDs served in derived mode,
// saying which of them is no member (a typo would otherwise silently serve
// a stock-kube-proxy member natively, where its imports answer nothing).
func derivedMembers(ids []string, members []topology.Member) map[string]bool {
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
		if !slices.ContainsFunc(members, func(m topology.Member) bool { return m.ClusterID == id }) {
			klog.InfoS("A member named by --derived-members is not among the reachable member clusters", "cluster", id)
		}
	}
	return out
}

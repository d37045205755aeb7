package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	compmetrics "k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	catalogclientset "k8s.io/multiclusterservices/client/catalog/clientset/versioned"
	"k8s.io/multiclusterservices/proxy"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/features"
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
	memberPodCIDRs, err := o.memberPodCIDRs()
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = host + "_" + uuid.NewString()[:8]
	}
	configure := func(cfg *rest.Config) {
		cfg.QPS, cfg.Burst = o.APIQPS, o.APIBurst
		cfg.UserAgent = "mcs-controller"
	}
	// Members given as contexts; with an inventory of Secrets, only those
	// named (the hub is a member only if it is listed).
	var configs map[string]*rest.Config
	var order []string
	if len(o.Contexts) > 0 || o.MemberSecretsNamespace == "" && o.InventoryNamespace == "" {
		if configs, order, err = topology.Contexts(o.Kubeconfig, o.Contexts); err != nil {
			return err
		}
	}
	for _, cfg := range configs {
		configure(cfg)
	}
	var members []topology.Member
	var unreachable []string
	if len(order) > 0 {
		if members, unreachable, err = topology.Resolve(ctx, configs, order, o.ClusterIDTimeout); err != nil {
			return err
		}
	}
	ranges, _ := proxy.ParseCIDRs(o.ClusterSetIPCIDRs)

	invCfg := inventory.Config{
		Contexts:         configs,
		Configure:        configure,
		ClusterIDTimeout: min(o.ClusterIDTimeout, 10*time.Second),
		SyncTimeout:      o.InitialSyncTimeout,
		LeaveTimeout:     2 * time.Minute,
		RecheckPeriod:    o.MemberRecheckPeriod,
		AllowProxy:       o.MemberSecretAllowProxy,
	}
	// The hub holds the member Secrets and, by default, the leader
	// election Lease.
	var hubCfg *rest.Config
	if o.MemberSecretsNamespace != "" || o.InventoryNamespace != "" {
		if hubCfg, err = topology.Context(o.Kubeconfig, o.HubContext); err != nil {
			return fmt.Errorf("--hub-context: %w", err)
		}
		configure(hubCfg)
		if invCfg.Hub, err = kubernetes.NewForConfig(hubCfg); err != nil {
			return err
		}
	}
	if o.MemberSecretsNamespace != "" {
		invCfg.Namespace = o.MemberSecretsNamespace
		if invCfg.Selector, err = labels.Parse(o.MemberSecretsSelector); err != nil {
			return fmt.Errorf("--member-secrets-selector: %w", err)
		}
	}
	if o.InventoryNamespace != "" {
		if invCfg.AccessProviders, err = inventory.LoadAccessProviders(o.InventoryAccessProviders); err != nil {
			return fmt.Errorf("--inventory-access-providers: %w", err)
		}
		if invCfg.Profiles, err = dynamic.NewForConfig(hubCfg); err != nil {
			return err
		}
		invCfg.ProfileNamespace = o.InventoryNamespace
		if invCfg.ProfileSelector, err = labels.Parse(o.InventorySelector); err != nil {
			return fmt.Errorf("--inventory-selector: %w", err)
		}
	}
	// In catalog mode the hub holds the catalog.
	var catalogCfg *mcs.CatalogConfig
	if o.ServiceModel == ModelCatalog {
		if hubCfg == nil {
			if hubCfg, err = topology.Context(o.Kubeconfig, o.HubContext); err != nil {
				return fmt.Errorf("--hub-context: %w", err)
			}
			configure(hubCfg)
		}
		catalogCfg = &mcs.CatalogConfig{HealthProbesPerTeam: o.HealthProbesPerTeam, HealthProbes: o.HealthProbes}
		if catalogCfg.Hub, err = catalogclientset.NewForConfig(hubCfg); err != nil {
			return err
		}
		if catalogCfg.HubKube, err = kubernetes.NewForConfig(hubCfg); err != nil {
			return err
		}
		logger.Info("Serving the service catalog of the hub", "hub", hubCfg.Host)
	}
	joined := map[string]string{}
	for _, m := range members {
		joined[inventory.ContextKey(m.Context)] = m.ClusterID
	}
	inv := inventory.New(invCfg, joined)
	reg := compmetrics.NewKubeRegistry()
	// The Go runtime's and the process's own, as every component serves.
	reg.RawMustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.CustomMustRegister(inv.Collector())
	// Before Initial, whose credential plugin runs count too.
	inventory.RegisterPluginMetrics(reg)
	inv.Pending(unreachable)
	// Members listed by Secrets start with the others, so that no name
	// is merged without an exporter that is merely late to join.
	members = append(members, inv.Initial(ctx)...)
	if len(unreachable) > 0 {
		logger.Info("Running without unreachable member clusters; they join once they answer", "contexts", unreachable)
	}

	metrics := mcs.NewMetrics(reg)
	h := &health{}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", compmetrics.HandlerFor(reg, compmetrics.HandlerOpts{}))
	if o.Profiling {
		// As Kubernetes components serve it with --profiling.
		metricsMux.HandleFunc("/debug/pprof/", pprof.Index)
		metricsMux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		metricsMux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		metricsMux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if err := serve(ctx, o.MetricsBindAddress, "/", metricsMux); err != nil {
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
		MemberPodCIDRs:     memberPodCIDRs,
		ExportNamespaces:   exportNamespaces,
		DerivedMembers:     memberSet(logger, "--derived-members", o.DerivedMembers, members),
		IngressMembers:     memberSet(logger, "--ingress-members", o.IngressMembers, members),
		IngressServiceType: v1.ServiceType(o.IngressServiceType),
		DerivedGrace:       o.DerivedGrace,
		EndpointTTL:        o.EndpointTTL,
		LeaseNamespace:     o.LeaseNamespace,
		Identity:           o.Identity,
		Workers:            o.Workers,
		InitialSyncTimeout: o.InitialSyncTimeout,
		Catalog:            catalogCfg,
		ClusterSelection:   o.FeatureGates.Enabled(features.MultiClusterServiceClusterSelection),
		ClusterProperties:  inv.ClusterProperties,
	}, metrics)
	if err != nil {
		return err
	}
	h.set(ctrl)
	// The controller and its inventory run together: members join and
	// leave only while this replica writes.
	runAll := func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			select {
			case <-ctrl.Ready():
				inv.Run(ctx, ctrl)
			case <-ctx.Done():
			}
		}()
		err := ctrl.Run(ctx)
		cancel()
		<-done
		return err
	}
	if !o.LeaderElect {
		h.lead()
		return runAll(ctx)
	}

	var leaderCfg *rest.Config
	switch {
	case o.LeaderElectContext != "":
		if leaderCfg = configs[o.LeaderElectContext]; leaderCfg == nil {
			return fmt.Errorf("--leader-elect-context %q is not a member context", o.LeaderElectContext)
		}
	case hubCfg != nil:
		leaderCfg = hubCfg
	default:
		leaderCfg = configs[order[0]]
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
				logger.Info("Leading", "identity", o.Identity)
				led.Store(true)
				h.lead()
				err := runAll(ctx)
				cancel()
				ran <- err
			},
			OnStoppedLeading: func() { logger.Info("Stopped leading", "identity", o.Identity) },
			OnNewLeader: func(id string) {
				if id != o.Identity {
					logger.Info("Another replica leads", "leader", id)
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
	if ctx.Err() == nil && led.Load() {
		return errors.New("leadership lost")
	}
	return nil
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
	klog.FromContext(ctx).Info("Serving", "address", l.Addr().String(), "path", pattern)
	return nil
}

// health answers /healthz and /readyz: healthy while leader election (if
// any) is renewing; ready when leading with every member's caches synced,
// and ready as a standby: a replica waiting to lead is healthy, and a
// Deployment whose standbys were never ready would never be Available (a
// rollout with maxUnavailable 0 would stall on them).
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
	if ctrl == nil {
		http.Error(w, "starting: connecting to the members", http.StatusServiceUnavailable)
		return
	}
	if !leading {
		fmt.Fprintln(w, "ok: standby, another replica leads")
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

// memberSet returns the set of cluster IDs a flag names (--derived-members,
// --ingress-members), saying which of them is no member: a typo would
// otherwise silently serve a member the wrong way (a stock-kube-proxy
// member natively, where its imports answer nothing; a private network
// with pod IPs nobody reaches).
func memberSet(logger klog.Logger, flag string, ids []string, members []topology.Member) map[string]bool {
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
		if !slices.ContainsFunc(members, func(m topology.Member) bool { return m.ClusterID == id }) {
			logger.Info("A member named by "+flag+" is not among the members at start-up; it is served so when it joins", "cluster", id)
		}
	}
	return out
}

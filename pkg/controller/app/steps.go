package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
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

// parsedOptions are the values of the flags that parse into more than a
// string.
type parsedOptions struct {
	exportNamespaces map[string][]string
	memberPodCIDRs   map[string][]netip.Prefix
}

// namedIDs are the cluster IDs the operator's configuration names, each
// with the flag that names it (inventory.Config.NamedIDs).
func (p parsedOptions) namedIDs() map[string]string {
	named := map[string]string{}
	for id := range p.memberPodCIDRs {
		named[id] = "--member-pod-cidrs"
	}
	for id := range p.exportNamespaces {
		named[id] = "--export-namespaces"
	}
	return named
}

// parseOptions validates o and parses what it validated, so that a bad flag
// fails before any cluster is dialed.
func parseOptions(o *Options) (parsedOptions, error) {
	var p parsedOptions
	if err := o.Validate(); err != nil {
		return p, err
	}
	var err error
	if p.exportNamespaces, err = o.exportNamespaces(); err != nil {
		return p, err
	}
	if p.memberPodCIDRs, err = o.memberPodCIDRs(); err != nil {
		return p, err
	}
	return p, nil
}

// configure sets what every client of the controller shares, members and
// hub alike.
func (o *Options) configure(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = o.APIQPS, o.APIBurst
	cfg.UserAgent = "mcs-controller"
}

// memberConfigs returns the members given as contexts, by context name and
// in the order given. With an inventory of Secrets or ClusterProfiles, only
// those named (the hub is a member only if it is listed).
func memberConfigs(o *Options) (map[string]*rest.Config, []string, error) {
	if len(o.Contexts) == 0 && (o.MemberSecretsNamespace != "" || o.InventoryNamespace != "") {
		return nil, nil, nil
	}
	configs, order, err := topology.Contexts(o.Kubeconfig, o.Contexts)
	if err != nil {
		return nil, nil, err
	}
	for _, cfg := range configs {
		o.configure(cfg)
	}
	return configs, order, nil
}

// resolveMembers asks each member context for its cluster ID; those that
// do not answer are returned by context name, to join once they do, and
// those that answer with none they may be served as, with why.
func resolveMembers(ctx context.Context, o *Options, configs map[string]*rest.Config, order []string) ([]topology.Member, []string, map[string]error) {
	if len(order) == 0 {
		return nil, nil, nil
	}
	return topology.Resolve(ctx, configs, order, o.ClusterIDTimeout)
}

// hubConfig returns the hub's config, or nil when nothing is kept there.
// The hub holds the member Secrets or ClusterProfiles, the catalog, and, by
// default, the leader election Lease; one config serves them all.
func hubConfig(o *Options) (*rest.Config, error) {
	if o.MemberSecretsNamespace == "" && o.InventoryNamespace == "" && o.ServiceModel != ModelCatalog {
		return nil, nil
	}
	hub, err := topology.Context(o.Kubeconfig, o.HubContext)
	if err != nil {
		return nil, fmt.Errorf("--hub-context: %w", err)
	}
	o.configure(hub)
	return hub, nil
}

// inventoryConfig returns the config of the inventory: the member contexts,
// and the Secrets or ClusterProfiles on the hub that list further members.
func inventoryConfig(ctx context.Context, o *Options, p parsedOptions, configs map[string]*rest.Config, hub *rest.Config) (inventory.Config, error) {
	ids, err := o.memberClusterIDs()
	if err != nil {
		return inventory.Config{}, err
	}
	cfg := inventory.Config{
		Contexts:          configs,
		ContextClusterIDs: ids,
		NamedIDs:          p.namedIDs(),
		Configure:         o.configure,
		ClusterIDTimeout:  min(o.ClusterIDTimeout, 10*time.Second),
		SyncTimeout:       o.InitialSyncTimeout,
		LeaveTimeout:      2 * time.Minute,
		RecheckPeriod:     o.MemberRecheckPeriod,
		AllowProxy:        o.MemberSecretAllowProxy,
	}
	if o.MemberSecretsNamespace != "" || o.InventoryNamespace != "" {
		if cfg.Hub, err = kubernetes.NewForConfig(hub); err != nil {
			return cfg, err
		}
	}
	if o.MemberSecretsNamespace != "" {
		cfg.Namespace = o.MemberSecretsNamespace
		if cfg.Selector, err = labels.Parse(o.MemberSecretsSelector); err != nil {
			return cfg, fmt.Errorf("--member-secrets-selector: %w", err)
		}
	}
	if o.InventoryNamespace != "" {
		if cfg.AccessProviders, err = inventory.LoadAccessProviders(o.InventoryAccessProviders); err != nil {
			return cfg, fmt.Errorf("--inventory-access-providers: %w", err)
		}
		if o.PluginRunner != "" {
			runs, err := inventory.ListenPluginRuns(ctx, o.PluginRunner, cfg.AccessProviders)
			if err != nil {
				return cfg, err
			}
			cfg.AccessProviders = runs.Through(cfg.AccessProviders)
		}
		if cfg.Profiles, err = dynamic.NewForConfig(hub); err != nil {
			return cfg, err
		}
		if cfg.ProfileDiscovery, err = discovery.NewDiscoveryClientForConfig(hub); err != nil {
			return cfg, err
		}
		cfg.ProfileNamespace = o.InventoryNamespace
		cfg.RequireJoined = o.InventoryRequireJoined
		cfg.ClusterSet = o.ClusterSet
		if cfg.ProfileSelector, err = labels.Parse(o.InventorySelector); err != nil {
			return cfg, fmt.Errorf("--inventory-selector: %w", err)
		}
	}
	return cfg, nil
}

// catalogConfig returns the config of the catalog the hub holds, or nil
// outside catalog mode.
func catalogConfig(logger klog.Logger, o *Options, hub *rest.Config) (*mcs.CatalogConfig, error) {
	if o.ServiceModel != ModelCatalog {
		return nil, nil
	}
	cfg := &mcs.CatalogConfig{HealthProbesPerTeam: o.HealthProbesPerTeam, HealthProbes: o.HealthProbes, ObjectsPerTeam: o.CatalogObjectsPerTeam, OwnNetworks: ownNetworks(logger)}
	var err error
	if cfg.Hub, err = catalogclientset.NewForConfig(hub); err != nil {
		return nil, err
	}
	if cfg.HubKube, err = kubernetes.NewForConfig(hub); err != nil {
		return nil, err
	}
	logger.Info("Serving the service catalog of the hub", "hub", hub.Host)
	return cfg, nil
}

// joinedIDs returns the cluster ID of each member, by inventory key, so
// that the inventory knows them as joined.
func joinedIDs(members []topology.Member) map[string]string {
	joined := map[string]string{}
	for _, m := range members {
		joined[inventory.ContextKey(m.Context)] = m.ClusterID
	}
	return joined
}

// registry returns the registry /metrics serves, with the inventory's
// metrics in it.
func registry(inv *inventory.Inventory) compmetrics.KubeRegistry {
	reg := compmetrics.NewKubeRegistry()
	// The Go runtime's and the process's own, as every component serves.
	reg.RawMustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.CustomMustRegister(inv.Collector())
	inventory.RegisterPluginMetrics(reg)
	reg.MustRegister(leaderGauge)
	return reg
}

// initialMembers returns the members the inventory lists at start-up.
// They start with the others, so that no name is merged without an
// exporter that is merely late to join.
func initialMembers(ctx context.Context, inv *inventory.Inventory, unreachable []string) []topology.Member {
	inv.Pending(unreachable)
	members := inv.Initial(ctx)
	if len(unreachable) > 0 {
		klog.FromContext(ctx).Info("Running without unreachable member clusters; they join once they answer", "contexts", unreachable)
	}
	return members
}

// serveEndpoints serves /metrics (and, with --profiling, /debug/pprof/) and
// the health endpoints until ctx ends.
func serveEndpoints(ctx context.Context, o *ServingOptions, reg compmetrics.KubeRegistry, h *health) error {
	all := endpointsMux(o, reg, h)
	if err := serveSecure(ctx, o, all); err != nil {
		return err
	}
	// The plain endpoints, each on its own address.
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", all)
	if o.Profiling {
		metricsMux.Handle("/debug/pprof/", all)
	}
	if err := serve(ctx, o.MetricsBindAddress, "/", metricsMux); err != nil {
		return err
	}
	mux := http.NewServeMux()
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		mux.Handle(path, all)
	}
	return serve(ctx, o.HealthzBindAddress, "/", mux)
}

// controllerConfig returns the controller's config.
func controllerConfig(logger klog.Logger, o *Options, p parsedOptions, members []topology.Member, inv *inventory.Inventory, catalog *mcs.CatalogConfig) mcs.Config {
	ranges, _ := proxy.ParseCIDRs(o.ClusterSetIPCIDRs)
	return mcs.Config{
		Members:            members,
		ManagedBy:          o.ManagedBy,
		ClusterSetIPRanges: ranges,
		RefusedNamespaces:  o.RefusedNamespaces,
		SourceManagers:     o.SourceManagers,
		MemberPodCIDRs:     p.memberPodCIDRs,
		ExportNamespaces:   p.exportNamespaces,
		DerivedMembers:     memberSet(logger, "--derived-members", o.DerivedMembers, members),
		IngressMembers:     memberSet(logger, "--ingress-members", o.IngressMembers, members),
		IngressServiceType: v1.ServiceType(o.IngressServiceType),
		DerivedGrace:       o.DerivedGrace,
		EndpointTTL:        o.EndpointTTL,

		MaxClusterSetIPsPerNamespace: o.MaxClusterSetIPsPerNamespace,
		MaxForeignImportsPerMember:   o.MaxForeignImportsPerMember,
		MaxClusterSetIPsPerMember:    o.MaxClusterSetIPsPerMember,
		LeaseNamespace:               o.LeaseNamespace,
		Identity:                     o.Identity,
		Workers:                      o.Workers,
		InitialSyncTimeout:           o.InitialSyncTimeout,
		Catalog:                      catalog,
		ClusterSelection:             o.FeatureGates.Enabled(features.MultiClusterServiceClusterSelection),
		ExportClusters:               o.FeatureGates.Enabled(features.MultiClusterServiceExportClusters),
		ClusterProperties:            inv.ClusterProperties,
	}
}

// runWithInventory runs the controller and its inventory together: members
// join and leave only while this replica writes.
func runWithInventory(ctx context.Context, ctrl *mcs.Controller, inv *inventory.Inventory) error {
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

// leaderConfig returns the config of the cluster that holds the leader
// election Lease: the one --leader-elect-context names, else the hub, else
// the first member.
func leaderConfig(o *Options, configs map[string]*rest.Config, order []string, hub *rest.Config) (*rest.Config, error) {
	switch {
	case o.LeaderElectContext != "":
		if cfg := configs[o.LeaderElectContext]; cfg != nil {
			return cfg, nil
		}
		return nil, fmt.Errorf("--leader-elect-context %q is not a member context", o.LeaderElectContext)
	case hub != nil:
		return hub, nil
	default:
		return configs[order[0]], nil
	}
}

// leaderElection is a Lease and its timing, for runLeaderElected.
type leaderElection struct {
	name, namespace, identity                 string
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

// runLeaderElected runs run while this replica leads. It returns an error
// when leadership is lost, so that the process restarts clean.
func runLeaderElected(ctx context.Context, o leaderElection, cfg *rest.Config, h *health, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	kube, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.namespace, o.name, kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: o.identity})
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
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.name,
		WatchDog:        h.watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Leading", "identity", o.identity)
				led.Store(true)
				h.lead()
				err := run(ctx)
				cancel()
				ran <- err
			},
			OnStoppedLeading: func() { logger.Info("Stopped leading", "identity", o.identity) },
			OnNewLeader: func(id string) {
				if id != o.identity {
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

// ownNetworks are the networks of this process's interfaces (loopback and
// link-local left out: no binding may name those anyway), which catalog
// bindings may not name: the controller would probe its own network for
// whoever writes them.
func ownNetworks(logger klog.Logger) []netip.Prefix {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		logger.Error(err, "Cannot list the controller's own networks; catalog bindings are checked without them")
		return nil
	}
	var out []netip.Prefix
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipnet.IP)
		if !ok || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		ones, bits := ipnet.Mask.Size()
		if ip.Is4In6() && bits == 128 {
			ones -= 96
		}
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones).Masked())
	}
	return out
}

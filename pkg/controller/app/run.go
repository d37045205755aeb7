package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// defaultIdentity names a replica in Leases: its hostname and a random
// suffix (--identity's default).
func defaultIdentity() string {
	host, _ := os.Hostname()
	return host + "_" + uuid.NewString()[:8]
}

// leaderLeaseName is the leader election Lease.
const leaderLeaseName = "mcs-controller"

// Run runs the controller until ctx ends. With leader election it returns
// an error when leadership is lost, so that the process restarts clean.
func Run(ctx context.Context, o *Options) error {
	parsed, err := parseOptions(o)
	if err != nil {
		return err
	}
	if err := o.validateInventory(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if o.Identity == "" {
		o.Identity = defaultIdentity()
	}
	configs, order, err := memberConfigs(o)
	if err != nil {
		return err
	}
	// Nothing a member answers stops the start: a member without a
	// usable, undisputed ID is refused and reported, the others served.
	members, unreachable, failed := resolveMembers(ctx, o, configs, order)
	hub, err := hubConfig(o)
	if err != nil {
		return err
	}
	invCfg, err := inventoryConfig(ctx, o, parsed, configs, hub)
	if err != nil {
		return err
	}
	catalogCfg, err := catalogConfig(logger, o, hub)
	if err != nil {
		return err
	}
	// Who a member is, the operator states: a context whose cluster
	// answers with another ID than stated, or with an ID stated for
	// another or disputed, is refused, not served.
	members, refused := inventory.CheckContextIDs(invCfg.ContextClusterIDs, invCfg.NamedIDs, members, failed)
	inv := inventory.New(invCfg, joinedIDs(members))
	inv.Refuse(refused)
	// Before Initial, whose credential plugin runs count too.
	reg := registry(inv)
	members = append(members, initialMembers(ctx, inv, unreachable)...)
	metrics := mcs.NewMetrics(reg)
	h := &health{}
	if err := serveEndpoints(ctx, &o.ServingOptions, reg, h); err != nil {
		return err
	}
	ctrl, err := mcs.New(controllerConfig(logger, o, parsed, members, inv, catalogCfg), metrics)
	if err != nil {
		return err
	}
	h.set(ctrl)
	run := func(ctx context.Context) error { return runWithInventory(ctx, ctrl, inv) }
	if !o.LeaderElect {
		h.lead()
		return run(ctx)
	}
	leaderCfg, err := leaderConfig(o, configs, order, hub)
	if err != nil {
		return err
	}
	return runLeaderElected(ctx, leaderElection{
		name: leaderLeaseName, namespace: o.LeaseNamespace, identity: o.Identity,
		leaseDuration: o.LeaderElectLeaseDuration, renewDeadline: o.LeaderElectRenewDeadline, retryPeriod: o.LeaderElectRetryPeriod,
	}, leaderCfg, h, run)
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
	ctrl     readiness
	leading  bool
	watchdog *leaderelection.HealthzAdaptor
}

// readiness is what /readyz asks of the controller (*mcs.Controller).
type readiness interface {
	Ready() <-chan struct{}
	Synced() map[string]bool
}

func (h *health) set(c readiness) {
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
		// How many, not which: the endpoint answers anyone who reaches
		// it, and member names are the clusterset's business (the
		// controller's log says which).
		http.Error(w, fmt.Sprintf("caches not synced for %d member(s)", len(unsynced)), http.StatusServiceUnavailable)
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

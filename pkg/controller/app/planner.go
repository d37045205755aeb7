package app

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	compmetrics "k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/multiclusterservices/proxy"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/eventrecorder"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/features"
)

// plannerLeaseName is the planner's leader election Lease, in the hub.
const plannerLeaseName = "mcs-planner"

// plannerFlags are the controller's flags the planner takes: what decides
// a plan (the same flags, parsed by the same code, so that the modes do
// not drift), and how it reaches the hub and elects a leader there.
var plannerFlags = []string{
	"kubeconfig", "hub-context", "managed-by", "clusterset-ip-cidrs", "refuse-namespaces", "export-namespaces",
	"member-pod-cidrs", "endpoint-ttl", "max-clusterset-ips-per-namespace", "max-clusterset-ips-per-member",
	"workers", "initial-sync-timeout", "kube-api-qps", "kube-api-burst", "leader-elect", "lease-namespace",
	"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period", "identity", "feature-gates",
}

// NewPlannerCommand is `mcs-controller planner`.
func NewPlannerCommand() *cobra.Command {
	o := NewOptions()
	o.LeaseNamespace = "mcs-system"
	logging := logsapi.NewLoggingConfiguration()
	// One --feature-gates, as the controller's: its gates and logging's.
	utilruntime.Must(logsapi.AddFeatureGates(o.FeatureGates))
	cmd := &cobra.Command{
		Use:   "planner",
		Short: "Plan the clusterset in the hub from what the member agents publish (pull mode)",
		Long: `The planner of pull mode, in the hub: it reads what every member's agent
publishes in the member's hub namespace (MemberCluster, MemberExports and
their EndpointSlices, its Lease), plans each exported name as the
mcs-controller does, allocates clusterset IPs, and writes the plan once into
the namespace mcs-plan, for every agent to write its own cluster's part. It
holds no credential of any member.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runComponent(cmd, logging, o.FeatureGates, "mcs-planner", func(ctx context.Context) error { return RunPlanner(ctx, o) })
		},
	}
	all := pflag.NewFlagSet("all", pflag.ContinueOnError)
	o.AddFlags(all)
	// What it serves (metrics, health) is served as the controller's.
	serving := pflag.NewFlagSet("serving", pflag.ContinueOnError)
	o.ServingOptions.AddFlags(serving)
	var sections cliflag.NamedFlagSets
	fs := sections.FlagSet("planner")
	all.VisitAll(func(f *pflag.Flag) {
		if slices.Contains(plannerFlags, f.Name) || serving.Lookup(f.Name) != nil {
			fs.AddFlag(f)
		}
	})
	addFlagSections(cmd, sections, logging)
	return cmd
}

// RunPlanner plans until ctx ends; with leader election (a Lease in the
// hub) one replica writes.
func RunPlanner(ctx context.Context, o *Options) error {
	p, err := parseOptions(o)
	if err != nil {
		return err
	}
	ranges, err := proxy.ParseCIDRs(o.ClusterSetIPCIDRs)
	if err != nil {
		return err
	}
	hub, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig}, &clientcmd.ConfigOverrides{CurrentContext: o.HubContext}).ClientConfig()
	if err != nil {
		return fmt.Errorf("the hub: %w", err)
	}
	o.configure(hub)
	hub.UserAgent = "mcs-planner"
	hubKube, err := mcs.NewKubeClient(hub)
	if err != nil {
		return err
	}
	recorder, stopRecorder := eventrecorder.New(hubKube)
	defer stopRecorder()
	reg := compmetrics.NewKubeRegistry()
	reg.RawMustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(leaderGauge)
	planner, err := mcs.NewHubPlanner(mcs.HubPlannerConfig{
		Config: mcs.Config{
			ManagedBy:                    o.ManagedBy,
			ClusterSetIPRanges:           ranges,
			RefusedNamespaces:            o.RefusedNamespaces,
			ExportNamespaces:             p.exportNamespaces,
			MemberPodCIDRs:               p.memberPodCIDRs,
			EndpointTTL:                  o.EndpointTTL,
			MaxClusterSetIPsPerNamespace: o.MaxClusterSetIPsPerNamespace,
			MaxClusterSetIPsPerMember:    o.MaxClusterSetIPsPerMember,
			Workers:                      o.Workers,
			InitialSyncTimeout:           o.InitialSyncTimeout,
			ClusterSelection:             o.FeatureGates.Enabled(features.MultiClusterServiceClusterSelection),
		},
		Hub: hubKube, HubDynamic: dynamic.NewForConfigOrDie(hub), Recorder: recorder, Registry: reg,
	})
	if err != nil {
		return err
	}
	h := &health{}
	h.set(planner)
	if err := serveEndpoints(ctx, &o.ServingOptions, reg, h); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Planner", "hub", hub.Host, "clustersetIPRanges", ranges)
	run := func(ctx context.Context) error { return planner.Run(ctx) }
	if !o.LeaderElect {
		h.lead()
		return run(ctx)
	}
	if o.Identity == "" {
		o.Identity = defaultIdentity()
	}
	return runLeaderElected(ctx, leaderElection{
		name: plannerLeaseName, namespace: o.LeaseNamespace, identity: o.Identity,
		leaseDuration: o.LeaderElectLeaseDuration, renewDeadline: o.LeaderElectRenewDeadline, retryPeriod: o.LeaderElectRetryPeriod,
	}, hub, h, run)
}

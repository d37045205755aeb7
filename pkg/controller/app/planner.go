package app

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	compmetrics "k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/crdgate"
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
	"inventory-namespace", "inventory-selector", "clusterset", "ingress-members", "ingress-service-type",
	"service-model", "catalog-health-probes-per-team", "catalog-objects-per-team", "catalog-health-probes",
}

// plannerUsage are the planner's words for the flags it takes in a sense
// of its own.
var plannerUsage = map[string]string{
	"inventory-namespace":  "Namespace of the hub holding a Cluster Inventory (ClusterProfiles, multicluster.x-k8s.io, KEP-4322). The properties a profile states in its status (the cluster manager's word) win over what the member it names by its cluster.clusterset.k8s.io property publishes for every name both give, as in push mode; of two profiles naming one member, the oldest one's. Without it, the members' own word is matched. The hub must serve ClusterProfiles.",
	"inventory-selector":   "Label selector of the ClusterProfiles of --inventory-namespace that are read (default: every one).",
	"ingress-members":      "Cluster IDs (hub namespaces) of the members whose pods the other members cannot reach, nor they the others' (private or overlapping pod networks), comma separated. Between such a member and any other, an export is reached through its cluster's ingress: the exported Service itself when it is a NodePort or LoadBalancer Service, otherwise a Service of --ingress-service-type that the exporting member's agent creates for it as the plan asks (ingress-<hash>); the plan gives the other side the ingress's entry points (the addresses the member publishes of its ready nodes, or the load balancer's) instead of pod IPs.",
	"service-model":        "How the clusterset says what it serves: " + ModelNamespaceSameness + " (KEP-1645: the members' ServiceExports, as their agents publish them) or " + ModelCatalog + " (the service catalog in the hub: GlobalServices, ServiceBindings and GlobalServiceImports of catalog.multiclusterservices.k8s.io; the planner names in each member's MemberCluster the Services bindings name there, which its agent publishes, and plans each global service under each local name it is placed at). ServiceExports are not planned in catalog mode.",
	"ingress-service-type": "Type of the ingress Services the plan asks the members' agents to create: NodePort (every ready node is an entry point) or LoadBalancer (the load balancer's address is).",
	"clusterset":           "Name of the clusterset planned: a ClusterProfile whose status.properties name another in clusterset.k8s.io is about another clusterset's cluster and is not read (default: every profile is read).",
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
			if usage, ok := plannerUsage[f.Name]; ok {
				// The same value, with the planner's words.
				g := *f
				g.Usage = usage
				f = &g
			}
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
	hubDiscovery, err := discovery.NewDiscoveryClientForConfig(hub)
	if err != nil {
		return err
	}
	profiles, err := plannerProfiles(o, hubDiscovery)
	if err != nil {
		return err
	}
	catalog, err := catalogConfig(klog.FromContext(ctx), o, hub)
	if err != nil {
		return err
	}
	reg := compmetrics.NewKubeRegistry()
	reg.RawMustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(leaderGauge)
	ingressMembers := map[string]bool{}
	for _, id := range o.IngressMembers {
		ingressMembers[id] = true
	}
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
			// Members come and go as hub namespaces: the IDs as given.
			IngressMembers:     ingressMembers,
			IngressServiceType: v1.ServiceType(o.IngressServiceType),
		},
		Hub: hubKube, HubDynamic: dynamic.NewForConfigOrDie(hub), Recorder: recorder, Registry: reg,
		Profiles: profiles,
		Catalog:  catalog,
	})
	if err != nil {
		return err
	}
	h := &health{}
	h.set(plannerReadiness{planner})
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

// plannerProfiles is where the planner reads ClusterProfiles
// (--inventory-namespace), or nil. A hub that serves no ClusterProfile
// version the planner reads is an error at start, not a planner that waits
// unready: without the profiles, members' own word would decide what
// selection matches.
func plannerProfiles(o *Options, client discovery.DiscoveryInterface) (*mcs.HubProfiles, error) {
	if o.InventoryNamespace == "" {
		return nil, nil
	}
	selector, err := labels.Parse(o.InventorySelector)
	if err != nil {
		return nil, fmt.Errorf("--inventory-selector: %w", err)
	}
	v, err := crdgate.Discover(client, inventoryv1alpha1.Resource.GroupResource(), inventoryv1alpha1.Versions)
	if err != nil {
		return nil, fmt.Errorf("--inventory-namespace: %w", err)
	}
	if v == "" {
		return nil, fmt.Errorf("--inventory-namespace=%s: the hub serves no ClusterProfiles (%s, versions %v): install the Cluster Inventory API's CRD, or leave the flag out",
			o.InventoryNamespace, inventoryv1alpha1.Resource.GroupResource(), inventoryv1alpha1.Versions)
	}
	return &mcs.HubProfiles{Resource: inventoryv1alpha1.ResourceOf(v), Namespace: o.InventoryNamespace, Selector: selector, ClusterSet: o.ClusterSet}, nil
}

// plannerReadiness is the planner's /readyz: ready once it plans. A
// member whose agent has not published yet is planned without, after
// --initial-sync-timeout, as a member that is not synced: it must not
// hold the planner's rollouts (one member's agent would hold the whole
// clusterset's planning), and mcs_planner_members{state="unsynced"} and
// the alert MCSPlannerMemberUnsynced say it.
type plannerReadiness struct{ p *mcs.HubPlanner }

func (r plannerReadiness) Ready() <-chan struct{}  { return r.p.Ready() }
func (r plannerReadiness) Synced() map[string]bool { return nil }

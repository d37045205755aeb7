package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/eventrecorder"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/mcs"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/features"
)

// agentLeaseName is the member agent's leader election Lease, in its own
// cluster.
const agentLeaseName = "mcs-member-agent"

// AgentOptions are the flags of `mcs-controller member-agent`, pull
// mode's agent in a member cluster (docs/architecture.md, "Pull mode").
type AgentOptions struct {
	// Kubeconfig reaches the agent's own cluster; empty: in-cluster.
	Kubeconfig string
	// HubKubeconfig reaches the hub as the member's agent identity.
	HubKubeconfig string
	// SourceManagers are the managed-by values whose slices are
	// published (the controller's --source-endpointslice-managers).
	SourceManagers []string
	// ManagedBy is the manager the agent writes the plan into its cluster
	// as: the planner's --managed-by.
	ManagedBy string
	// SourceLeaseNamespace holds the Leases of source clusters the
	// writing half keeps in this cluster, as the controller's
	// --lease-namespace in push mode.
	SourceLeaseNamespace string
	EndpointTTL          time.Duration
	// Derived serves this cluster in derived mode, as the controller's
	// --derived-members serves a member in push mode: its proxies do not
	// program ServiceImports, and the writing half writes a derived
	// Service per import. DerivedGrace is the controller's
	// --derived-grace.
	Derived       bool
	DerivedGrace  time.Duration
	Workers       int
	ClusterIDWait time.Duration
	APIQPS        float32
	APIBurst      int
	// Leader election in the agent's own cluster: one replica publishes.
	LeaderElect              bool
	LeaseNamespace           string
	LeaderElectLeaseDuration time.Duration
	LeaderElectRenewDeadline time.Duration
	LeaderElectRetryPeriod   time.Duration
	Identity                 string
	// FeatureGates are the controller's, with the same meaning for what
	// the writing half writes: MultiClusterServiceClusterSelection (the
	// import's clusterSelectors and this cluster's results, from the
	// plan) and MultiClusterServiceExportClusters (the export's
	// status.clusters). Set them as the planner's.
	FeatureGates featuregate.MutableVersionedFeatureGate
	// ServingOptions are what it serves, as the controller: its writing
	// half's metrics (the controller's), health, profiles.
	ServingOptions
}

// NewAgentOptions returns the agent's defaults, the controller's where
// they mean the same.
func NewAgentOptions() *AgentOptions {
	c := NewOptions()
	return &AgentOptions{
		SourceManagers: c.SourceManagers, ManagedBy: c.ManagedBy, SourceLeaseNamespace: c.LeaseNamespace, EndpointTTL: c.EndpointTTL,
		DerivedGrace: c.DerivedGrace,
		Workers:      4, ClusterIDWait: 2 * time.Minute,
		APIQPS: c.APIQPS, APIBurst: c.APIBurst,
		LeaderElect: true, LeaseNamespace: "mcs-system",
		LeaderElectLeaseDuration: c.LeaderElectLeaseDuration, LeaderElectRenewDeadline: c.LeaderElectRenewDeadline,
		LeaderElectRetryPeriod: c.LeaderElectRetryPeriod,
		FeatureGates:           features.NewControllerFeatureGate(),
		ServingOptions:         NewServingOptions(),
	}
}

// AddFlags adds the agent's flags to fs.
func (o *AgentOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the agent's own cluster (default: the in-cluster configuration).")
	fs.StringVar(&o.HubKubeconfig, "hub-kubeconfig", o.HubKubeconfig, "Kubeconfig of the hub, as this member's agent: the ServiceAccount mcs-member-agent of the hub namespace named after this cluster's ID (kubectl mcs hub member CLUSTER_ID). Required.")
	fs.StringSliceVar(&o.SourceManagers, "source-endpointslice-managers", o.SourceManagers, "endpointslice.kubernetes.io/managed-by values of the exported Services' EndpointSlices that are published; slices anyone else wrote stay in this cluster.")
	fs.StringVar(&o.ManagedBy, "managed-by", o.ManagedBy, "endpointslice.kubernetes.io/managed-by value of the EndpointSlices the agent writes into this cluster: the planner's --managed-by.")
	fs.StringVar(&o.SourceLeaseNamespace, "source-lease-namespace", o.SourceLeaseNamespace, "Namespace of this cluster where the agent keeps the source clusters' Leases, as the mcs-controller's --lease-namespace in push mode.")
	fs.DurationVar(&o.EndpointTTL, "endpoint-ttl", o.EndpointTTL, "The planner's --endpoint-ttl: this member's Lease in the hub is renewed at a third of it (at most every 10s), so that the planner finds it expired only once this cluster's API has not answered for most of the TTL.")
	fs.BoolVar(&o.Derived, "derived", o.Derived, "Serve this cluster in derived mode, as the mcs-controller's --derived-members serves a member in push mode: its proxies do not program ServiceImports (upstream kube-proxy, a kube-proxy-free network plugin), so each import gets a derived Service (derived-<hash>, with EndpointSlices per source cluster) and its ips are that Service's cluster IPs.")
	fs.DurationVar(&o.DerivedGrace, "derived-grace", o.DerivedGrace, "How long a derived Service keeps serving after this cluster is switched to native mode (the agent restarted without --derived), for clients that still hold its IPs from earlier DNS answers (at least the DNS TTL of clusterset.local).")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Exported names published, and planned names written, at once.")
	fs.DurationVar(&o.ClusterIDWait, "cluster-id-wait", o.ClusterIDWait, "How long to wait for this cluster's ClusterProperty cluster.clusterset.k8s.io.")
	fs.Float32Var(&o.APIQPS, "kube-api-qps", o.APIQPS, "Client QPS, to this cluster and to the hub each.")
	fs.IntVar(&o.APIBurst, "kube-api-burst", o.APIBurst, "Client burst, to this cluster and to the hub each.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader among replicas (a Lease in --lease-namespace of this cluster) so that only one publishes.")
	fs.StringVar(&o.LeaseNamespace, "lease-namespace", o.LeaseNamespace, "Namespace of the leader election Lease in this cluster.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", o.LeaderElectLeaseDuration, "Leader election lease duration.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectRenewDeadline, "Leader election renew deadline.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", o.LeaderElectRetryPeriod, "Leader election retry period.")
	fs.StringVar(&o.Identity, "identity", o.Identity, "Identity of this replica in the Lease (default: hostname and a random suffix).")
	o.ServingOptions.AddFlags(fs)
}

// NewMemberAgentCommand is `mcs-controller member-agent`.
func NewMemberAgentCommand() *cobra.Command {
	o := NewAgentOptions()
	logging := logsapi.NewLoggingConfiguration()
	// One --feature-gates, as the controller's: its gates and logging's.
	gates := o.FeatureGates
	utilruntime.Must(logsapi.AddFeatureGates(gates))
	cmd := &cobra.Command{
		Use:   "member-agent",
		Short: "Publish this member's exports into its namespace of the hub, and write what the hub planned into this cluster (pull mode)",
		Long: `The member agent of pull mode. With this cluster's own credentials it reads
the ServiceExports, exported Services and their EndpointSlices, and with its
hub identity alone publishes, in the hub namespace named after this
cluster's ID, its namespaces (a MemberCluster), one MemberExport per export
and the trusted endpoints (export.CheckSource, made here), and renews the
member's Lease there; slices refused are said on the export. It reads the
plan the hub's planner wrote and writes this cluster's part of it (imports,
their EndpointSlices, native-name Services) with this cluster's credentials,
as the mcs-controller writes a member in push mode.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runComponent(cmd, logging, gates, "mcs-member-agent", func(ctx context.Context) error { return RunAgent(ctx, o) })
		},
	}
	var sections cliflag.NamedFlagSets
	o.AddFlags(sections.FlagSet("member-agent"))
	gates.AddFlag(sections.FlagSet("member-agent"))
	addFlagSections(cmd, sections, logging)
	return cmd
}

// RunAgent publishes until ctx ends; with leader election it returns an
// error when leadership is lost, so that the process restarts clean.
// Before anything is published, the hub identity must be this cluster's
// agent (pull.CheckHubIdentity): a cluster whose ClusterProperty and hub
// identity disagree does not start, and says which is which.
func RunAgent(ctx context.Context, o *AgentOptions) error {
	logger := klog.FromContext(ctx)
	if o.HubKubeconfig == "" {
		return fmt.Errorf("--hub-kubeconfig is required: the hub, as this member's agent (kubectl mcs hub member CLUSTER_ID)")
	}
	if len(o.SourceManagers) == 0 {
		return fmt.Errorf("--source-endpointslice-managers is empty: no slice would be published")
	}
	if err := checkDerivedGrace(o.DerivedGrace); err != nil {
		return err
	}
	if errs := o.ServingOptions.Validate(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	member, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("this cluster: %w", err)
	}
	hub, err := clientcmd.BuildConfigFromFlags("", o.HubKubeconfig)
	if err != nil {
		return fmt.Errorf("--hub-kubeconfig: %w", err)
	}
	for _, cfg := range []*rest.Config{member, hub} {
		cfg.QPS, cfg.Burst = o.APIQPS, o.APIBurst
		cfg.UserAgent = "mcs-member-agent"
	}
	clusterID, err := topology.ClusterID(ctx, member, o.ClusterIDWait)
	if err != nil {
		return fmt.Errorf("this cluster's ID: %w", err)
	}
	hubKube, err := mcs.NewKubeClient(hub)
	if err != nil {
		return err
	}
	review, err := hubKube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("asking the hub who this agent is: %w", err)
	}
	if err := pull.CheckHubIdentity(review.Status.UserInfo.Username, clusterID); err != nil {
		return err
	}
	memberKube, err := mcs.NewKubeClient(member)
	if err != nil {
		return err
	}
	recorder, stopRecorder := eventrecorder.New(memberKube)
	defer stopRecorder()
	agent, err := pull.NewAgent(pull.AgentConfig{
		ClusterID: clusterID,
		Member:    memberKube, MemberDynamic: dynamic.NewForConfigOrDie(member),
		Hub: hubKube, HubDynamic: dynamic.NewForConfigOrDie(hub),
		SourceManagers: o.SourceManagers, Recorder: recorder,
		// The planner withdraws a member whose Lease is older than its
		// endpoint TTL, which this agent's --endpoint-ttl repeats.
		LeaseRenewal: mcs.RenewalPeriod(o.EndpointTTL),
		ManagedBy:    o.ManagedBy,
		Derived:      o.Derived,
	})
	if err != nil {
		return err
	}
	if o.Identity == "" {
		o.Identity = defaultIdentity()
	}
	// The Go runtime's and the process's, the leader gauge, and the
	// writing half's: the controller's metrics, so that push mode's
	// alerts watch every member's writes in pull mode too.
	reg := metrics.NewKubeRegistry()
	reg.RawMustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(leaderGauge)
	writer, err := mcs.New(mcs.Config{
		Members:        []topology.Member{{ClusterID: clusterID, Config: member}},
		ManagedBy:      o.ManagedBy,
		EndpointTTL:    o.EndpointTTL,
		LeaseNamespace: o.SourceLeaseNamespace,
		Identity:       o.Identity,
		Workers:        o.Workers,
		HubPlan:        &mcs.HubPlanSource{Hub: hubKube, HubDynamic: dynamic.NewForConfigOrDie(hub)},
		// What the plan asks of this cluster's objects, as push mode's
		// writers with the same gates.
		ClusterSelection: o.FeatureGates.Enabled(features.MultiClusterServiceClusterSelection),
		ExportClusters:   o.FeatureGates.Enabled(features.MultiClusterServiceExportClusters),
		// Whether this cluster's proxies program imports is its own
		// operator's word, as push mode's --derived-members is the hub
		// operator's: it decides only how this cluster is written.
		DerivedMembers: map[string]bool{clusterID: o.Derived},
		DerivedGrace:   o.DerivedGrace,
	}, mcs.NewMetrics(reg))
	if err != nil {
		return err
	}
	h := &health{}
	h.set(newAgentReadiness(agent, writer))
	if err := serveEndpoints(ctx, &o.ServingOptions, reg, h); err != nil {
		return err
	}
	logger.Info("Member agent", "cluster", clusterID, "hub", hub.Host, "as", review.Status.UserInfo.Username)
	run := func(ctx context.Context) error {
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return agent.Run(ctx, o.Workers) })
		g.Go(func() error { return writer.Run(ctx) })
		return g.Wait()
	}
	if !o.LeaderElect {
		h.lead()
		return run(ctx)
	}
	return runLeaderElected(ctx, leaderElection{
		name: agentLeaseName, namespace: o.LeaseNamespace, identity: o.Identity,
		leaseDuration: o.LeaderElectLeaseDuration, renewDeadline: o.LeaderElectRenewDeadline, retryPeriod: o.LeaderElectRetryPeriod,
	}, member, h, run)
}

// agentReadiness is the agent ready: both halves, its publishing (the
// hub's and this cluster's caches) and its writing (the controller's, of
// this cluster).
type agentReadiness struct {
	agent  *pull.Agent
	writer *mcs.Controller
	both   chan struct{}
}

func newAgentReadiness(agent *pull.Agent, writer *mcs.Controller) agentReadiness {
	r := agentReadiness{agent: agent, writer: writer, both: make(chan struct{})}
	go func() {
		<-agent.Ready()
		<-writer.Ready()
		close(r.both)
	}()
	return r
}

func (r agentReadiness) Ready() <-chan struct{} { return r.both }

func (r agentReadiness) Synced() map[string]bool {
	out := r.writer.Synced()
	select {
	case <-r.agent.Ready():
		out["hub"] = true
	default:
		out["hub"] = false
	}
	return out
}

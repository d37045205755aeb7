package multicluster

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "kubeproxy"

var (
	// rejectionsTotal counts objects kube-proxy refused to program, by
	// kind (ServiceImport or EndpointSlice) and reason. Each rejection
	// is counted once, when it first happens, not on every resync.
	rejectionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "multicluster_rejections_total",
		Help:           "Number of ServiceImports and MCS EndpointSlices kube-proxy refused to program, by kind and reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "reason"})

	// programmedImports is the number of ServiceImports currently
	// programmed as clusterset VIPs.
	programmedImports = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "multicluster_programmed_service_imports",
		Help:           "Number of ServiceImports whose clusterset IPs are currently programmed.",
		StabilityLevel: metrics.ALPHA,
	})

	// serviceImportAPIServed is 1 while the ServiceImport CRD is served and
	// watched, 0 otherwise.
	serviceImportAPIServed = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "multicluster_service_import_api_served",
		Help:           "1 while the ServiceImport API is served and watched by kube-proxy, 0 otherwise.",
		StabilityLevel: metrics.ALPHA,
	})

	// localClusterIDKnown is 1 while kube-proxy knows the ID of its
	// cluster (ClusterProperty cluster.clusterset.k8s.io).
	localClusterIDKnown = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "multicluster_local_cluster_id_known",
		Help:           "1 while kube-proxy knows its cluster's ID (ClusterProperty cluster.clusterset.k8s.io), 0 otherwise.",
		StabilityLevel: metrics.ALPHA,
	})

	// nativeNamesServices is the number of local Services this proxy
	// currently gives other clusters' endpoints (native names), by strategy.
	nativeNamesServices = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "multicluster_native_names_services",
		Help:           "Number of local Services currently serving other clusters' endpoints through native names, by strategy.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"strategy"})

	// localFirstSwitchesTotal counts LocalFirst decisions that changed
	// where a local Service sends traffic: failover (too few local
	// endpoints ready, the other clusters' join) and failback.
	localFirstSwitchesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "multicluster_local_first_switches_total",
		Help:           "Number of LocalFirst failovers to other clusters' endpoints and failbacks to the local ones, decided by this proxy.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"direction"})

	// clusterSelectionChanges counts cluster selection decisions that
	// changed which source clusters an import's clusterset IPs send to
	// (KEP-5939): a failover to a later result, or back.
	clusterSelectionChanges = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "multicluster_cluster_selection_changes_total",
		Help: "Number of changes of the source clusters an import's clusterset IPs send to, decided by this proxy from the import's cluster selector results, " +
			"by direction: failover (to a later result, or to every source cluster), failback (to an earlier result), within (the same latest result, another address family or port moved).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"direction"})

	// clusterSelectionResult is, per import with cluster selector
	// results, the index of the result this proxy sends its clusterset
	// IPs to (the latest any address family uses), -1 for every source
	// cluster, and why (reason). The series goes with the import or its
	// results.
	clusterSelectionResult = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: metricsSubsystem,
		Name:      "multicluster_cluster_selection_result",
		Help: "Index of the cluster selector result this proxy sends an import's clusterset IPs to, -1 for every source cluster (KEP-5939), " +
			"with why: first_result, earlier_results_unready (no earlier result has a ready or serving endpoint), no_result_ready (none has: every source cluster).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "name", "reason"})

	// staleConntrackEntriesDeleted counts the conntrack entries of
	// connection attempts to a clusterset IP made before it was programmed
	// on this node, deleted so that they send no later connection past
	// the rules (conntrack.go).
	staleConntrackEntriesDeleted = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "multicluster_stale_conntrack_entries_deleted_total",
		Help:           "Number of conntrack entries of TCP connection attempts to a clusterset IP made before this proxy programmed it (unanswered, not DNATed), deleted so that later connections reusing their ports are load-balanced.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// RegisterMetrics registers the multi-cluster metrics with kube-proxy's
// metrics endpoint.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(rejectionsTotal, programmedImports, serviceImportAPIServed, localClusterIDKnown, nativeNamesServices, localFirstSwitchesTotal, clusterSelectionChanges, clusterSelectionResult, staleConntrackEntriesDeleted)
	})
}

package mcs

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics"
	"k8s.io/multiclusterservices/export"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	exportSync   *metrics.HistogramVec
	sliceSync    *metrics.HistogramVec
	conflicts    *metrics.GaugeVec
	foreign      *metrics.CounterVec
	unmirrored   *metrics.CounterVec
	outside      *metrics.CounterVec
	unknown      *metrics.CounterVec
	propagation  *metrics.HistogramVec
	catalog      *metrics.GaugeVec
	probes       *metrics.GaugeVec
	registry     metrics.KubeRegistry
	registerOnce sync.Once

	mu          sync.Mutex
	conflictsOf map[string][]string // key -> reasons
}

// NewMetrics registers the metrics in reg. They are Kubernetes component
// metrics (k8s.io/component-base/metrics), alpha, as kube-proxy's are.
func NewMetrics(reg metrics.KubeRegistry) *Metrics {
	buckets := []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &Metrics{
		exportSync: metrics.NewHistogramVec(&metrics.HistogramOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_controller_export_sync_duration_seconds", Help: "Time to merge the exports of one name across the clusterset.", Buckets: buckets,
		}, []string{"result"}),
		sliceSync: metrics.NewHistogramVec(&metrics.HistogramOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_controller_member_sync_duration_seconds", Help: "Time to write one name's import, EndpointSlices and export status into one member cluster.", Buckets: buckets,
		}, []string{"cluster", "result"}),
		conflicts: metrics.NewGaugeVec(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_controller_conflicts", Help: "Exported names whose exports conflict, by Conflict reason.",
		}, []string{"reason"}),
		foreign: metrics.NewCounterVec(&metrics.CounterOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_controller_foreign_endpointslices_deleted_total",
			Help: "EndpointSlices deleted from a member because they carried the controller's managed-by label but someone else wrote them.",
		}, []string{"cluster"}),
		unmirrored: metrics.NewCounterVec(&metrics.CounterOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_controller_unmirrored_endpointslices_total",
			Help: "EndpointSlices of exported Services not mirrored to other members because no trusted source manager wrote them: their managed-by is not trusted, they are not owned as that manager's slices are, or that manager does not serve the Service (EndpointSlice controller: Services with a selector; mirroring controller: without).",
		}, []string{"cluster"}),
		outside: metrics.NewCounterVec(&metrics.CounterOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_controller_endpoints_outside_pod_ranges_total",
			Help: "Endpoint addresses of exported Services not mirrored because they lie outside the source cluster's pod ranges and node addresses.",
		}, []string{"cluster"}),
		unknown: metrics.NewCounterVec(&metrics.CounterOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_controller_endpoints_ranges_unknown_total",
			Help: "Endpoint addresses of exported Services not mirrored because the source cluster's endpoint ranges are unknown (no node pod CIDRs, no --member-pod-cidrs) and their writer does not vouch for them (mirrored from Endpoints, or naming no Pod).",
		}, []string{"cluster"}),
		propagation: metrics.NewHistogramVec(&metrics.HistogramOpts{StabilityLevel: metrics.ALPHA,
			Name:    "mcs_controller_endpoint_propagation_seconds",
			Help:    "Time from the change of a source cluster's endpoints (the EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time) to the imported EndpointSlice written in a member cluster, by member.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"cluster"}),
		catalog: metrics.NewGaugeVec(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_controller_catalog_objects",
			Help: "Objects of the hub's service catalog (catalog mode), by kind and by the reason of their Valid condition (Valid when they take part).",
		}, []string{"kind", "reason"}),
		probes: metrics.NewGaugeVec(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_controller_catalog_health_check_addresses",
			Help: "Addresses of ServiceBindings with a health check (catalog mode): probed, or over_limit (not probed, and not ready: over --catalog-health-probes-per-team or --catalog-health-probes).",
		}, []string{"state"}),
		registry:    reg,
		conflictsOf: map[string][]string{},
	}
	reg.MustRegister(m.exportSync, m.sliceSync, m.conflicts, m.foreign, m.unmirrored, m.outside, m.unknown, m.propagation, m.catalog, m.probes)
	return m
}

// register adds the metrics that read a running controller's state.
func (m *Metrics) register(c *Controller) {
	m.registerOnce.Do(func() {
		depth := metrics.NewGaugeFunc(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA, Name: "mcs_controller_clusterset_queue_depth", Help: "Names waiting to be merged."},
			func() float64 { return float64(c.queue.Len()) })
		names := metrics.NewGaugeFunc(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA, Name: "mcs_controller_names_tracked", Help: "Exported names the controller holds a desired state for (names no cluster exports any more are forgotten once every member is clean)."},
			func() float64 {
				c.mu.RLock()
				defer c.mu.RUnlock()
				return float64(len(c.desired))
			})
		reachable := metrics.NewGaugeFunc(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA, Name: "mcs_controller_clusters_reachable", Help: "Member clusters whose API answered the last probe."},
			func() float64 { return float64(c.leases.reachableCount()) })
		total := metrics.NewGaugeFunc(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA, Name: "mcs_controller_clusters", Help: "Member clusters being served (joined members)."},
			func() float64 { return float64(len(c.members.all())) })
		vips := metrics.NewGaugeFunc(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA, Name: "mcs_controller_clusterset_ips_allocated", Help: "Allocated clusterset IPs."},
			func() float64 { return float64(c.clustersetIPs.Allocated()) })
		capacity := metrics.NewGaugeFunc(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA, Name: "mcs_controller_clusterset_ips_capacity", Help: "Clusterset IPs the ranges of --clusterset-ip-cidrs hold (an IPv6 range counts as at most 2^32)."},
			c.clustersetIPs.Capacity)
		noIP := metrics.NewGaugeFunc(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA, Name: "mcs_controller_imports_without_clusterset_ip", Help: "ClusterSetIP imports written without a clusterset IP (the pool exhausted, or the namespace's or team's bound reached): their Ready condition says why."},
			c.importsWithoutIP)
		// Gauges computed at scrape time (component-base's GaugeFunc is a
		// plain collector, registered as such).
		m.registry.RawMustRegister(depth, names, reachable, total, vips, capacity, noIP)
		_ = m.registry.CustomRegister(&memberCollector{c: c})
	})
}

var (
	memberQueueDepthDesc = metrics.NewDesc("mcs_controller_member_queue_depth",
		"Names waiting to be written into a member cluster.", []string{"cluster"}, nil, metrics.ALPHA, "")
	foreignClaimsDesc = metrics.NewDesc("mcs_controller_foreign_clusterset_ip_claims",
		"ServiceImports in a member cluster not written by this controller that carry a clusterset IP it allocated.", []string{"cluster"}, nil, metrics.ALPHA, "")
	rangesKnownDesc = metrics.NewDesc("mcs_controller_member_endpoint_ranges_known",
		"1 when it is known where a member cluster's endpoints may be (its nodes' pod CIDRs or --member-pod-cidrs), 0 when not: then only endpoints the EndpointSlice controller wrote for Pods are mirrored from it.", []string{"cluster"}, nil, metrics.ALPHA, "")
	leaseRemainingDesc = metrics.NewDesc("mcs_controller_source_lease_remaining_seconds",
		"Seconds until a member cluster's endpoint lease expires (--endpoint-ttl after the controller last reached it); at 0 its endpoints are withdrawn from every member.", []string{"cluster"}, nil, metrics.ALPHA, "")
	overlapsDesc = metrics.NewDesc("mcs_controller_service_cidrs_overlapping_clusterset",
		"ServiceCIDRs of a member cluster that overlap the clusterset IP ranges: a Service there may be given an import's clusterset IP.", []string{"cluster"}, nil, metrics.ALPHA, "")
)

// memberCollector reports per-member gauges for the members of the moment:
// members join and leave at run time.
type memberCollector struct {
	metrics.BaseStableCollector
	c *Controller
}

func (mc *memberCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- memberQueueDepthDesc
	ch <- foreignClaimsDesc
	ch <- rangesKnownDesc
	ch <- overlapsDesc
	ch <- leaseRemainingDesc
}

func (mc *memberCollector) CollectWithStability(ch chan<- metrics.Metric) {
	for _, m := range mc.c.members.all() {
		ch <- metrics.NewLazyConstMetric(memberQueueDepthDesc, metrics.GaugeValue, float64(m.queue.Len()), m.id)
		ch <- metrics.NewLazyConstMetric(foreignClaimsDesc, metrics.GaugeValue, float64(mc.c.reservations.foreignClaims(m)), m.id)
		known := 0.0
		if m.endpointRanges(mc.c.cfg.MemberPodCIDRs).Known {
			known = 1
		}
		ch <- metrics.NewLazyConstMetric(rangesKnownDesc, metrics.GaugeValue, known, m.id)
		ch <- metrics.NewLazyConstMetric(overlapsDesc, metrics.GaugeValue, float64(len(mc.c.reservations.serviceRangeOverlaps(m))), m.id)
		ch <- metrics.NewLazyConstMetric(leaseRemainingDesc, metrics.GaugeValue, mc.c.leases.remaining(m.id).Seconds(), m.id)
	}
}

// importsWithoutIP counts the ClusterSetIP imports planned without a
// clusterset IP, in every member's variant in catalog mode.
func (c *Controller) importsWithoutIP() float64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for _, d := range c.desired {
		for _, v := range append([]*desiredState{d}, slices.Collect(maps.Values(d.Variants))...) {
			if v.Import != nil && v.Import.Spec.Type == mcsv1beta1.ClusterSetIP && len(v.Import.Spec.IPs) == 0 {
				n++
			}
		}
	}
	return float64(n)
}

// forgetMember drops the per-member series of a member that left.
func (m *Metrics) forgetMember(cluster string) {
	if m == nil {
		return
	}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.sliceSync, m.foreign, m.unmirrored, m.outside, m.unknown, m.propagation} {
		v.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	}
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}

func (m *Metrics) observeExportSync(d time.Duration, err error) {
	if m != nil {
		m.exportSync.WithLabelValues(result(err)).Observe(d.Seconds())
	}
}

func (m *Metrics) observeSliceSync(cluster string, d time.Duration, err error) {
	if m != nil {
		m.sliceSync.WithLabelValues(cluster, result(err)).Observe(d.Seconds())
	}
}

func (m *Metrics) observePropagation(cluster string, d time.Duration) {
	if m != nil {
		m.propagation.WithLabelValues(cluster).Observe(d.Seconds())
	}
}

func (m *Metrics) countOutsidePodRanges(cluster string, n int) {
	if m != nil {
		m.outside.WithLabelValues(cluster).Add(float64(n))
	}
}

func (m *Metrics) countRangesUnknown(cluster string, n int) {
	if m != nil {
		m.unknown.WithLabelValues(cluster).Add(float64(n))
	}
}

func (m *Metrics) countUnmirrored(cluster string) {
	if m != nil {
		m.unmirrored.WithLabelValues(cluster).Inc()
	}
}

func (m *Metrics) countForeignSlice(cluster string) {
	if m != nil {
		m.foreign.WithLabelValues(cluster).Inc()
	}
}

// setConflicts records the conflict reasons of one name.
func (m *Metrics) setConflicts(key string, conflicts []export.Conflict) {
	if m == nil {
		return
	}
	var reasons []string
	for _, c := range conflicts {
		r := string(c.Reason)
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.conflictsOf[key] {
		m.conflicts.WithLabelValues(r).Dec()
	}
	for _, r := range reasons {
		m.conflicts.WithLabelValues(r).Inc()
	}
	if len(reasons) == 0 {
		delete(m.conflictsOf, key)
	} else {
		m.conflictsOf[key] = reasons
	}
}

// setHealthChecks counts the addresses health checks probe, and those
// over the limits.
func (m *Metrics) setHealthChecks(probed, overLimit int) {
	if m == nil {
		return
	}
	m.probes.WithLabelValues("probed").Set(float64(probed))
	m.probes.WithLabelValues("over_limit").Set(float64(overLimit))
}

// setCatalog counts the catalog's objects by kind and Valid reason.
func (m *Metrics) setCatalog(valid map[string]string) {
	if m == nil {
		return
	}
	m.catalog.Reset()
	for key, reason := range valid {
		kind, _, _ := strings.Cut(key, "/")
		m.catalog.WithLabelValues(kind, reason).Inc()
	}
}

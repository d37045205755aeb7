package mcs

import (
	"k8s.io/component-base/metrics"
)

// plannerMetrics are pull mode's planner's Prometheus metrics: what the
// controller's say of its planning (how long a name takes, the conflicts
// are the same code's), and what only the planner has: the members it
// reads and their liveness, the writes it makes into the hub.
type plannerMetrics struct {
	sync    *metrics.HistogramVec
	writes  *metrics.CounterVec
	members *metrics.GaugeVec
}

func newPlannerMetrics(reg metrics.KubeRegistry, p *HubPlanner) *plannerMetrics {
	m := &plannerMetrics{
		sync: metrics.NewHistogramVec(&metrics.HistogramOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_planner_sync_duration_seconds", Help: "Time to plan one name and write what of its plan changed into the hub.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"result"}),
		writes: metrics.NewCounterVec(&metrics.CounterOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_planner_writes_total", Help: "Writes the planner made into the hub, by resource: serviceplans (with every member's export's conditions), endpointslices (the plan's), memberclusters/status (the Services the catalog binds in a member).",
		}, []string{"resource"}),
		members: metrics.NewGaugeVec(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_planner_members", Help: "Member namespaces of the hub, by state: alive (its agent renewed its Lease within the endpoint TTL), expired (it did not), unsynced (its agent has published no MemberCluster yet).",
		}, []string{"state"}),
	}
	if reg != nil {
		reg.MustRegister(m.sync, m.writes, m.members)
		// Computed at scrape time (component-base's GaugeFunc is a plain
		// collector, registered as such).
		reg.RawMustRegister(metrics.NewGaugeFunc(&metrics.GaugeOpts{StabilityLevel: metrics.ALPHA,
			Name: "mcs_planner_clusterset_ips_allocated", Help: "Clusterset IPs the plan holds.",
		}, func() float64 { return float64(p.ips.Allocated()) }))
	}
	return m
}

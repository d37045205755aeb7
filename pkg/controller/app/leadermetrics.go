package app

import (
	"k8s.io/client-go/tools/leaderelection"
	compmetrics "k8s.io/component-base/metrics"
)

// The leader election's own gauge, under the name and labels every
// Kubernetes component that elects a leader publishes it with
// (kube-controller-manager, kube-scheduler), so that the alerts operators
// already run on it (no replica leading) cover the controller too.
var leaderGauge = compmetrics.NewGaugeVec(&compmetrics.GaugeOpts{
	Name:           "leader_election_master_status",
	StabilityLevel: compmetrics.ALPHA,
	Help:           "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
}, []string{"name"})

func init() {
	leaderelection.SetProvider(leaderMetrics{})
}

type leaderMetrics struct{}

func (leaderMetrics) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetrics{} }

func (leaderMetrics) On(name string)           { leaderGauge.WithLabelValues(name).Set(1) }
func (leaderMetrics) Off(name string)          { leaderGauge.WithLabelValues(name).Set(0) }
func (leaderMetrics) SlowpathExercised(string) {}

package mcs

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// writes makes one member hold what the plan gives it: its exports'
// status, its import, the slices of every source cluster, the Services
// the import needs, the import's status and cluster selection results,
// and the reports (events, log lines, metrics) the planner asks for. It
// holds that member (its clients, caches and recorder) and the little it
// needs of the rest; it decides nothing the plan did not. syncMember
// calls the steps in order; writer chooses how the import itself is
// written (importWriter, derivedWriter).
type writes struct {
	m       *member
	cfg     *Config
	metrics *Metrics
	logger  klog.Logger
	cs      clustersetView
}

// clustersetView is what the writes into one member need to know of the
// other members: which source clusters' slices are kept while their state
// is unknown, and which clusterset IP ranges overlap the member's Service
// ranges.
type clustersetView struct {
	retainedSource       func(cluster string) bool
	serviceRangeOverlaps func(m *member) []serviceRangeOverlap
}

// writesTo returns the writes into member m.
func (c *Controller) writesTo(m *member) writes {
	return writes{m: m, cfg: &c.cfg, metrics: c.metrics, logger: c.logger, cs: c.view}
}

// wrote tells whether this controller wrote o (an import, or a Service it
// created): the only objects it changes or deletes.
func (w writes) wrote(o metav1.Object) bool { return wroteBy(w.cfg.ManagedBy, o) }

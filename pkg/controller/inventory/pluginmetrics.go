package inventory

import (
	"strconv"
	"sync"
	"time"

	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/component-base/metrics"
)

// The credential plugins (KEP-5339) are run by client-go's exec support
// (KEP-541), which reports each run through its process-wide hooks
// (k8s.io/client-go/tools/metrics): ExecPluginPolicyCalls just before the
// command starts, ExecPluginCalls once it has exited, with its exit code
// and how the run went. These metrics are those hooks, counted by the
// controller: every exec plugin of the process is counted, the access
// providers' and any of the controller's own kubeconfig.
var (
	pluginRuns = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "mcs_controller_credential_plugin_runs_total",
		Help: "Runs of exec credential plugins (the access providers' of --inventory-access-providers), by how the run went " +
			"(call_status: no_error, plugin_execution_error, plugin_not_found_error, client_internal_error) and exit code. " +
			"Failures are the runs whose call_status is not no_error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"call_status", "exit_code"})
	pluginDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Name: "mcs_controller_credential_plugin_duration_seconds",
		Help: "How long an exec credential plugin ran, from its start to its exit, failed runs included. " +
			"Runs that overlap another are counted in runs_total only: client-go says when a run starts and ends, not which one.",
		Buckets:        []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		StabilityLevel: metrics.ALPHA,
	})
)

func init() {
	// client-go takes its hooks once per process, before any client
	// exists: a plugin run at start-up (Initial) is counted too.
	clientmetrics.Register(clientmetrics.RegisterOpts{
		ExecPluginPolicyCalls: pluginStarts{},
		ExecPluginCalls:       pluginExits{},
	})
}

// RegisterPluginMetrics serves the credential plugin metrics in reg;
// every registry given serves the same, process-wide counts.
func RegisterPluginMetrics(reg metrics.KubeRegistry) {
	reg.MustRegister(pluginRuns, pluginDuration, providerRuns, providerDuration)
}

// runs pairs the start and the exit of a plugin run. client-go holds a
// lock per plugin configuration (one per member) across a run, but the
// runs of two members may overlap; only a run that had the process to
// itself from start to exit is timed, so that no duration is another
// run's.
var runs struct {
	sync.Mutex
	running int
	// overlapped: another run started while one was running, since
	// running was last 0.
	overlapped bool
	started    time.Time
}

type pluginStarts struct{}

// Increment is called with "allowed" right before a plugin's command
// starts, and with "denied" for one its plugin policy refuses (no run).
func (pluginStarts) Increment(status string) {
	if status != "allowed" {
		return
	}
	runs.Lock()
	defer runs.Unlock()
	runs.running++
	if runs.running == 1 {
		runs.started, runs.overlapped = time.Now(), false
	} else {
		runs.overlapped = true
	}
}

type pluginExits struct{}

// Increment is called once a plugin's command has exited, or failed to
// start.
func (pluginExits) Increment(exitCode int, callStatus string) {
	pluginRuns.WithLabelValues(callStatus, strconv.Itoa(exitCode)).Inc()
	runs.Lock()
	defer runs.Unlock()
	if runs.running == 0 {
		return
	}
	runs.running--
	if runs.running == 0 && !runs.overlapped {
		pluginDuration.Observe(time.Since(runs.started).Seconds())
	}
}

package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/prometheus"
)

// A real Prometheus (Debian's prometheus package) scrapes the controller
// and evaluates the shipped rules (deploy/monitoring): on a healthy
// clusterset nothing fires; when a member stops answering, the member
// alert fires through Prometheus's own API, and once its lease runs out,
// the alert that its endpoints are withdrawn. The rules' `for` durations
// are shortened to seconds so that the test does not wait minutes; their
// expressions and labels are the shipped ones.
func TestPrometheusFiresTheMemberAlerts(t *testing.T) {
	bin := prometheus.Tool(t, "prometheus")
	ms, kubeconfig := membersWithDemo(t, "cluster-a", "cluster-b")
	b := ms[1]
	const ttl = 8 * time.Second
	ctrl := startController(t, kubeconfig, "replica-1", ttl)
	ctrl.waitMetric(t, "both members joined", `mcs_controller_inventory_members{source="context",state="joined"} 2`)

	rules, err := prometheus.Rules(filepath.Join("..", "..", "deploy", "monitoring", "prometheusrule.yaml"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The job is named as the shipped PodMonitor's would be; the
	// controller's plain loopback port stands for its secure one (the
	// shipped scrape configuration itself is TestMonitoring's, in
	// test/e2e).
	api := prometheus.Start(t, bin, t.TempDir(), []any{map[string]any{
		"job_name":       "mcs-system/mcs-controller",
		"static_configs": []any{map[string]any{"targets": []string{ctrl.metrics}}},
	}}, rules)
	// Healthy: every rule is evaluated over the controller's series (the
	// leader, the members, the pool) and no alert fires.
	eventually(t, 60*time.Second, "Prometheus scraping the controller and evaluating the rules", func() (bool, string) {
		v, err := api.Value(`count(mcs:clusterset_ips:utilization) + count(leader_election_master_status{name="mcs-controller"} == 1)`)
		return err == nil && v == "2", fmt.Sprintf("query gave %q%s", v, errString(err))
	})
	time.Sleep(6 * time.Second) // longer than every shortened `for`
	if firing, err := api.Alerts("firing"); err != nil || len(firing) > 0 {
		t.Errorf("alerts firing on a healthy clusterset: %v (%v)", firing, err)
	}

	b.link.cut()
	eventually(t, 60*time.Second, "MCSMemberUnreachable firing for the cut member", func() (bool, string) {
		firing, err := api.Alerts("firing")
		return slices.Contains(firing, "MCSMemberUnreachable"), fmt.Sprintf("firing: %v (%v)", firing, err)
	})
	eventually(t, 60*time.Second, "MCSSourceEndpointsWithdrawn firing for cluster-b once its lease ran out", func() (bool, string) {
		firing, err := api.Alerts("firing")
		return slices.Contains(firing, "MCSSourceEndpointsWithdrawn{cluster=cluster-b}"), fmt.Sprintf("firing: %v (%v)", firing, err)
	})
}

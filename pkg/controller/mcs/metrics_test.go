package mcs

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
)

// The gauges the shipped alerts read (deploy/monitoring): the pool's use
// against its capacity, the imports written without a clusterset IP,
// and how long each member's endpoints are served without its lease
// being renewed.
func TestMetricsTheAlertsRead(t *testing.T) {
	c, ms := newFakeClusterset(t, Config{ClusterSetIPRanges: []netip.Prefix{netip.MustParsePrefix("10.250.0.4/30")}}, []string{"cluster-a", "cluster-b"}, nil, nil)
	reg := metrics.NewKubeRegistry()
	c.metrics = NewMetrics(reg)
	c.metrics.register(c)
	// Others hold the pool's two host addresses.
	for _, key := range []string{"other/db", "other/cache"} {
		if _, err := c.clustersetIPs.Allocate(key, []v1.IPFamily{v1.IPv4Protocol}); err != nil {
			t.Fatal(err)
		}
	}
	exportWeb(t, ms["cluster-a"], "10.1.0.1")
	syncAll(t, c, "demo/web")
	if si := importIn(t, ms["cluster-b"]); si == nil || len(si.Spec.IPs) != 0 {
		t.Fatalf("import %+v, want one without IP", si)
	}
	for name, want := range map[string]float64{
		"mcs_controller_clusterset_ips_capacity":       2,
		"mcs_controller_clusterset_ips_allocated":      2,
		"mcs_controller_imports_without_clusterset_ip": 1,
	} {
		if got := metricValue(t, reg, name, ""); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// cluster-b's lease was never renewed: its endpoints are not served.
	c.leases.mu.Lock()
	delete(c.leases.renewed, "cluster-b")
	c.leases.mu.Unlock()
	const remaining = "mcs_controller_source_lease_remaining_seconds"
	if a := metricValue(t, reg, remaining, "cluster-a"); a <= 0 || a > c.cfg.EndpointTTL.Seconds() {
		t.Errorf("cluster-a's lease: %v s left, want within the TTL %v", a, c.cfg.EndpointTTL)
	}
	if b := metricValue(t, reg, remaining, "cluster-b"); b != 0 {
		t.Errorf("cluster-b's lease: %v s left, want 0", b)
	}
}

package inventory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// The credential plugins' runs, failures and durations are counted:
// reaching a member through a plugin that hands out a token is one run
// without error, timed; one through a plugin that exits 3 is a failure
// with its exit code.
func TestCredentialPluginMetrics(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	RegisterPluginMetrics(reg)
	m := newMemberAPI(t, "cluster-b")
	providers, err := ParseAccessProviders([]byte(`{"providers": [
	  {"name": "token", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
	   "args": ["-c", "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"member-token\"}}'"]}},
	  {"name": "broken", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh", "args": ["-c", "exit 3"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	reach := func(provider string, timeout time.Duration) error {
		cp := &inventoryv1alpha1.ClusterProfile{Status: inventoryv1alpha1.ClusterProfileStatus{AccessProviders: []inventoryv1alpha1.AccessProvider{
			{Name: provider, Cluster: inventoryv1alpha1.Cluster{Server: m.url, CertificateAuthorityData: m.ca}},
		}}}
		cfg, _, err := ConfigFromProfile(cp, providers, false)
		if err != nil {
			t.Fatal(err)
		}
		_, err = topology.ClusterID(t.Context(), cfg, timeout)
		return err
	}

	before := gather(t, reg)
	if err := reach("token", 10*time.Second); err != nil {
		t.Fatalf("reaching the member through the token plugin: %v", err)
	}
	after := gather(t, reg)
	if got := after[`runs{no_error,0}`] - before[`runs{no_error,0}`]; got != 1 {
		t.Errorf("one plugin run without error counted %v times", got)
	}
	if got := after["duration_count"] - before["duration_count"]; got != 1 {
		t.Errorf("one plugin run timed %v times", got)
	}

	if err := reach("broken", 2*time.Second); err == nil {
		t.Fatal("the member was reached through a plugin that fails")
	}
	failed := gather(t, reg)
	if got := failed[`runs{plugin_execution_error,3}`] - after[`runs{plugin_execution_error,3}`]; got < 1 {
		t.Errorf("a plugin that exits 3 is counted as %v failures with exit code 3; all: %v", got, failed)
	}
	if failed[`runs{no_error,0}`] != after[`runs{no_error,0}`] {
		t.Errorf("a failing plugin counted as a run without error")
	}
}

// gather reads the plugin metrics of reg: runs{status,code} and
// duration_count.
func gather(t *testing.T, reg metrics.KubeRegistry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "mcs_controller_credential_plugin_runs_total":
				var l []string
				for _, lp := range m.GetLabel() {
					l = append(l, lp.GetValue())
				}
				out[fmt.Sprintf("runs{%s}", strings.Join(l, ","))] = m.GetCounter().GetValue()
			case "mcs_controller_credential_plugin_duration_seconds":
				out["duration_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

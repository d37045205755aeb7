package inventory

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/topology"
)

// Each access provider's plugin runs are counted and timed under its own
// name (KEP-5339), through the controller's executable (here the test
// binary): a plugin that hands out a token reaches the member as before,
// with KUBERNETES_EXEC_INFO and its arguments and environment intact and
// the runner's variables gone; one that exits 3, and one whose command
// does not exist, are counted as such under their providers, and the
// member's error still says why.
func TestPluginRunsPerProvider(t *testing.T) {
	m := newMemberAPI(t, "cluster-b")
	// The token plugin refuses to answer unless client-go's
	// KUBERNETES_EXEC_INFO, its argument and the operator's variable
	// reach it, and none of the runner's variables does.
	token := `[ "$1" = --audience=member ] && [ "$OPERATOR" = set ] && [ -n "$KUBERNETES_EXEC_INFO" ] && ! env | grep -q ^MCS_CONTROLLER_CREDENTIAL_PLUGIN && ` +
		`echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"member-token"}}'`
	providers, err := ParseAccessProviders([]byte(`{"providers": [
	  {"name": "token", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
	   "args": ["-c", ` + quote(token) + `, "plugin", "--audience=member"], "env": [{"name": "OPERATOR", "value": "set"}]}},
	  {"name": "broken", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh", "args": ["-c", "exit 3"]}},
	  {"name": "missing", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/nonexistent/credential-plugin"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runs, err := ListenPluginRuns(ctx, os.Args[0], providers)
	if err != nil {
		t.Fatal(err)
	}
	through := runs.Through(providers)
	reach := func(provider string) error {
		cp := &inventoryv1alpha1.ClusterProfile{Status: inventoryv1alpha1.ClusterProfileStatus{AccessProviders: []inventoryv1alpha1.AccessProvider{
			{Name: provider, Cluster: inventoryv1alpha1.Cluster{Server: m.url, CertificateAuthorityData: m.ca}},
		}}}
		cfg, _, err := ConfigFromProfile(cp, through, false)
		if err != nil {
			t.Fatal(err)
		}
		_, err = topology.ClusterID(t.Context(), cfg, 5*time.Second)
		return err
	}
	count := func(provider, result string) float64 {
		v, err := testutil.GetCounterMetricValue(providerRuns.WithLabelValues(provider, result))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	timed := func(provider string) uint64 {
		n, err := testutil.GetHistogramMetricCount(providerDuration.WithLabelValues(provider))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A report arrives over the socket after the plugin's exit: wait for
	// it rather than for a fixed time. A failing plugin is run again as
	// the client retries: at least one run.
	waitCount := func(provider, result string, want float64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for count(provider, result) < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := count(provider, result); got < want {
			t.Errorf("runs of %s counted as %s: %v, want at least %v", provider, result, got, want)
		}
	}

	before := map[string]float64{"token": count("token", runSucceeded), "broken": count("broken", runFailed), "missing": count("missing", runNotFound)}
	timedBefore := timed("token")
	if err := reach("token"); err != nil {
		t.Fatalf("reaching the member through the token plugin, run through the runner: %v", err)
	}
	waitCount("token", runSucceeded, before["token"]+1)
	if got := count("token", runSucceeded) - before["token"]; got != 1 {
		t.Errorf("one run of the token plugin counted %v times", got)
	}
	if got := timed("token") - timedBefore; got != 1 {
		t.Errorf("the token plugin's run timed %d times, want 1", got)
	}

	err = reach("broken")
	if err == nil || !strings.Contains(err.Error(), "exit code 3") {
		t.Errorf("reaching the member through a plugin that exits 3: %v, want its exit code", err)
	}
	waitCount("broken", runFailed, before["broken"]+1)

	err = reach("missing")
	if err == nil || !strings.Contains(err.Error(), "exit code 127") {
		t.Errorf("reaching the member through a plugin that does not exist: %v, want exit code 127", err)
	}
	waitCount("missing", runNotFound, before["missing"]+1)
	if count("token", runFailed) != 0 || count("broken", runSucceeded) != 0 {
		t.Error("a run was counted under another provider or result")
	}

}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

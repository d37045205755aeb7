package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// A real Prometheus (Debian's prometheus package) scrapes the controller
// and evaluates the shipped rules (deploy/monitoring): on a healthy
// clusterset nothing fires; when a member stops answering, the member
// alert fires through Prometheus's own API, and once its lease runs out,
// the alert that its endpoints are withdrawn. The rules' `for` durations
// are shortened to seconds so that the test does not wait minutes; their
// expressions and labels are the shipped ones.
func TestPrometheusFiresTheMemberAlerts(t *testing.T) {
	prometheus, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not installed (hack/install-deps.sh test installs Debian's prometheus package)")
		}
		t.Skip("prometheus is not installed (Debian's prometheus package; hack/install-deps.sh test)")
	}
	ms, kubeconfig := membersWithDemo(t, "cluster-a", "cluster-b")
	b := ms[1]
	const ttl = 8 * time.Second
	ctrl := startController(t, kubeconfig, "replica-1", ttl)
	ctrl.waitMetric(t, "both members joined", `mcs_controller_inventory_members{source="context",state="joined"} 2`)

	api := startPrometheus(t, prometheus, t.TempDir(), ctrl.metrics)
	// Healthy: every rule is evaluated over the controller's series (the
	// leader, the members, the pool) and no alert fires.
	eventually(t, 60*time.Second, "Prometheus scraping the controller and evaluating the rules", func() (bool, string) {
		v, err := promQuery(api, `count(mcs:clusterset_ips:utilization) + count(leader_election_master_status{name="mcs-controller"} == 1)`)
		return err == nil && v == "2", fmt.Sprintf("query gave %q%s", v, errString(err))
	})
	time.Sleep(6 * time.Second) // longer than every shortened `for`
	if firing := promAlerts(t, api, "firing"); len(firing) > 0 {
		t.Errorf("alerts firing on a healthy clusterset: %v", firing)
	}

	b.link.cut()
	eventually(t, 60*time.Second, "MCSMemberUnreachable firing for the cut member", func() (bool, string) {
		firing := promAlerts(t, api, "firing")
		return slices.Contains(firing, "MCSMemberUnreachable"), fmt.Sprintf("firing: %v", firing)
	})
	eventually(t, 60*time.Second, "MCSSourceEndpointsWithdrawn firing for cluster-b once its lease ran out", func() (bool, string) {
		firing := promAlerts(t, api, "firing")
		return slices.Contains(firing, "MCSSourceEndpointsWithdrawn{cluster=cluster-b}"), fmt.Sprintf("firing: %v", firing)
	})
}

// startPrometheus runs Prometheus on loopback with the shipped rules
// (their `for` shortened to 5s), scraping the controller's metrics at
// target every second; it returns the address of its API.
func startPrometheus(t *testing.T, bin, dir, target string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec map[string]any `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	rules, err := sigsyaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	rules = regexp.MustCompile(`(?m)^(\s+for: ).*$`).ReplaceAll(rules, []byte("${1}5s"))
	if err := os.WriteFile(filepath.Join(dir, "mcs.rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	// The job is named as the shipped PodMonitor's would be.
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [mcs.rules.yaml]
scrape_configs:
- job_name: mcs-system/mcs-controller
  static_configs:
  - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "prometheus"), "--web.listen-address="+addr)
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("prometheus log:\n%s", out)
		}
	})
	eventually(t, 30*time.Second, "Prometheus ready", func() (bool, string) {
		_, err := httpGet("http://" + addr + "/-/ready")
		return err == nil, errString(err)
	})
	return addr
}

// promQuery returns the value of the single sample an instant query
// gives, "" when it gives none.
func promQuery(api, query string) (string, error) {
	out, err := httpGet("http://" + api + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return "", err
	}
	var r struct {
		Data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return "", err
	}
	if len(r.Data.Result) != 1 || len(r.Data.Result[0].Value) != 2 {
		return "", nil
	}
	return fmt.Sprint(r.Data.Result[0].Value[1]), nil
}

// promAlerts returns the alerts in state (pending, firing) as Prometheus
// reports them: NAME, or NAME{cluster=ID} for those about one cluster.
func promAlerts(t *testing.T, api, state string) []string {
	t.Helper()
	out, err := httpGet("http://" + api + "/api/v1/alerts")
	if err != nil {
		return []string{"(" + err.Error() + ")"}
	}
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range r.Data.Alerts {
		if a.State != state {
			continue
		}
		name := a.Labels["alertname"]
		if c := a.Labels["cluster"]; c != "" {
			name += "{cluster=" + c + "}"
		}
		got = append(got, name)
	}
	slices.Sort(got)
	return got
}

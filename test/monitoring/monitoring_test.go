// Package monitoring tests deploy/monitoring as an operator meets it:
// the package builds with kustomize, promtool accepts the rules and their
// unit tests pass (every alert fires on the series it is about and not on
// a healthy clusterset's), and every query of the dashboard is PromQL
// promtool accepts, over series the rules or the components publish.
package monitoring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/prometheus"
)

func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "..", "..")
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Record string            `json:"record,omitempty"`
			Alert  string            `json:"alert,omitempty"`
			Expr   string            `json:"expr"`
			For    string            `json:"for,omitempty"`
			Labels map[string]string `json:"labels,omitempty"`
			Annot  map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

// rulesOf returns the groups of the PrometheusRule, as a rules file.
func rulesOf(t *testing.T) ([]byte, ruleGroups) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), "deploy", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       ruleGroups     `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("prometheusrule.yaml holds a %s %s", pr.APIVersion, pr.Kind)
	}
	out, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return out, pr.Spec
}

// Every alert is unit-tested, has a severity and a runbook in
// docs/monitoring.md, and promtool's tests pass.
func TestRules(t *testing.T) {
	tool := prometheus.Tool(t, "promtool")
	rules, groups := rulesOf(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mcs.rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(root(t), "deploy", "monitoring", "rules.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, tool, "check", "rules", "mcs.rules.yaml")
	run(t, dir, tool, "test", "rules", "rules.test.yaml")

	runbooks, err := os.ReadFile(filepath.Join(root(t), "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity", r.Alert)
			}
			anchor := "#" + strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annot["runbook_url"], "docs/monitoring.md"+anchor) {
				t.Errorf("alert %s: runbook_url %q is not docs/monitoring.md%s", r.Alert, r.Annot["runbook_url"], anchor)
			}
			if !strings.Contains(string(runbooks), "### "+r.Alert+"\n") {
				t.Errorf("docs/monitoring.md has no runbook for %s (a heading ### %s)", r.Alert, r.Alert)
			}
			// Fired somewhere in the unit tests, not only checked silent.
			if !regexp.MustCompile(`alertname: ` + r.Alert + `\n\s+exp_alerts:\n\s+- exp_labels`).Match(tests) {
				t.Errorf("alert %s never fires in rules.test.yaml", r.Alert)
			}
			// And checked silent on the healthy clusterset.
			if !strings.Contains(string(tests), "{eval_time: 25m, alertname: "+r.Alert+"}") {
				t.Errorf("alert %s is not checked silent in the healthy test", r.Alert)
			}
		}
	}
	if alerts < 10 {
		t.Errorf("%d alerts", alerts)
	}
}

// Every query of the dashboard is PromQL promtool accepts (each checked
// as a recording rule), and reads only series the rules record or this
// project's components and Kubernetes' leader election publish.
func TestDashboard(t *testing.T) {
	tool := prometheus.Tool(t, "promtool")
	d, err := prometheus.ReadDashboard(filepath.Join(root(t), "deploy", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, groups := rulesOf(t)
	var recorded []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded = append(recorded, r.Record)
			}
		}
	}
	var rules strings.Builder
	rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
	series := regexp.MustCompile(`\b(mcs_controller_[a-z_]+|kubeproxy_multicluster_[a-z_]+|leader_election_[a-z_]+|mcs:[a-z_:]+)`)
	n := 0
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			n++
			fmt.Fprintf(&rules, "  - record: dashboard:query_%d\n    expr: %q\n", n, target.Expr)
			names := series.FindAllString(target.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: %s reads none of the clusterset's series", p.Title, target.Expr)
			}
			for _, name := range names {
				if strings.HasPrefix(name, "mcs:") && !slices.Contains(recorded, name) {
					t.Errorf("panel %q reads %s, which no rule records", p.Title, name)
				}
			}
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.rules.yaml"), []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, tool, "check", "rules", "dashboard.rules.yaml")
}

// The package builds with kustomize (kubectl apply -k): the scrape
// configuration, the rules, and the dashboard in a ConfigMap Grafana's
// sidecar loads.
func TestPackage(t *testing.T) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root(t), "deploy", "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range resMap.Resources() {
		got = append(got, r.GetKind()+"/"+r.GetNamespace()+"/"+r.GetName())
		if r.GetKind() == "ConfigMap" && r.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("the dashboard's ConfigMap lacks the label grafana_dashboard=1 Grafana's sidecar looks for")
		}
	}
	for _, want := range []string{"PodMonitor/mcs-system/mcs-controller", "PodMonitor/kube-system/kube-proxy", "PrometheusRule/mcs-system/multicluster-services",
		"ConfigMap/mcs-system/mcs-clusterset-dashboard", "ClusterRole//multicluster:metrics-reader", "Secret/mcs-system/mcs-metrics-scraper-token"} {
		if !slices.Contains(got, want) {
			t.Errorf("deploy/monitoring has no %s: %v", want, got)
		}
	}
}

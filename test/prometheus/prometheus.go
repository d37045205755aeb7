// Package prometheus runs a real Prometheus (Debian's prometheus package)
// for tests, configured as prometheus-operator would configure it from the
// shipped deploy/monitoring package: its PodMonitors become scrape jobs
// over the pods the test names (the operator's job label, the endpoint's
// scheme, path, bearer token, TLS settings and relabelings, applied by
// Prometheus itself), and its PrometheusRule's groups become the rule file.
package prometheus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// Tool returns the path of name (prometheus or promtool), both from
// Debian's prometheus package, failing the test under CI=true when it is
// missing (hack/install-deps.sh test installs it) and skipping it
// elsewhere.
func Tool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (hack/install-deps.sh test installs Debian's prometheus package)", name)
		}
		t.Skipf("%s is not installed (Debian's prometheus package; hack/install-deps.sh test)", name)
	}
	return path
}

// Dashboard is what the tests read of a Grafana dashboard.
type Dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// ReadDashboard reads the dashboard in path.
func ReadDashboard(path string) (*Dashboard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{}
	if err := json.Unmarshal(data, d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Queries returns every query of every panel of d.
func (d *Dashboard) Queries() []string {
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// Pod is a pod a PodMonitor selects, as the test runs it: its IP, its
// node, its named container ports.
type Pod struct {
	Namespace, Name, IP, Node string
	Ports                     map[string]int
}

// podMonitor is the part of monitoring.coreos.com/v1 PodMonitor the
// shipped ones use.
type podMonitor struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		PodMetricsEndpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Scheme        string `json:"scheme"`
			Authorization *struct {
				Type        string `json:"type"`
				Credentials struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"credentials"`
			} `json:"authorization"`
			TLSConfig *struct {
				InsecureSkipVerify bool `json:"insecureSkipVerify"`
			} `json:"tlsConfig"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
				Replacement  *string  `json:"replacement"`
				Regex        string   `json:"regex"`
				Action       string   `json:"action"`
				Separator    *string  `json:"separator"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// Discovery is what prometheus-operator and Kubernetes service
// discovery would find: the pods each PodMonitor's selector matches (by
// the PodMonitor's namespace/name), and the Secrets' keys its endpoints
// name (namespace/name/key).
type Discovery struct {
	Pods    map[string][]Pod
	Secrets map[string]string
}

// ScrapeConfigs translates the PodMonitors of manifests (YAML documents;
// other kinds are skipped) into Prometheus scrape configs as
// prometheus-operator does: one job per endpoint, the job label
// NAMESPACE/NAME, the endpoint's scheme, path, bearer credentials and TLS
// settings, and its relabelings after the pod's meta labels, every
// interval shortened to interval. A PodMonitor no pod of d answers is an
// error: the test would silently scrape nothing.
func ScrapeConfigs(manifests []byte, d Discovery, interval time.Duration) ([]any, error) {
	var out []any
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(manifests), -1) {
		var pm podMonitor
		if err := sigsyaml.Unmarshal([]byte(doc), &pm); err != nil {
			return nil, err
		}
		if pm.Kind != "PodMonitor" {
			continue
		}
		key := pm.Metadata.Namespace + "/" + pm.Metadata.Name
		pods := d.Pods[key]
		if len(pods) == 0 {
			return nil, fmt.Errorf("PodMonitor %s: the test names no pod for it", key)
		}
		for i, ep := range pm.Spec.PodMetricsEndpoints {
			var targets []any
			for _, p := range pods {
				addr := p.IP
				if ep.Port != "" {
					port, ok := p.Ports[ep.Port]
					if !ok {
						return nil, fmt.Errorf("PodMonitor %s: pod %s/%s has no port %q", key, p.Namespace, p.Name, ep.Port)
					}
					addr = fmt.Sprintf("%s:%d", p.IP, port)
				}
				targets = append(targets, map[string]any{"targets": []string{addr}, "labels": map[string]string{
					"__meta_kubernetes_pod_ip":        p.IP,
					"__meta_kubernetes_pod_node_name": p.Node,
					"__meta_kubernetes_pod_name":      p.Name,
					"__meta_kubernetes_namespace":     p.Namespace,
				}})
			}
			// The operator's own relabelings first: namespace, pod and
			// the job label, then the endpoint's.
			relabel := []any{
				map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
				map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
				map[string]any{"target_label": "job", "replacement": key},
			}
			for _, r := range ep.Relabelings {
				c := map[string]any{}
				if len(r.SourceLabels) > 0 {
					c["source_labels"] = r.SourceLabels
				}
				if r.TargetLabel != "" {
					c["target_label"] = r.TargetLabel
				}
				if r.Replacement != nil {
					c["replacement"] = *r.Replacement
				}
				if r.Regex != "" {
					c["regex"] = r.Regex
				}
				if r.Action != "" {
					c["action"] = strings.ToLower(r.Action)
				}
				if r.Separator != nil {
					c["separator"] = *r.Separator
				}
				relabel = append(relabel, c)
			}
			job := map[string]any{
				"job_name":        fmt.Sprintf("podMonitor/%s/%d", key, i),
				"scrape_interval": interval.String(),
				"metrics_path":    ep.Path,
				"scheme":          ep.Scheme,
				"static_configs":  targets,
				"relabel_configs": relabel,
			}
			if a := ep.Authorization; a != nil {
				secret := pm.Metadata.Namespace + "/" + a.Credentials.Name + "/" + a.Credentials.Key
				token, ok := d.Secrets[secret]
				if !ok {
					return nil, fmt.Errorf("PodMonitor %s: no Secret key %s", key, secret)
				}
				job["authorization"] = map[string]any{"type": a.Type, "credentials": token}
			}
			if ep.TLSConfig != nil {
				job["tls_config"] = map[string]any{"insecure_skip_verify": ep.TLSConfig.InsecureSkipVerify}
			}
			out = append(out, job)
		}
	}
	return out, nil
}

// Rules returns the groups of the PrometheusRule in path as a rule file,
// every alert's `for` shortened to forDuration, so that a test does not
// wait minutes; the expressions and labels are the shipped ones.
func Rules(path string, forDuration time.Duration) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr struct {
		Spec map[string]any `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(data, &pr); err != nil {
		return nil, err
	}
	rules, err := sigsyaml.Marshal(pr.Spec)
	if err != nil {
		return nil, err
	}
	return regexp.MustCompile(`(?m)^(\s+for: ).*$`).ReplaceAll(rules, []byte("${1}"+forDuration.String())), nil
}

// Server is a Prometheus process on loopback.
type Server struct {
	// Addr is its API's host:port.
	Addr string
}

// Start runs Prometheus in dir on a free loopback port, evaluating rules
// every second over the scrape configs given, and stops it when the test
// ends (printing its log if the test failed).
func Start(t testing.TB, bin, dir string, scrapeConfigs []any, rules []byte) *Server {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err = os.WriteFile(filepath.Join(dir, "mcs.rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	config, err := sigsyaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files":     []string{"mcs.rules.yaml"},
		"scrape_configs": scrapeConfigs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
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
		log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("prometheus log:\n%s", out)
		}
	})
	s := &Server{Addr: addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := s.get("/-/ready"); err == nil {
			return s
		} else if time.Now().After(deadline) {
			t.Fatalf("Prometheus not ready within 30s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// getJSON decodes the answer to path into v.
func (s *Server) getJSON(path string, v any) error {
	body, err := s.get(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

func (s *Server) get(path string) ([]byte, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + s.Addr + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Labels map[string]string
	Value  string
}

// Query runs an instant query and returns its series.
func (s *Server) Query(query string) ([]Sample, error) {
	var r struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := s.getJSON("/api/v1/query?query="+url.QueryEscape(query), &r); err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(r.Data.Result))
	for _, x := range r.Data.Result {
		v := ""
		if len(x.Value) == 2 {
			v = fmt.Sprint(x.Value[1])
		}
		out = append(out, Sample{Labels: x.Metric, Value: v})
	}
	return out, nil
}

// Value returns the value of the single series query gives, "" when it
// gives none or several.
func (s *Server) Value(query string) (string, error) {
	samples, err := s.Query(query)
	if err != nil || len(samples) != 1 {
		return "", err
	}
	return samples[0].Value, nil
}

// Alerts returns the alerts in state (pending, firing) as Prometheus
// reports them, sorted: NAME, or NAME{cluster=ID} for those about one
// cluster, NAME{node=NODE} for those about one node.
func (s *Server) Alerts(state string) ([]string, error) {
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := s.getJSON("/api/v1/alerts", &r); err != nil {
		return nil, err
	}
	var got []string
	for _, a := range r.Data.Alerts {
		if a.State != state {
			continue
		}
		name := a.Labels["alertname"]
		if c := a.Labels["cluster"]; c != "" {
			name += "{cluster=" + c + "}"
		} else if n := a.Labels["node"]; n != "" {
			name += "{node=" + n + "}"
		}
		got = append(got, name)
	}
	slices.Sort(got)
	return got, nil
}

// Targets returns the health of every active target, by scrape URL,
// with its last error.
func (s *Server) Targets() (map[string]string, error) {
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool string `json:"scrapePool"`
				Health     string `json:"health"`
				LastError  string `json:"lastError"`
				ScrapeURL  string `json:"scrapeUrl"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := s.getJSON("/api/v1/targets?state=active", &r); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, tg := range r.Data.ActiveTargets {
		out[tg.ScrapeURL] = tg.Health + " " + tg.LastError
	}
	return out, nil
}

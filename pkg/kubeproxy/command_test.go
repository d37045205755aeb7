package kubeproxy

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/cmd/kube-proxy/app"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/features"
)

// TestUpstreamSeam fails when upstream kube-proxy's Options no longer have
// the fields this build reads; the linked functions fail at link time.
func TestUpstreamSeam(t *testing.T) {
	view, err := viewOptions(app.NewOptions())
	if err != nil {
		t.Fatal(err)
	}
	if view.config == nil || view.errCh == nil {
		t.Fatalf("options view is missing the config or the error channel: %+v", view)
	}
}

// TestFlagsAreUpstreamsPlusMultiCluster checks that every upstream flag is
// kept, with the same default, and lists the only flags added.
func TestFlagsAreUpstreamsPlusMultiCluster(t *testing.T) {
	upstream := app.NewProxyCommand().Flags()
	ours := NewProxyCommand().Flags()
	upstream.VisitAll(func(f *pflag.Flag) {
		o := ours.Lookup(f.Name)
		if o == nil {
			t.Errorf("upstream flag --%s is missing", f.Name)
			return
		}
		if o.DefValue != f.DefValue && f.Name != "feature-gates" {
			t.Errorf("--%s defaults to %q, upstream to %q", f.Name, o.DefValue, f.DefValue)
		}
	})
	var added []string
	ours.VisitAll(func(f *pflag.Flag) {
		if upstream.Lookup(f.Name) == nil {
			added = append(added, f.Name)
		}
	})
	sort.Strings(added)
	want := []string{"clusterset-ip-cidrs", "multicluster-config", "multicluster-endpointslice-managers", "multicluster-sync-timeout"}
	if diff := cmp.Diff(want, added); diff != "" {
		t.Errorf("added flags (-want +got):\n%s", diff)
	}
}

func TestGateFromConfigFile(t *testing.T) {
	if features.Enabled() {
		t.Fatalf("MultiClusterServices must default to off")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nfeatureGates:\n  MultiClusterServices: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := NewProxyCommand()
	if err := cmd.Flags().Parse([]string{"--config", cfg}); err != nil {
		t.Fatal(err)
	}
	opts := app.NewOptions()
	opts.ConfigFile = cfg
	defer func() {
		_ = utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(features.MultiClusterServices): false})
	}()
	if err := opts.Complete(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	if !features.Enabled() {
		t.Errorf("featureGates.MultiClusterServices in the config file did not enable the gate")
	}
}

func TestMultiClusterConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "apiVersion: kubeproxy.multicluster.x-k8s.io/v1alpha1\nkind: MultiClusterConfiguration\nclusterSetIPCIDRs: [10.123.0.0/16]\ntrustedEndpointSliceManagers: [a, b]\n")

	o := NewMultiClusterOptions()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--multicluster-config", good, "--multicluster-endpointslice-managers", "c"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	tr, err := o.TranslationOptions()
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.ClusterSetIPCIDRs[0].String(); got != "10.123.0.0/16" || len(tr.ClusterSetIPCIDRs) != 1 {
		t.Errorf("CIDRs from the file not applied: %v", tr.ClusterSetIPCIDRs)
	}
	if diff := cmp.Diff([]string{"c"}, tr.TrustedManagers); diff != "" {
		t.Errorf("an explicit flag must win over the file: %s", diff)
	}

	for name, body := range map[string]string{
		"unknown-field.yaml": "apiVersion: kubeproxy.multicluster.x-k8s.io/v1alpha1\nkind: MultiClusterConfiguration\nclustersetCIDRs: [10.0.0.0/8]\n",
		"wrong-kind.yaml":    "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n",
	} {
		o := NewMultiClusterOptions()
		o.ConfigFile = write(name, body)
		if err := o.Complete(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	everything := NewMultiClusterOptions()
	everything.ClusterSetIPCIDRs = []string{"0.0.0.0/0"}
	if _, err := everything.TranslationOptions(); err == nil {
		t.Errorf("a clusterset range that admits every IPv4 address was accepted")
	}
}

func TestClusterSetRangesMustNotHoldPods(t *testing.T) {
	o := NewMultiClusterOptions()
	tr, err := o.TranslationOptions()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPodRanges(tr, []string{"10.244.0.0/16", "fd00:10:244::/56"}); err != nil {
		t.Errorf("default ranges beside the usual pod ranges refused: %v", err)
	}
	if err := checkPodRanges(tr, nil); err != nil {
		t.Errorf("no --cluster-cidr refused: %v", err)
	}
	if err := checkPodRanges(tr, []string{"10.244.0.0/16", " 10.0.0.0/8"}); err == nil || !strings.Contains(err.Error(), "--cluster-cidr 10.0.0.0/8") {
		t.Errorf("a pod range holding the clusterset range: %v", err)
	}
}

type watcherWithContext struct{ ran bool }

func (w *watcherWithContext) Run(context.Context) { w.ran = true }

type watcherWithout struct{ ran bool }

func (w *watcherWithout) Run() { w.ran = true }

// TestRunWatcher: upstream's config file watcher is started whichever
// shape its release gives Run (with a context from 1.36 on), and one of
// neither shape stops kube-proxy with why, rather than leaving a changed
// config file unnoticed.
func TestRunWatcher(t *testing.T) {
	withCtx, without := &watcherWithContext{}, &watcherWithout{}
	for _, w := range []any{withCtx, without} {
		if err := runWatcher(t.Context(), w); err != nil {
			t.Errorf("%T: %v", w, err)
		}
	}
	if !withCtx.ran || !without.ran {
		t.Errorf("watchers started: Run(ctx) %v, Run() %v; want both", withCtx.ran, without.ran)
	}
	if err := runWatcher(t.Context(), struct{}{}); err == nil || !strings.Contains(err.Error(), "does not match its kube-proxy version") {
		t.Errorf("a watcher without Run: %v, want an error naming the version mismatch", err)
	}
}

package app

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/features"
)

// The controller has its own --feature-gates: cluster selection is alpha,
// off unless asked for, and each Options has its own gate.
func TestControllerFeatureGates(t *testing.T) {
	parse := func(args ...string) (*Options, error) {
		o := NewOptions()
		fs := pflag.NewFlagSet("mcs-controller", pflag.ContinueOnError)
		o.AddFlags(fs)
		return o, fs.Parse(args)
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if o.FeatureGates.Enabled(features.MultiClusterServiceClusterSelection) {
		t.Errorf("MultiClusterServiceClusterSelection is on by default")
	}
	on, err := parse("--feature-gates=MultiClusterServiceClusterSelection=true")
	if err != nil {
		t.Fatal(err)
	}
	if !on.FeatureGates.Enabled(features.MultiClusterServiceClusterSelection) {
		t.Errorf("--feature-gates=MultiClusterServiceClusterSelection=true did not enable it")
	}
	if o.FeatureGates.Enabled(features.MultiClusterServiceClusterSelection) {
		t.Errorf("one Options' gate changed another's")
	}
	if _, err := parse("--feature-gates=NoSuchGate=true"); err == nil {
		t.Errorf("an unknown gate was accepted")
	}
}

// The command has one --feature-gates, which takes the controller's gates
// and the logging ones alike, every time (two flags of that name, one per
// section, made one or the other win at random).
func TestCommandHasOneFeatureGatesFlag(t *testing.T) {
	for range 20 {
		cmd := NewControllerCommand()
		if err := cmd.ParseFlags([]string{"--feature-gates=MultiClusterServiceClusterSelection=true,ContextualLogging=true"}); err != nil {
			t.Fatalf("the command's --feature-gates refused a controller gate or a logging gate: %v", err)
		}
	}
}

// The planner's command starts as the controller's does: its one
// --feature-gates takes the controller's gates and logging's, and logging
// is applied with them (a gate missing there panics at start).
func TestPlannerCommandFlags(t *testing.T) {
	cmd := NewPlannerCommand()
	if err := cmd.ParseFlags([]string{"--feature-gates=MultiClusterServiceClusterSelection=true,ContextualLogging=true", "--clusterset-ip-cidrs=10.250.0.0/24", "--endpoint-ttl=30s"}); err != nil {
		t.Fatalf("the planner's flags: %v", err)
	}
	for _, name := range []string{"contexts", "derived-members", "member-secrets-namespace"} {
		if cmd.Flags().Lookup(name) != nil {
			t.Errorf("the planner takes --%s, which plans nothing in pull mode", name)
		}
	}
	for _, name := range plannerFlags {
		if cmd.Flags().Lookup(name) == nil {
			t.Errorf("the planner lacks --%s", name)
		}
	}
	// Started (logging applied with its gates), it gets as far as the
	// hub, which it cannot reach.
	run := NewPlannerCommand()
	run.SetArgs([]string{"--kubeconfig=" + filepath.Join(t.TempDir(), "none"), "--leader-elect=false"})
	run.SilenceUsage, run.SilenceErrors = true, true
	if err := run.Execute(); err == nil || !strings.Contains(err.Error(), "the hub") {
		t.Errorf("the planner without a hub: %v, want an error naming the hub", err)
	}
}

package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"
)

// NewControllerCommand is the mcs-controller command, with the flag
// sections, logging options (--v, --vmodule, --logging-format) and
// contextual logging of Kubernetes components; run it with
// k8s.io/component-base/cli.Run.
func NewControllerCommand() *cobra.Command {
	o := NewOptions()
	logging := logsapi.NewLoggingConfiguration()
	// One --feature-gates: the controller's own gates and the logging
	// ones in one gate. Two flags of one name in two sections would make
	// whichever section the map yields first win, refusing the other's
	// gates at random.
	utilruntime.Must(logsapi.AddFeatureGates(o.FeatureGates))
	cmd := &cobra.Command{
		Use: "mcs-controller",
		Long: `The reference Multi-Cluster Services controller (KEP-1645): it merges the
ServiceExports of every member cluster and writes ServiceImports and
per-source-cluster EndpointSlices into every member. Members are kubeconfig
contexts (--contexts) and, with --member-secrets-namespace, kubeconfig
Secrets in the hub that join and leave while it runs.
"mcs-controller member-agent" is pull mode's agent in a member cluster, and
"mcs-controller planner" its planner in the hub (--help of each).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if self, err := os.Executable(); err == nil {
				o.PluginRunner = self
			}
			return runComponent(cmd, logging, o.FeatureGates, "mcs-controller", func(ctx context.Context) error { return Run(ctx, o) })
		},
	}
	var sections cliflag.NamedFlagSets
	o.AddFlags(sections.FlagSet("mcs-controller"))
	addFlagSections(cmd, sections, logging)
	cmd.AddCommand(NewMemberAgentCommand(), NewPlannerCommand())
	return cmd
}

// runComponent runs run as Kubernetes components run: logging applied
// (its gates from gates), the flags printed, a context that ends at
// SIGINT or SIGTERM and carries a logger named name.
func runComponent(cmd *cobra.Command, logging *logsapi.LoggingConfiguration, gates featuregate.FeatureGate, name string, run func(context.Context) error) error {
	if err := logsapi.ValidateAndApply(logging, gates); err != nil {
		return err
	}
	cliflag.PrintFlags(cmd.Flags())
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(klog.NewContext(ctx, klog.Background().WithName(name)))
}

// addFlagSections adds a command's own flag sections and the logging
// section to cmd, and the usage and help that print them by section.
func addFlagSections(cmd *cobra.Command, sections cliflag.NamedFlagSets, logging *logsapi.LoggingConfiguration) {
	logsapi.AddFlags(logging, sections.FlagSet("logging"))
	for _, name := range sections.Order {
		cmd.Flags().AddFlagSet(sections.FlagSets[name])
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, sections, cols)
}

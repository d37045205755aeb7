package app

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	cliflag "k8s.io/component-base/cli/flag"
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
Secrets in the hub that join and leave while it runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logsapi.ValidateAndApply(logging, o.FeatureGates); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())
			if self, err := os.Executable(); err == nil {
				o.PluginRunner = self
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx = klog.NewContext(ctx, klog.Background().WithName("mcs-controller"))
			return Run(ctx, o)
		},
	}
	var sections cliflag.NamedFlagSets
	o.AddFlags(sections.FlagSet("mcs-controller"))
	logsapi.AddFlags(logging, sections.FlagSet("logging"))
	for _, name := range sections.Order {
		cmd.Flags().AddFlagSet(sections.FlagSets[name])
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, sections, cols)
	cmd.AddCommand(NewMemberAgentCommand())
	return cmd
}

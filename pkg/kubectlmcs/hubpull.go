package kubectlmcs

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

// hubCommand groups what the hub's operator runs for pull mode.
func (o *options) hubCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Lay out pull mode's hub (deploy/hub-pull): a member's namespace and its agent's identity",
	}
	limits := pull.DefaultMemberLimits
	member := &cobra.Command{
		Use:   "member CLUSTER_ID",
		Short: "Print a member's part of the hub, to apply there: its namespace (its cluster ID), its agent's ServiceAccount, and the bindings that confine it",
		Long: `Print, as YAML to apply to the hub (kubectl mcs hub member cluster-a | kubectl apply -f -),
a member's part of pull mode's hub: the namespace named after its cluster ID,
the ServiceAccount mcs-member-agent there (the identity its member agent
holds), a RoleBinding of multicluster:member-agent in that namespace only,
one of multicluster:member-agent-plan-reader in mcs-plan, and a
ResourceQuota that bounds what the member may publish there. Apply
deploy/hub-pull first. Nothing is sent anywhere.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			objs, err := pull.MemberObjects(args[0], limits)
			if err != nil {
				return err
			}
			return printObjects(o.streams.Out, objs)
		},
	}
	member.Flags().Int64Var(&limits.Exports, "max-exports", limits.Exports, "how many Services the member may export (MemberExports in its namespace)")
	member.Flags().Int64Var(&limits.EndpointSlices, "max-endpointslices", limits.EndpointSlices, "how many EndpointSlices the member may publish")
	cmd.AddCommand(member)
	return cmd
}

// printObjects writes objs as one YAML stream.
func printObjects(w io.Writer, objs []runtime.Object) error {
	for i, obj := range objs {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

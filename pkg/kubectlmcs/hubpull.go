package kubectlmcs

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

// plannerEndpointTTL is the planner's default --endpoint-ttl (the
// controller's), which kubectl mcs's --endpoint-ttl repeats.
const plannerEndpointTTL = 40 * time.Second

// hubCommand groups what the hub's operator runs for pull mode.
func (o *options) hubCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Pull mode's hub (deploy/hub-pull): lay out a member's part, list the members as the hub sees them",
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
	var ttl time.Duration
	members := &cobra.Command{
		Use:   "members",
		Short: "List pull mode's members as the hub sees them: whether each agent publishes, its Lease, its exports and imports",
		Long: `List the members of pull mode's hub (the current context, or --context): each
member namespace, whether its agent has published (its MemberCluster), when
it last renewed its Lease and whether that is within --endpoint-ttl (the
planner's: past it, its endpoints are withdrawn from the plan), how many
names it exports and in how many planned names it is an importer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			config, err := o.flags.ToRESTConfig()
			if err != nil {
				return err
			}
			kube, err := kubernetes.NewForConfig(config)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(config)
			if err != nil {
				return err
			}
			got, err := gatherPullMembers(cmd.Context(), kube, dyn, ttl)
			if err != nil {
				return err
			}
			switch o.output {
			case "json":
				enc := json.NewEncoder(o.streams.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(got)
			case "":
				return printPullMembers(o.streams.Out, got, time.Now(), o.noHeaders)
			default:
				return fmt.Errorf("-o %s: hub members prints a table or json", o.output)
			}
		},
	}
	members.Flags().DurationVar(&ttl, "endpoint-ttl", plannerEndpointTTL, "the planner's --endpoint-ttl: a Lease renewed longer ago has expired")
	members.Flags().StringVarP(&o.output, "output", "o", "", "json, or a table when empty")
	members.Flags().BoolVar(&o.noHeaders, "no-headers", false, "leave the table's header out")
	cmd.AddCommand(member, members)
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

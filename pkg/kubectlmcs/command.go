package kubectlmcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/multiclusterservices/export"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"
)

// ErrChecksFailed is what diagnose returns when a check failed: the
// command exits 1 without printing it again.
var ErrChecksFailed = errors.New("a check failed")

// ErrNotConverged is what status --wait returns when the clusterset has
// not converged in time: the command exits 2, what it waited for printed.
var ErrNotConverged = errors.New("not converged")

type options struct {
	flags         *genericclioptions.ConfigFlags
	streams       genericiooptions.IOStreams
	contexts      []string
	allNamespaces bool
	output        string
	timeout       time.Duration

	leaseNamespace       string
	kubeProxyMetricsPort int
	dnsPod               string
	from                 []string
	wait                 bool
	waitTimeout          time.Duration
	selector             string
	noHeaders            bool
	watch                bool
	hub                  hubOptions
	probe                probeOptions
	// pullHub is diagnose's --hub-context: pull mode's hub, where the
	// sources' Leases are, and the planner's endpoint TTL.
	pullHub struct {
		context string
		ttl     time.Duration
	}
	// trust is what diagnose trusts of an import and its slices: what
	// the members' kube-proxy trusts (its --multicluster-endpointslice-managers
	// and --clusterset-ip-cidrs).
	trust trustOptions
}

// trustOptions are diagnose's copies of kube-proxy's trust flags.
type trustOptions struct {
	managers []string
	cidrs    []string
}

// probeOptions are diagnose's --probe flags.
type probeOptions struct {
	enabled   bool
	image     string
	namespace string
	timeout   time.Duration
}

// status gathers every member's status, and the hub's view with
// --hub-context; with --wait, again every statusPoll until nothing is
// waited for or --wait-timeout has passed (members are connected again
// each time: one that did not answer may). It returns the last view and
// what it still waits for.
func (o *options) status(ctx context.Context) (StatusView, []string, error) {
	deadline := time.Now().Add(o.waitTimeout)
	for {
		members, err := o.connect(ctx)
		if err != nil {
			return StatusView{}, nil, err
		}
		view := StatusView{Contexts: gatherStatus(ctx, members, o)}
		waiting := Waiting(view.Contexts)
		if o.hub.context != "" {
			hub, err := connect(ctx, o.flags, []string{o.hub.context}, o.timeout)
			if err != nil {
				return StatusView{}, nil, err
			}
			h := gatherHub(ctx, hub[0], o.hub)
			view.Hub = &h
			waiting = append(waiting, HubWaiting(h)...)
		}
		if !o.wait || len(waiting) == 0 || !time.Now().Add(statusPoll).Before(deadline) {
			return view, waiting, nil
		}
		select {
		case <-ctx.Done():
			return view, waiting, nil
		case <-time.After(statusPoll):
		}
	}
}

// statusPoll is how often status --wait looks again.
const statusPoll = 2 * time.Second

// NewCommand is kubectl-mcs's root command.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: streams}
	cmd := &cobra.Command{
		Use:   "kubectl-mcs",
		Short: "See every member of a clusterset at once, and find out why a multi-cluster Service is not reachable",
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl mcs",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.flags.AddFlags(cmd.PersistentFlags())
	pf := cmd.PersistentFlags()
	pf.StringSliceVar(&o.contexts, "contexts", nil, "Kubeconfig contexts of the members (default: --context, else every context of the kubeconfig)")
	pf.DurationVar(&o.timeout, "member-timeout", 5*time.Second, "How long a member's API may take to answer before it counts as unreachable")
	pf.StringVar(&o.leaseNamespace, "lease-namespace", "kube-system", "Namespace of the mcs-controller's Leases (its --lease-namespace)")
	pf.IntVar(&o.kubeProxyMetricsPort, "kube-proxy-metrics-port", 10249, "Port of kube-proxy's metrics on each node, read through the node proxy (0: do not read)")
	_ = cmd.RegisterFlagCompletionFunc("contexts", o.completeContexts)
	_ = cmd.RegisterFlagCompletionFunc("context", o.completeContexts)

	cmd.AddCommand(o.statusCommand(), o.getCommand(), o.diagnoseCommand(), o.probeCommand(), o.hubCommand())
	return cmd
}

func (o *options) addOutput(cmd *cobra.Command, formats string) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: "+formats)
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return strings.Split(formats, "|"), cobra.ShellCompDirectiveNoFileComp
	})
}

func (o *options) checkOutput(allowed ...string) error {
	for _, a := range allowed {
		if o.output == a {
			return nil
		}
	}
	return fmt.Errorf("unknown output format %q: want one of %q", o.output, allowed)
}

func (o *options) connect(ctx context.Context) ([]*member, error) {
	contexts, err := memberContexts(o.flags, o.contexts)
	if err != nil {
		return nil, err
	}
	return connect(ctx, o.flags, contexts, o.timeout)
}

func (o *options) namespace() string {
	if o.allNamespaces {
		return metav1.NamespaceAll
	}
	if o.flags.Namespace != nil && *o.flags.Namespace != "" {
		return *o.flags.Namespace
	}
	if ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace(); err == nil && ns != "" {
		return ns
	}
	return metav1.NamespaceDefault
}

func (o *options) statusCommand() *cobra.Command {
	views := newViewPrinter()
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Every member: reachable, version, MCS APIs and policies, kube-proxy gate, served model, counts; the mcs-controller's leader",
		Long: `Every member: reachable, version, MCS APIs and policies, kube-proxy gate,
served model, counts; the mcs-controller's leader. The members are the
kubeconfig's contexts (--contexts, --context, else every context): what
you can reach. With --hub-context it also shows who the mcs-controller
serves: the member Secrets and ClusterProfiles of its hub, and what it
said of each (joined, pending, refused, left, and why).

With --wait it waits until the clusterset has converged: every member
answers, serves the multi-cluster APIs and is not refused or left by the
mcs-controller (with --hub-context: every listing of the hub joined), the
controller has a healthy leader, no source lease is stale, every export is
valid and ready and none is in conflict, and every ClusterSetIP import has
its clusterset IPs. It then prints the status and exits 0; after
--wait-timeout it prints the status and what it waited for, and exits 2.
Errors (a kubeconfig that cannot be read, a bad flag) exit 1.

-o json and yaml print the status as one object; -o jsonpath=...,
go-template=... and --template pick fields out of that object as
kubectl does (for example -o jsonpath='{.contexts[*].clusterID}').`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			template, err := views.printer(o.output)
			if err != nil {
				return err
			}
			view, waiting, err := o.status(cmd.Context())
			if err != nil {
				return err
			}
			switch {
			case template != nil:
				err = printTemplate(o.streams.Out, template, view)
			case o.output != "":
				err = o.printObject(view)
			default:
				err = printLines(o.streams.Out, viewLines(view))
			}
			if err != nil || !o.wait || len(waiting) == 0 {
				return err
			}
			fmt.Fprintf(o.streams.ErrOut, "not converged after %v:\n", o.waitTimeout)
			for _, w := range waiting {
				fmt.Fprintln(o.streams.ErrOut, "  "+w)
			}
			return ErrNotConverged
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "Wait until every member has joined and every import has converged (exit 0), or until --wait-timeout (exit 2)")
	cmd.Flags().DurationVar(&o.waitTimeout, "wait-timeout", 5*time.Minute, "How long --wait waits")
	cmd.Flags().StringVar(&o.hub.context, "hub-context", "", "Kubeconfig context of the mcs-controller's hub (its --hub-context): show the members it lists there and what it said of each")
	cmd.Flags().StringVar(&o.hub.secretsNamespace, "member-secrets-namespace", "mcs-system", "With --hub-context: the hub's namespace of member Secrets (the controller's --member-secrets-namespace; empty: none)")
	cmd.Flags().StringVar(&o.hub.secretsSelector, "member-secrets-selector", export.LabelMember, "With --hub-context: the label selector of member Secrets (the controller's --member-secrets-selector)")
	cmd.Flags().StringVar(&o.hub.profileNamespace, "inventory-namespace", "fleet", "With --hub-context: the hub's namespace of ClusterProfiles (the controller's --inventory-namespace; empty: none)")
	_ = cmd.RegisterFlagCompletionFunc("hub-context", o.completeContexts)
	views.addFlags(cmd)
	o.addOutput(cmd, strings.Join(views.formats(), "|"))
	return cmd
}

// StatusView is what status shows: the kubeconfig's contexts, and with
// --hub-context the hub's own list of members.
type StatusView struct {
	Contexts []MemberStatus `json:"contexts"`
	Hub      *HubView       `json:"hub,omitempty"`
}

// viewLines renders status: which view each part is, then the part.
func viewLines(v StatusView) []string {
	out := append([]string{"kubeconfig contexts (what you can reach; --hub-context shows whom the mcs-controller serves):"}, StatusLines(v.Contexts)...)
	if v.Hub != nil {
		out = append(append(out, ""), HubLines(*v.Hub)...)
	}
	return out
}

func (o *options) getCommand() *cobra.Command {
	printFlags := newPrintFlags()
	cmd := &cobra.Command{
		Use:   "get exports|imports",
		Short: "One table of the ServiceExports or ServiceImports of every member",
		Long: `One table of the ServiceExports or ServiceImports of every member, a
CLUSTER column saying which member each row was read from (-o wide adds
columns). Every other -o prints the objects as their members serve them
through kubectl's printers (json, yaml, name, jsonpath, go-template,
custom-columns), as one List; each object carries the annotation
` + AnnotationContext + `: the member's kubeconfig context.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"exports", "imports"},
		RunE: func(cmd *cobra.Command, args []string) error {
			asTable := o.output == "wide" || outputFormat(o.output, printFlags.template) == ""
			var printer printers.ResourcePrinter
			if !asTable {
				var err error
				if printer, err = printFlags.printer(o.output, o.noHeaders); err != nil {
					return err
				}
			}
			members, err := o.connect(cmd.Context())
			if err != nil {
				return err
			}
			ns, wide := o.namespace(), o.output == "wide"
			q := query{namespace: ns, selector: o.selector}
			if o.watch {
				q.versions = map[string]string{}
			}
			// listed is the listing as the table shows it, header first;
			// rows makes the table's rows of an object a watch delivers.
			var listed [][]string
			var rows func(cluster string, objects []map[string]any) ([][]string, error)
			var resource schema.GroupVersionResource
			var errs, contexts []string
			var objects []map[string]any
			now := time.Now()
			switch args[0] {
			case "exports", "export", "serviceexports", "serviceexport", "svcex":
				var list []ClusterExport
				list, errs = listExports(cmd.Context(), members, q)
				for _, e := range list {
					contexts, objects = append(contexts, e.Cluster), append(objects, e.Served)
				}
				listed = ExportRows(list, o.allNamespaces, wide, now)
				resource, rows = serviceExports, func(cluster string, objects []map[string]any) ([][]string, error) {
					list, err := typed(objects, func(e mcsv1beta1.ServiceExport) ClusterExport { return ClusterExport{Cluster: cluster, Export: e} })
					return ExportRows(list, o.allNamespaces, wide, time.Now()), err
				}
			case "imports", "import", "serviceimports", "serviceimport", "svcim":
				var list []ClusterImport
				list, errs = listImports(cmd.Context(), members, q)
				for _, i := range list {
					contexts, objects = append(contexts, i.Cluster), append(objects, i.Served)
				}
				listed = ImportRows(list, o.allNamespaces, wide, now)
				resource, rows = serviceImports, func(cluster string, objects []map[string]any) ([][]string, error) {
					list, err := typed(objects, func(i mcsv1beta1.ServiceImport) ClusterImport { return ClusterImport{Cluster: cluster, Import: i} })
					return ImportRows(list, o.allNamespaces, wide, time.Now()), err
				}
			default:
				return fmt.Errorf("unknown resource %q: want exports or imports", args[0])
			}
			for _, e := range errs {
				for _, line := range wrap("warning: "+e, width, "  ") {
					fmt.Fprintln(o.streams.ErrOut, line)
				}
			}
			// printTable prints rows of the table, its header once.
			headed := o.noHeaders
			printTable := func(tbl [][]string) error {
				lines := table(tbl)
				if headed {
					lines = lines[min(1, len(lines)):]
				}
				headed = true
				return printLines(o.streams.Out, lines)
			}
			// The listing is printed from the objects as decoded once.
			switch {
			case printer != nil:
				if err := printServed(o.streams.Out, printer, contexts, objects); err != nil {
					return err
				}
			case len(objects) > 0:
				if err := printTable(listed); err != nil {
					return err
				}
			case !o.watch:
				fmt.Fprintf(o.streams.ErrOut, "No resources found%s.\n", inNamespace(ns))
			}
			if !o.watch {
				return nil
			}
			return watchServed(cmd.Context(), members, resource, q, o.streams.ErrOut, func(cluster string, object map[string]any) error {
				if printer != nil {
					return printServed(o.streams.Out, printer, []string{cluster}, []map[string]any{object})
				}
				tbl, err := rows(cluster, []map[string]any{object})
				if err != nil {
					return err
				}
				return printTable(tbl)
			})
		},
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List across all namespaces")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "Selector (label query) to filter on, supports '=', '==', '!=', 'in', 'notin'. (e.g. -l key1=value1,key2=value2)")
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "When using the default or custom-column output format, don't print headers")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "After listing, watch every member and print each object that changes, with its member (as kubectl get --watch); Ctrl-C ends it")
	printFlags.addFlags(cmd)
	o.addOutput(cmd, strings.Join(append([]string{"wide"}, printFlags.formats()...), "|"))
	return cmd
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in " + ns + " namespace"
}

func (o *options) diagnoseCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diagnose service NAMESPACE/NAME",
		Short: "Walk the path of an exported Service and print a checklist; exit 1 when a check fails",
		Long: `Checks, in every member, the Service and its ServiceExport (conditions,
conflicts and the field that conflicts), then in each importing member
(--from, default every member) the ServiceImport (IPs, ports, source
clusters), the MCS EndpointSlices of each source cluster and their ready
endpoints, the source Leases (in pull mode, with --hub-context, each
source agent's Lease in the hub), what kube-proxy on each node reported for
the import (programmed, or refused and why), and what DNS answers for
NAME.NAMESPACE.svc.clusterset.local: asked with dig from --dns-pod by pod
exec, or else the objects CoreDNS serves from (labelled "objects only").

With --probe it also sends traffic, as the import's clients would: in
each importing member it starts a pod (--probe-image, restartPolicy
Never, no API access, admitted under the restricted Pod Security
Standard) in --probe-namespace (default: the Service's), which resolves
the clusterset name, connects to each source cluster's ready endpoints
(up to 8 per source and port) and to every clusterset IP and port several
times, and reports what answered. Servers that send a first line naming
their pod (echo servers, agnhost serve-hostname) also tell which source
cluster answered behind the clusterset IP. The pod is deleted afterwards,
also when diagnose is interrupted; pods left by a killed diagnose carry
the label ` + LabelProbe + `.`,
		Args: cobra.ExactArgs(2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return []string{"service"}, cobra.ShellCompDirectiveNoFileComp
			}
			return o.completeImports(cmd)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "service" && args[0] != "svc" {
				return fmt.Errorf("diagnose %s: only services can be diagnosed", args[0])
			}
			if err := o.checkOutput("", "json", "yaml"); err != nil {
				return err
			}
			ns, name, ok := strings.Cut(args[1], "/")
			if !ok {
				ns, name = o.namespace(), args[1]
			}
			members, err := o.connect(cmd.Context())
			if err != nil {
				return err
			}
			importers := o.from
			if len(importers) == 0 {
				for _, m := range members {
					importers = append(importers, m.Context)
				}
			}
			state := gatherService(cmd.Context(), members, ns, name, importers, o)
			if o.pullHub.context != "" {
				state.Hub = o.gatherHubLiveness(cmd.Context())
			}
			if o.probe.enabled {
				o.runProbes(cmd.Context(), members, &state)
			}
			checks := Diagnose(state)
			if o.output != "" {
				if err := o.printObject(checks); err != nil {
					return err
				}
			} else {
				title := fmt.Sprintf("diagnose service %s/%s (importing: %s)", ns, name, strings.Join(importers, ","))
				if err := printLines(o.streams.Out, ChecklistLines(title, checks)); err != nil {
					return err
				}
			}
			if Failed(checks) > 0 {
				return ErrChecksFailed
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&o.from, "from", nil, "Contexts of the importing members to check (default: every member)")
	cmd.Flags().StringVar(&o.dnsPod, "dns-pod", "", "NAMESPACE/POD with dig, in the importing members, to ask DNS from (by pod exec)")
	cmd.Flags().BoolVar(&o.probe.enabled, "probe", false, "Also send traffic: resolve, and connect to the clusterset IPs and each source's endpoints, from a short-lived pod in each importing member")
	cmd.Flags().StringVar(&o.probe.image, "probe-image", DefaultProbeImage, "Image of the probe pod: one that holds kubectl-mcs as "+probeBinary)
	cmd.Flags().StringVar(&o.probe.namespace, "probe-namespace", "", "Namespace of the probe pod (default: the Service's)")
	cmd.Flags().DurationVar(&o.probe.timeout, "probe-timeout", time.Minute, "How long the probe pod may run")
	cmd.Flags().StringSliceVar(&o.trust.managers, "multicluster-endpointslice-managers", []string{mcsproxy.DefaultManagedBy}, "The managers whose imports and MCS EndpointSlices the members' kube-proxy trusts (its flag of the same name): diagnose checks and probes only those, and says what it ignored")
	cmd.Flags().StringSliceVar(&o.trust.cidrs, "clusterset-ip-cidrs", mcsproxy.DefaultClusterSetIPCIDRs, "The clusterset IP ranges the members' kube-proxy admits (its flag of the same name)")
	cmd.Flags().StringVar(&o.pullHub.context, "hub-context", "", "Kubeconfig context of pull mode's hub: the sources' liveness is read there (each agent's Lease in its member namespace) instead of the importers' source Leases")
	cmd.Flags().DurationVar(&o.pullHub.ttl, "endpoint-ttl", plannerEndpointTTL, "With --hub-context: the planner's --endpoint-ttl, past which a source's Lease has expired")
	_ = cmd.RegisterFlagCompletionFunc("from", o.completeContexts)
	_ = cmd.RegisterFlagCompletionFunc("hub-context", o.completeContexts)
	o.addOutput(cmd, "json|yaml")
	return cmd
}

func (o *options) printObject(v any) error {
	var out []byte
	var err error
	if o.output == "json" {
		out, err = json.MarshalIndent(v, "", "    ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = o.streams.Out.Write(out)
	return err
}

func printLines(w io.Writer, lines []string) error {
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

func (o *options) completeContexts(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	raw, err := o.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []string
	for name := range raw.Contexts {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeImports offers NAMESPACE/NAME of the imports of every member.
func (o *options) completeImports(cmd *cobra.Command) ([]string, cobra.ShellCompDirective) {
	members, err := o.connect(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	imports, _ := listImports(cmd.Context(), members, query{namespace: metav1.NamespaceAll})
	seen := map[string]bool{}
	var out []string
	for _, i := range imports {
		key := i.Import.Namespace + "/" + i.Import.Name
		if !seen[key] {
			seen[key] = true
			out = append(out, key)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// Package cli is the `clusterset` command: bring a local clusterset up and
// keep it until Ctrl-C, run the demo, run commands inside pods, export
// Services with the stand-in exporter, and clean up after a crash.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset/demo"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset/standin"
)

const defaultDir = "_output/clusterset"

// NewCommand returns the root command.
func NewCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "clusterset",
		Short:         "A clusterset of real Kubernetes control planes on this machine, without Docker",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(upCommand(), demoCommand(), execCommand(), askCommand(), exportCommand(), downCommand())
	return root
}

// errInterrupted replaces the error of a start-up cut short by Ctrl-C: it
// is not a failure worth a log dump.
var errInterrupted = errors.New("interrupted; everything started was stopped and removed")

// Main runs the command and exits.
func Main() {
	if err := NewCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "clusterset:", err)
		if errors.Is(err, errInterrupted) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

// unlessInterrupted returns errInterrupted for an error caused by the
// cancellation of ctx.
func unlessInterrupted(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return errInterrupted
	}
	return err
}

func addClusterSetFlags(cmd *cobra.Command, o *clusterset.Options) {
	f := cmd.Flags()
	f.IntVar(&o.Clusters, "clusters", 2, "number of clusters")
	f.IntVar(&o.NodesPerCluster, "nodes", 1, "nodes per cluster")
	f.StringVar(&o.Dir, "dir", defaultDir, "directory for every component's files and logs")
	f.StringVar(&o.Prefix, "prefix", "cset", "prefix of the network namespaces")
	f.StringVar(&o.ProxyMode, "proxy-mode", "nftables", "kube-proxy mode: nftables or iptables")
	f.StringArrayVar(&o.KubeProxyArgs, "kube-proxy-arg", nil, "extra kube-proxy flag (repeatable)")
	f.StringSliceVar(&o.UpstreamKubeProxy, "upstream-kube-proxy", nil, "clusters whose nodes run the unmodified upstream kube-proxy (serve them with mcs-controller --derived-members)")
	f.StringToStringVar(&o.PrivatePods, "private-pods", nil, "CLUSTER=[OVERLAPPED]: clusters whose pods the others cannot reach, nor they the others' (routed only among their own nodes), each with the pod CIDR of cluster OVERLAPPED if given (overlapping pod networks); serve them with mcs-controller --ingress-members")
	f.Var(clusterPropertyFlag{o}, "cluster-property", "CLUSTER=KEY=VALUE: a ClusterProperty written in cluster CLUSTER at start-up, e.g. cluster-a=region.topology.k8s.io=eu (repeatable)")
	f.StringVar((*string)(&o.IPFamily), "ip-family", string(clusterset.IPv4), "IP family of nodes, pods, Services and clusterset IPs: ipv4, ipv6 or dual")
}

// clusterPropertyFlag is --cluster-property: each use adds one property to
// the Options.
type clusterPropertyFlag struct{ o *clusterset.Options }

func (f clusterPropertyFlag) Set(s string) error { return f.o.AddClusterProperty(s) }
func (f clusterPropertyFlag) Type() string       { return "CLUSTER=KEY=VALUE" }
func (f clusterPropertyFlag) String() string {
	var all []string
	for _, cluster := range slices.Sorted(maps.Keys(f.o.ClusterProperties)) {
		for _, key := range slices.Sorted(maps.Keys(f.o.ClusterProperties[cluster])) {
			all = append(all, cluster+"="+key+"="+f.o.ClusterProperties[cluster][key])
		}
	}
	return strings.Join(all, ",")
}

// signalContext is cancelled by the first SIGINT or SIGTERM; a second one
// kills the process (its children die with it).
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ch
		fmt.Fprintln(os.Stderr, "\nstopping the clusterset (again to abort)...")
		cancel()
		<-ch
		os.Exit(130)
	}()
	return ctx, cancel
}

// logToFile sends client-go's klog output, which would otherwise interleave
// with the progress lines, to dir/harness.log.
func logToFile(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	f, err := os.OpenFile(filepath.Join(dir, "harness.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	klog.SetOutput(f)
	return nil
}

// writePID records the harness's pid, so that local-down can stop it.
func writePID(dir string) (func(), error) {
	path := filepath.Join(dir, "clusterset.pid")
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, err
	}
	return func() { _ = os.Remove(path) }, nil
}

func upCommand() *cobra.Command {
	var o clusterset.Options
	var inventoryHub string
	var withDemo bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Bring up a clusterset and keep it until Ctrl-C, then clean up",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logToFile(o.Dir); err != nil {
				return err
			}
			removePID, err := writePID(o.Dir)
			if err != nil {
				return err
			}
			defer removePID()
			ctx, cancel := signalContext()
			defer cancel()
			o.Progress = os.Stdout
			cs, err := clusterset.Up(ctx, o)
			if err != nil {
				return unlessInterrupted(ctx, err)
			}
			defer cs.Down()
			if withDemo {
				stop, err := demo.Workload(ctx, cs, os.Stdout)
				if err != nil {
					return unlessInterrupted(ctx, err)
				}
				defer stop()
			}
			printUsage(cs)
			if inventoryHub != "" {
				if err := writeInventory(ctx, cs, inventoryHub); err != nil {
					return unlessInterrupted(ctx, err)
				}
			}
			<-ctx.Done()
			return nil
		},
	}
	addClusterSetFlags(cmd, &o)
	cmd.Flags().BoolVar(&withDemo, "with-demo", false, "also run what make demo shows and leave it up: Service demo/web exported from the first two clusters, a client pod in the second, and the mcs-controller (the README's tour inspects them)")
	cmd.Flags().StringVar(&inventoryHub, "inventory-hub", "", "CLUSTER: write a Cluster Inventory (KEP-4322) in that cluster, a ClusterProfile per cluster reached with _output/bin/credential-plugin (KEP-5339), and print the mcs-controller command that takes its members from it only")
	return cmd
}

// writeInventory writes the inventory of --inventory-hub and says how to
// run the controller with it.
func writeInventory(ctx context.Context, cs *clusterset.ClusterSet, hubName string) error {
	hub := cs.Cluster(hubName)
	if hub == nil {
		return fmt.Errorf("--inventory-hub: no cluster %q", hubName)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	plugin := filepath.Join(filepath.Dir(self), "credential-plugin")
	if _, err := os.Stat(plugin); err != nil {
		return fmt.Errorf("--inventory-hub needs the credential plugin (hack/build.sh credential-plugin): %w", err)
	}
	inv, err := cs.NewInventory(ctx, hub, plugin, "1h")
	if err != nil {
		return err
	}
	for _, c := range cs.Clusters {
		if err := inv.PutProfile(ctx, c); err != nil {
			return err
		}
	}
	fmt.Printf(`A Cluster Inventory is in %s (kubectl --context %s -n %s get clusterprofiles);
the mcs-controller that knows the members from it only:
  %s %s
`, hub.Name, hub.Name, clusterset.InventoryNamespace, filepath.Join(filepath.Dir(self), "mcs-controller"), strings.Join(inv.ControllerArgs(), " "))
	return nil
}

func printUsage(cs *clusterset.ClusterSet) {
	self, _ := os.Executable()
	kubectl := filepath.Join(filepath.Dir(self), "kubectl")
	first, last := cs.Clusters[0], cs.Clusters[len(cs.Clusters)-1]
	fmt.Printf(`
The clusterset is up: %d clusters (kubeconfig contexts %s .. %s), logs in %s.
kubectl of the pinned Kubernetes version is %s; every context works:
  export KUBECONFIG=%s PATH=%s:$PATH
  kubectl --context %s get nodes,pods -A
  kubectl --context %s run client --image=busybox -- sleep infinity
  kubectl --context %s exec -it client -- sh      # the pod's network and DNS, the host's curl, dig, nc
  kubectl --context %s logs -f POD; kubectl port-forward POD 8080; kubectl rollout status statefulset/NAME
Pods run agnhost netexec/serve-hostname, the echoserver image, their command
with the host's binaries (busybox, debug images), or idle (see test/podimage).
Export Services with the mcs-controller (_output/bin/mcs-controller --kubeconfig=%s)
or with the stand-in (%s export --kubeconfig=$KUBECONFIG --watch).
While it is up the host refuses every clusterset address (unreachable routes).
Press Ctrl-C to stop and clean up (after a crash: hack/local-down-clusterset.sh --prefix=%s).
`, len(cs.Clusters), first.Name, last.Name, cs.Dir(), kubectl, cs.Kubeconfig(), filepath.Dir(self),
		first.Name, last.Name, last.Name, last.Name, cs.ControllerKubeconfig(), self, cs.Prefix())
}

func demoCommand() *cobra.Command {
	o := demo.Options{Out: os.Stdout}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Bring up 2 clusters, export a Service from both and reach it from a pod through the clusterset IP",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logToFile(o.ClusterSet.Dir); err != nil {
				return err
			}
			removePID, err := writePID(o.ClusterSet.Dir)
			if err != nil {
				return err
			}
			defer removePID()
			self, err := os.Executable()
			if err != nil {
				return err
			}
			o.AskCommand = []string{self, "ask"}
			ctx, cancel := signalContext()
			defer cancel()
			return unlessInterrupted(ctx, demo.Run(ctx, o))
		},
	}
	addClusterSetFlags(cmd, &o.ClusterSet)
	cmd.Flags().IntVar(&o.Requests, "requests", 10, "requests per name")
	cmd.Flags().StringVar(&o.Exporter, "exporter", demo.ExporterAuto, "auto (mcs-controller if built, else the stand-in), mcs-controller or stand-in")
	return cmd
}

func execCommand() *cobra.Command {
	var kubeconfig, context, namespace, prefix string
	cmd := &cobra.Command{
		Use:   "exec POD -- COMMAND [ARG...]",
		Short: "Run a command inside a pod's network namespace (with the pod's cluster DNS)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
				&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			ns, err := clusterset.PodNetns(cmd.Context(), client, prefix, context, namespace, args[0])
			if err != nil {
				return err
			}
			ip, err := exec.LookPath("ip")
			if err != nil {
				return err
			}
			return syscall.Exec(ip, append([]string{"ip", "netns", "exec", ns}, args[1:]...), os.Environ())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", filepath.Join(defaultDir, "kubeconfig"), "the clusterset's kubeconfig")
	f.StringVar(&context, "context", "cluster-a", "the pod's cluster")
	f.StringVarP(&namespace, "namespace", "n", "default", "the pod's namespace")
	f.StringVar(&prefix, "prefix", "cset", "the clusterset's network namespace prefix")
	return cmd
}

func askCommand() *cobra.Command {
	var count int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "ask TARGET",
		Short: "Send requests to http://... or host:port (echoserver) and print who answered each",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			demo.Ask(os.Stdout, args[0], count, timeout)
			return nil
		},
	}
	cmd.Flags().IntVar(&count, "count", 1, "number of requests")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Second, "timeout per request")
	return cmd
}

func exportCommand() *cobra.Command {
	var kubeconfig string
	var watch bool
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Stand-in for the mcs-controller: write ServiceImports and MCS EndpointSlices for every ServiceExport",
		RunE: func(cmd *cobra.Command, _ []string) error {
			members, err := standin.MembersFromKubeconfig(kubeconfig)
			if err != nil {
				return err
			}
			if !watch {
				return standin.Sync(cmd.Context(), members)
			}
			ctx, cancel := signalContext()
			defer cancel()
			standin.Run(ctx, members, time.Second, func(f string, args ...any) { fmt.Fprintf(os.Stderr, f+"\n", args...) })
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", filepath.Join(defaultDir, "mcs-controller.kubeconfig"), "kubeconfig with one context per member cluster, as the mcs-controller's identity (the admission policies let only it write imports)")
	cmd.Flags().BoolVar(&watch, "watch", false, "keep syncing every second until Ctrl-C")
	return cmd
}

func downCommand() *cobra.Command {
	var prefix, dir string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a running clusterset and remove what a crashed one left (network namespaces, host routes)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			stopHarness(filepath.Join(dir, "clusterset.pid"))
			if err := clusterset.CleanLeftovers(prefix); err != nil {
				return err
			}
			left, err := clusterset.Leftovers(prefix)
			if err != nil {
				return err
			}
			if len(left) > 0 {
				return fmt.Errorf("still there: %v", left)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "cset", "the clusterset's network namespace prefix")
	cmd.Flags().StringVar(&dir, "dir", defaultDir, "the clusterset's directory (for its pid file)")
	return cmd
}

// stopHarness asks a running harness to stop (it then cleans up itself),
// and kills it if it does not within 30s.
func stopHarness(pidFile string) {
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return
	}
	// A stale file may name a pid that now belongs to something else.
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || !strings.Contains(string(cmdline), "clusterset") {
		return
	}
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	for range 300 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

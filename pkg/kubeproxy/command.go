// Package kubeproxy builds the kube-proxy command: upstream kube-proxy with
// the MultiClusterServices feature gate. With the gate off, the command runs
// upstream's code path unchanged.
package kubeproxy

import (
	"context"
	goflag "flag"
	"fmt"

	"github.com/spf13/cobra"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	mcsclientset "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/features"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/proxy/multicluster"
)

// NewProxyCommand returns the kube-proxy command: upstream's flags, config
// file and start-up, plus the multi-cluster flags.
func NewProxyCommand() *cobra.Command {
	// Upstream's command keeps its Options in a closure; the command is
	// rebuilt around the same exported Options so that the proxier can be
	// wrapped between its construction and its start.
	upstream := app.NewProxyCommand()
	opts := app.NewOptions()
	mcOpts := NewMultiClusterOptions()

	cmd := &cobra.Command{
		Use:  upstream.Use,
		Long: upstream.Long,
		RunE: func(cmd *cobra.Command, args []string) error {
			verflag.PrintAndExitIfRequested()
			if err := opts.Complete(cmd.Flags()); err != nil {
				return fmt.Errorf("failed complete: %w", err)
			}
			view, err := viewOptions(opts)
			if err != nil {
				return err
			}
			logs.InitLogs()
			if err := logsapi.ValidateAndApplyAsField(&view.config.Logging, utilfeature.DefaultFeatureGate, field.NewPath("logging")); err != nil {
				return fmt.Errorf("initialize logging: %w", err)
			}
			cliflag.PrintFlags(cmd.Flags())
			if err := opts.Validate(); err != nil {
				return fmt.Errorf("failed validate: %w", err)
			}
			utilfeature.DefaultMutableFeatureGate.AddMetrics()

			ctx := context.Background()
			logger := klog.FromContext(ctx)
			if !features.Enabled() || opts.WriteConfigTo != "" || opts.CleanupAndExit || opts.InitAndExit {
				// Upstream, exactly. Cleanup also removes multi-cluster
				// rules: they live in kube-proxy's own tables.
				if err := opts.Run(ctx); err != nil {
					logger.Error(err, "Error running ProxyServer")
					return err
				}
				return nil
			}
			if err := mcOpts.Complete(); err != nil {
				return err
			}
			if err := runWithMultiCluster(ctx, view, mcOpts); err != nil {
				logger.Error(err, "Error running ProxyServer")
				return err
			}
			return nil
		},
		Args: upstream.Args,
	}

	fs := cmd.Flags()
	opts.AddFlags(fs)
	mcOpts.AddFlags(fs)
	fs.AddGoFlagSet(goflag.CommandLine) // for --boot-id-file and --machine-id-file
	_ = cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("multicluster-config", "yaml", "yml", "json")
	return cmd
}

// runWithMultiCluster is upstream's Options.Run with the proxier wrapped
// and the ServiceImport watcher started.
func runWithMultiCluster(ctx context.Context, view *optionsView, mcOpts *MultiClusterOptions) error {
	defer close(view.errCh)
	logger := klog.FromContext(ctx)

	translation, err := mcOpts.TranslationOptions()
	if err != nil {
		return err
	}
	if err := checkPodRanges(translation, view.config.DetectLocal.ClusterCIDRs); err != nil {
		return err
	}
	// Best-effort, as upstream: the backends log what they could not do.
	_ = platformCleanup(ctx, view.config.Mode, false)

	server, err := newProxyServer(ctx, view.config, view.master, false, view.flagz)
	if err != nil {
		return err
	}
	restConfig, err := apiConfig(view.config, view.master)
	if err != nil {
		return err
	}
	mcsClient, err := mcsclientset.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	crdClient, err := apiextensionsclient.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	dynamicClient, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return err
	}

	multicluster.RegisterMetrics()
	proxier := multicluster.NewProxier(logger, server.Proxier, translation, server.Recorder)
	proxier.SetNode(server.NodeRef)
	proxier.SetClusterSelection(features.ClusterSelectionEnabled())
	server.Proxier = proxier
	proxier.SweepConntrack(ctx)
	watcher := &multicluster.Watcher{
		Proxier:       proxier,
		MCSClient:     mcsClient,
		CRDClient:     crdClient,
		DynamicClient: dynamicClient,
		ResyncPeriod:  view.config.ConfigSyncPeriod.Duration,
		SyncTimeout:   mcOpts.SyncTimeout,
		// Cluster selection (KEP-5939) reads imports whole.
		ClusterSelection: features.ClusterSelectionEnabled(),
	}
	logger.Info("Multi-cluster services enabled", "clusterSetIPCIDRs", translation.ClusterSetIPCIDRs, "endpointSliceManagers", translation.TrustedManagers)
	watcher.Start(ctx)
	go proxier.Announce(ctx, multicluster.AnnouncePeriod)

	// What upstream's runLoop does: a config file change or a server
	// error ends the process.
	if view.watcher != nil {
		if err := runWatcher(ctx, view.watcher); err != nil {
			return err
		}
	}
	go func() {
		view.errCh <- server.Run(ctx)
	}()
	for {
		if err := <-view.errCh; err != nil {
			return err
		}
	}
}

// apiConfig returns a client configuration for the APIs kube-proxy does not
// otherwise use, from the same kubeconfig or in-cluster credentials as its
// own client. CRDs are not served as protobuf, so the content type is left
// at JSON.
func apiConfig(config *kubeproxyconfig.KubeProxyConfiguration, master string) (*rest.Config, error) {
	var c *rest.Config
	var err error
	if config.ClientConnection.Kubeconfig == "" && master == "" {
		c, err = rest.InClusterConfig()
	} else {
		c, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: config.ClientConnection.Kubeconfig},
			&clientcmd.ConfigOverrides{ClusterInfo: clientcmdapi.Cluster{Server: master}}).ClientConfig()
	}
	if err != nil {
		return nil, err
	}
	c.QPS = config.ClientConnection.QPS
	c.Burst = int(config.ClientConnection.Burst)
	return rest.AddUserAgent(c, "kube-proxy"), nil
}

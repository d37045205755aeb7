package kubeproxy

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	mcsproxy "k8s.io/multiclusterservices/proxy"
	"sigs.k8s.io/yaml"
)

// MultiClusterOptions configure what kube-proxy accepts from ServiceImports.
// They only matter when the MultiClusterServices gate is on.
type MultiClusterOptions struct {
	// ConfigFile is a MultiClusterConfiguration file; kube-proxy's own
	// configuration types are upstream's and cannot carry these fields.
	ConfigFile string

	ClusterSetIPCIDRs []string
	TrustedManagers   []string
	SyncTimeout       time.Duration

	fs *pflag.FlagSet
}

// MultiClusterConfiguration is the file format of --multicluster-config.
type MultiClusterConfiguration struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// ClusterSetIPCIDRs are the ranges ServiceImport IPs must lie in.
	ClusterSetIPCIDRs []string `json:"clusterSetIPCIDRs,omitempty"`
	// TrustedEndpointSliceManagers are the endpointslice.kubernetes.io/managed-by
	// values of MCS EndpointSlices kube-proxy programs.
	TrustedEndpointSliceManagers []string `json:"trustedEndpointSliceManagers,omitempty"`
}

const (
	configAPIVersion = "kubeproxy.multicluster.x-k8s.io/v1alpha1"
	configKind       = "MultiClusterConfiguration"
)

// NewMultiClusterOptions returns the defaults.
func NewMultiClusterOptions() *MultiClusterOptions {
	return &MultiClusterOptions{
		ClusterSetIPCIDRs: append([]string{}, mcsproxy.DefaultClusterSetIPCIDRs...),
		TrustedManagers:   []string{mcsproxy.DefaultManagedBy},
		SyncTimeout:       30 * time.Second,
	}
}

// AddFlags adds the multi-cluster flags.
func (o *MultiClusterOptions) AddFlags(fs *pflag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.ConfigFile, "multicluster-config", o.ConfigFile, "Path to a MultiClusterConfiguration file (apiVersion "+configAPIVersion+") setting clusterSetIPCIDRs and trustedEndpointSliceManagers. Flags given explicitly take precedence. Only used with the MultiClusterServices feature gate.")
	fs.StringSliceVar(&o.ClusterSetIPCIDRs, "clusterset-ip-cidrs", o.ClusterSetIPCIDRs, "Comma-separated CIDRs that ServiceImport clusterset IPs must lie in; imports with other IPs are not programmed. Must match the mcs-controller's --clusterset-ip-cidrs. Only used with the MultiClusterServices feature gate.")
	fs.StringSliceVar(&o.TrustedManagers, "multicluster-endpointslice-managers", o.TrustedManagers, "Comma-separated managers to trust: the app.kubernetes.io/managed-by label of ServiceImports and the endpointslice.kubernetes.io/managed-by label of multi-cluster EndpointSlices must name one of them, or the object is ignored. Only used with the MultiClusterServices feature gate.")
	fs.DurationVar(&o.SyncTimeout, "multicluster-sync-timeout", o.SyncTimeout, "How long the first proxy sync waits for ServiceImports to be read before programming local Services without them. Only used with the MultiClusterServices feature gate.")
}

// Complete loads the config file, if any, under explicitly set flags.
func (o *MultiClusterOptions) Complete() error {
	if o.ConfigFile == "" {
		return nil
	}
	data, err := os.ReadFile(o.ConfigFile)
	if err != nil {
		return fmt.Errorf("reading --multicluster-config: %w", err)
	}
	var c MultiClusterConfiguration
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return fmt.Errorf("decoding %s: %w", o.ConfigFile, err)
	}
	if c.APIVersion != configAPIVersion || c.Kind != configKind {
		return fmt.Errorf("%s: want apiVersion %s and kind %s, got %q and %q", o.ConfigFile, configAPIVersion, configKind, c.APIVersion, c.Kind)
	}
	if len(c.ClusterSetIPCIDRs) > 0 && !o.changed("clusterset-ip-cidrs") {
		o.ClusterSetIPCIDRs = c.ClusterSetIPCIDRs
	}
	if len(c.TrustedEndpointSliceManagers) > 0 && !o.changed("multicluster-endpointslice-managers") {
		o.TrustedManagers = c.TrustedEndpointSliceManagers
	}
	return nil
}

func (o *MultiClusterOptions) changed(flag string) bool {
	return o.fs != nil && o.fs.Changed(flag)
}

// TranslationOptions validates the options and returns them in the form the
// translation uses.
func (o *MultiClusterOptions) TranslationOptions() (*mcsproxy.Options, error) {
	cidrs, err := mcsproxy.ParseCIDRs(o.ClusterSetIPCIDRs)
	if err != nil {
		return nil, err
	}
	var managers []string
	for _, m := range o.TrustedManagers {
		if m != "" {
			managers = append(managers, m)
		}
	}
	if len(managers) == 0 {
		return nil, fmt.Errorf("--multicluster-endpointslice-managers must name at least one manager")
	}
	return &mcsproxy.Options{ClusterSetIPCIDRs: cidrs, TrustedManagers: managers}, nil
}

// checkPodRanges refuses clusterset ranges that overlap kube-proxy's
// --cluster-cidr (detectLocal.clusterCIDRs, the pod ranges, when set): an
// import IP there would shadow a pod's address on every node.
func checkPodRanges(translation *mcsproxy.Options, clusterCIDRs []string) error {
	var pods []netip.Prefix
	for _, s := range clusterCIDRs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
			pods = append(pods, p.Masked())
		}
	}
	return mcsproxy.CheckDisjoint(translation.ClusterSetIPCIDRs, "--cluster-cidr", pods)
}

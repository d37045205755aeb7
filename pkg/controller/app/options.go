// Package app is the mcs-controller command: flags, member topology,
// leader election, and the metrics and health endpoints around the
// controller of package mcs.
package app

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/component-base/featuregate"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"k8s.io/multiclusterservices/export"
	"k8s.io/multiclusterservices/proxy"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/catalogmodel"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/features"
)

// Options are the mcs-controller's flags.
type Options struct {
	Kubeconfig        string
	Contexts          []string
	ClusterSetIPCIDRs []string
	ManagedBy         string
	RefusedNamespaces []string
	SourceManagers    []string
	MemberPodCIDRs    []string
	MemberClusterIDs  []string
	ClusterSet        string
	// Bounds on the shared clusterset IP pool.
	MaxClusterSetIPsPerNamespace int
	MaxForeignImportsPerMember   int
	MaxClusterSetIPsPerMember    int
	CatalogObjectsPerTeam        int
	ExportNamespaces             []string
	DerivedMembers               []string
	DerivedGrace                 time.Duration
	IngressMembers               []string
	IngressServiceType           string
	// ServiceModel is how the clusterset says what it serves: exports
	// (namespace sameness) or the hub's service catalog.
	ServiceModel       string
	EndpointTTL        time.Duration
	LeaseNamespace     string
	Workers            int
	InitialSyncTimeout time.Duration
	ClusterIDTimeout   time.Duration
	APIQPS             float32
	APIBurst           int

	// MemberSecretsNamespace, in the hub, holds the member Secrets; empty
	// lists members by context only.
	MemberSecretsNamespace string
	MemberSecretsSelector  string
	HubContext             string
	MemberRecheckPeriod    time.Duration
	// MemberSecretAllowProxy accepts a proxy-url in member Secrets'
	// kubeconfigs (and in ClusterProfiles' access providers).
	MemberSecretAllowProxy bool

	// InventoryNamespace, in the hub, holds the ClusterProfiles of the
	// Cluster Inventory (KEP-4322) whose clusters are members; empty
	// reads no profiles.
	InventoryNamespace string
	InventorySelector  string
	// InventoryAccessProviders is the operator's file of credential
	// plugins per access provider (KEP-5339).
	InventoryAccessProviders string
	// InventoryRequireJoined adds the Joined condition to the join rule.
	InventoryRequireJoined bool
	// PluginRunner is the executable each access provider's credential
	// plugin is run through, to count and time its runs per provider
	// (inventory.PluginRuns): the controller's own, set by its command.
	// Empty: plugins run directly, counted without their provider.
	PluginRunner string

	// HealthProbesPerTeam and HealthProbes bound the addresses that
	// ServiceBindings' health checks probe (catalog mode).
	HealthProbesPerTeam int
	HealthProbes        int

	LeaderElect              bool
	LeaderElectContext       string
	LeaderElectLeaseDuration time.Duration
	LeaderElectRenewDeadline time.Duration
	LeaderElectRetryPeriod   time.Duration
	// Identity names this replica in Leases; default hostname plus a
	// random suffix.
	Identity string

	// ServingOptions are what it serves: metrics, health, profiles.
	ServingOptions

	// FeatureGates is the controller's own --feature-gates
	// (MultiClusterServiceClusterSelection).
	FeatureGates featuregate.MutableVersionedFeatureGate
}

// The service models of --service-model.
const (
	ModelNamespaceSameness = "namespace-sameness"
	ModelCatalog           = "catalog"
)

// NewOptions returns the defaults. The clusterset IP ranges and the
// managed-by value are those kube-proxy accepts by default.
func NewOptions() *Options {
	return &Options{
		ServingOptions:    NewServingOptions(),
		ClusterSetIPCIDRs: append([]string(nil), proxy.DefaultClusterSetIPCIDRs...),
		ManagedBy:         proxy.DefaultManagedBy,
		RefusedNamespaces: []string{"kube-system", "default", "kube-public", "kube-node-lease", "mcs-system"},
		SourceManagers:    []string{"endpointslice-controller.k8s.io", "endpointslicemirroring-controller.k8s.io"},
		EndpointTTL:       40 * time.Second,
		// A tenant's share of the default /16: about 1.5 % each.
		MaxClusterSetIPsPerNamespace: 1000,
		MaxForeignImportsPerMember:   100,
		MaxClusterSetIPsPerMember:    2000,
		CatalogObjectsPerTeam:        1000,
		DerivedGrace:                 30 * time.Second,
		IngressServiceType:           string(v1.ServiceTypeNodePort),
		ServiceModel:                 ModelNamespaceSameness,
		LeaseNamespace:               "kube-system",
		Workers:                      8,
		InitialSyncTimeout:           30 * time.Second,
		ClusterIDTimeout:             60 * time.Second,
		APIQPS:                       100,
		MemberSecretsSelector:        inventory.DefaultSelector,
		MemberRecheckPeriod:          30 * time.Second,
		HealthProbesPerTeam:          catalogmodel.DefaultHealthProbesPerTeam,
		HealthProbes:                 catalogmodel.DefaultHealthProbes,
		APIBurst:                     200,
		LeaderElect:                  true,
		LeaderElectLeaseDuration:     15 * time.Second,
		LeaderElectRenewDeadline:     10 * time.Second,
		LeaderElectRetryPeriod:       2 * time.Second,
		FeatureGates:                 features.NewControllerFeatureGate(),
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig holding one context per member cluster (default: $KUBECONFIG or ~/.kube/config).")
	fs.IntVar(&o.MaxClusterSetIPsPerNamespace, "max-clusterset-ips-per-namespace", o.MaxClusterSetIPsPerNamespace, "The most exported names of one namespace (one team's global services in catalog mode) that hold clusterset IPs; a name over it gets none (its export's Ready condition says NoClusterSetIP), so that no tenant exhausts the shared range. Names that hold IPs keep them. 0: no bound.")
	fs.IntVar(&o.MaxClusterSetIPsPerMember, "max-clusterset-ips-per-member", o.MaxClusterSetIPsPerMember, "The most exported names holding clusterset IPs that one member exports: where --export-namespaces does not confine a member, it creates namespaces at will, and the per-namespace bound alone would let it take the shared range one export each. A name gets an IP while one of its exporters is under the bound (its export's Ready condition says NoClusterSetIP otherwise); names that hold IPs keep them. 0: no bound.")
	fs.IntVar(&o.MaxForeignImportsPerMember, "max-foreign-imports-per-member", o.MaxForeignImportsPerMember, "The most ServiceImports someone else wrote in one member whose clusterset IPs are kept from being handed out (each is a possible conflict there); beyond it they reserve nothing, and are logged. The same bound holds the clusterset IPs a restore holds back as disputed on one member's word: beyond it a disputed IP is free again. 0: no bound.")
	fs.StringSliceVar(&o.MemberClusterIDs, "member-cluster-ids", o.MemberClusterIDs, "CONTEXT=ID[,CONTEXT=ID...]: the cluster ID of each member given as a kubeconfig context. A member whose ClusterProperty cluster.clusterset.k8s.io holds another ID is refused (MemberRefused), never served under the ID it chose. A context not named is bound to the ID it answers with at start-up, and never joins as an ID --export-namespaces or --member-pod-cidrs names: state those. Member Secrets state theirs in the annotation "+export.AnnotationMemberClusterID+", ClusterProfiles in their cluster.clusterset.k8s.io property.")
	fs.StringSliceVar(&o.Contexts, "contexts", o.Contexts, "Kubeconfig contexts of the member clusters, comma separated (default: every context). Each member needs the ClusterProperty cluster.clusterset.k8s.io holding its cluster ID.")
	fs.StringVar(&o.MemberSecretsNamespace, "member-secrets-namespace", o.MemberSecretsNamespace, "Namespace of the hub cluster (--hub-context) holding one Secret per member cluster, with its kubeconfig under the key \"kubeconfig\" (inline credentials only: no exec plugins or file paths). Members join and leave as Secrets are created and deleted. With it, --contexts lists only the members given as contexts (default none).")
	fs.StringVar(&o.MemberSecretsSelector, "member-secrets-selector", o.MemberSecretsSelector, "Label selector of the member Secrets.")
	fs.StringVar(&o.InventoryNamespace, "inventory-namespace", o.InventoryNamespace, "Namespace of the hub cluster (--hub-context) holding a Cluster Inventory: ClusterProfiles (multicluster.x-k8s.io/v1alpha1, KEP-4322), each a member candidate, serving while the profile says Joined and ControlPlaneHealthy. The controller reaches each with a credential plugin of --inventory-access-providers for one of the profile's status.accessProviders. With it, --contexts lists only the members given as contexts (default none).")
	fs.StringVar(&o.ClusterSet, "clusterset", o.ClusterSet, "Name of the clusterset this controller serves. A ClusterProfile whose status.properties name another in clusterset.k8s.io, or whose inventory namespace is labelled "+inventoryv1alpha1.LabelClusterSet+" with another, is refused (MemberRefused), and so is one said by neither to be in it. Default: the inventory namespace's label, if any; no check without either.")
	fs.StringVar(&o.InventorySelector, "inventory-selector", o.InventorySelector, "Label selector of the ClusterProfiles that are member candidates, e.g. x-k8s.io/cluster-manager=ocm (default: every profile of --inventory-namespace).")
	fs.StringVar(&o.InventoryAccessProviders, "clusterprofile-provider-file", o.InventoryAccessProviders, "Alias of --inventory-access-providers, the name upstream's ClusterProfile consumers (cluster-inventory-api's pkg/access) give it.")
	fs.BoolVar(&o.InventoryRequireJoined, "inventory-require-joined", o.InventoryRequireJoined, "Serve a ClusterProfile's cluster only while the profile says Joined as well as ControlPlaneHealthy. Off by default: ControlPlaneHealthy is the one condition the ClusterProfile API defines, and not every cluster manager writes Joined.")
	fs.StringVar(&o.InventoryAccessProviders, "inventory-access-providers", o.InventoryAccessProviders, "File naming, per access provider, the exec credential plugin that gives the controller credentials for the clusters of ClusterProfiles (KEP-5339): {\"providers\": [{\"name\": \"<access provider>\", \"execConfig\": {\"apiVersion\": \"client.authentication.k8s.io/v1\", \"command\": \"/path/to/plugin\", \"args\": [...], \"provideClusterInfo\": true}}]}. The only place exec plugins are accepted from: keep it where only the operator writes. Required with --inventory-namespace.")
	fs.StringVar(&o.HubContext, "hub-context", o.HubContext, "Kubeconfig context of the hub cluster holding the member Secrets and, unless --leader-elect-context says otherwise, the leader election Lease (default: the current context).")
	fs.BoolVar(&o.MemberSecretAllowProxy, "member-secret-allow-proxy", o.MemberSecretAllowProxy, "Accept a proxy-url in member Secrets' kubeconfigs. Off by default: whoever writes a member Secret would send the controller's requests, and the member's credentials, through a host of their choosing.")
	fs.DurationVar(&o.MemberRecheckPeriod, "member-recheck-period", o.MemberRecheckPeriod, "How often every member's cluster ID is read again (a changed ID is a member leaving and another joining, KEP-2149) and a member not yet served is tried again.")
	fs.StringSliceVar(&o.ClusterSetIPCIDRs, "clusterset-ip-cidrs", o.ClusterSetIPCIDRs, "Ranges clusterset IPs are allocated from, at most one per IP family; kube-proxy's --clusterset-ip-cidrs must admit them.")
	fs.StringVar(&o.ManagedBy, "managed-by", o.ManagedBy, "endpointslice.kubernetes.io/managed-by value of the EndpointSlices written; kube-proxy trusts "+proxy.DefaultManagedBy+" by default.")
	fs.StringSliceVar(&o.RefusedNamespaces, "refuse-namespaces", o.RefusedNamespaces, "Namespaces whose ServiceExports are refused (KEP-1645 advises kube-system and default; the system namespaces and the controller's own are refused too). Empty refuses none.")
	fs.StringArrayVar(&o.ExportNamespaces, "export-namespaces", o.ExportNamespaces, "CLUSTER=NAMESPACE[,NAMESPACE...]: the only namespaces cluster CLUSTER (its cluster ID) may export from; repeat for each cluster. Once one cluster is named, a cluster not named may export from no namespace (a member that appears under another ID gains nothing); CLUSTER=* names a cluster without confining it. Without the flag every member may export from any namespace not refused.")
	fs.StringSliceVar(&o.SourceManagers, "source-endpointslice-managers", o.SourceManagers, "endpointslice.kubernetes.io/managed-by values of the exported Services' EndpointSlices that are mirrored to other members (default: Kubernetes' EndpointSlice and mirroring controllers). Slices anyone else wrote stay in their cluster.")
	fs.StringArrayVar(&o.MemberPodCIDRs, "member-pod-cidrs", o.MemberPodCIDRs, "CLUSTER=CIDR[,CIDR...]: the ranges the pods of cluster CLUSTER (its cluster ID) get their IPs from, for network plugins that allocate pod IPs without writing the nodes' spec.podCIDRs; repeat the flag or separate clusters with ';'. Where the flag names a member, its endpoints are mirrored only within these ranges: its Node objects, which its own administrator writes, widen nothing. Where it names other members but not this one, nothing says where this member's pods are. A member the flag does not name while it names none has its endpoints mirrored within its nodes' pod CIDRs and addresses. Where nothing says where a member's pods are, only endpoints the EndpointSlice controller wrote for Pods are mirrored from it, and none of Services without a selector.")
	fs.StringSliceVar(&o.DerivedMembers, "derived-members", o.DerivedMembers, "Cluster IDs of the members served in derived mode, comma separated: members whose proxies do not program ServiceImports (upstream kube-proxy, a kube-proxy-free network plugin) get a derived Service per import (derived-<hash>, with EndpointSlices per source cluster) and the import's ips are its cluster IPs. The others are served natively.")
	fs.DurationVar(&o.DerivedGrace, "derived-grace", o.DerivedGrace, "How long a derived Service keeps serving after its member is switched to native mode, for clients that still hold its IPs from earlier DNS answers (at least the DNS TTL of clusterset.local).")
	fs.StringSliceVar(&o.IngressMembers, "ingress-members", o.IngressMembers, "Cluster IDs of the members whose pods the other members cannot reach, nor they the others' (private or overlapping pod networks), comma separated. Between such a member and any other, an export is reached through its cluster's ingress: the exported Service itself when it is a NodePort or LoadBalancer Service, otherwise a Service of --ingress-service-type the controller creates for it (ingress-<hash>); the EndpointSlices the other side gets carry the ingress's addresses and ports instead of pod IPs.")
	fs.StringVar(&o.IngressServiceType, "ingress-service-type", o.IngressServiceType, "Type of the ingress Services the controller creates: NodePort (every ready node is an entry point) or LoadBalancer (the load balancer's address is).")
	fs.StringVar(&o.ServiceModel, "service-model", o.ServiceModel, "How the clusterset says what it serves: "+ModelNamespaceSameness+" (KEP-1645: ServiceExports in the members, merged by namespace and name) or "+ModelCatalog+" (the service catalog in the hub, --hub-context: GlobalServices, ServiceBindings and GlobalServiceImports of catalog.multiclusterservices.k8s.io, for teams that do not share namespaces). A clusterset runs one of them; ServiceExports are not read in catalog mode.")
	fs.IntVar(&o.HealthProbesPerTeam, "catalog-health-probes-per-team", o.HealthProbesPerTeam, "In catalog mode, the most addresses of one team's ServiceBindings (its hub namespace) that health checks probe; the oldest bindings' first. Addresses over the limit are not probed, not ready, and their binding says so (HealthChecked=False, ProbeLimitReached).")
	fs.IntVar(&o.CatalogObjectsPerTeam, "catalog-objects-per-team", o.CatalogObjectsPerTeam, "In catalog mode, the most GlobalServices, ServiceBindings and GlobalServiceImports (each kind on its own) one team's hub namespace may hold; its youngest beyond it are refused (Valid=False, TeamLimitReached), so that no team holds the shared range, probes or resolution time of the others. 0: no bound.")
	fs.IntVar(&o.HealthProbes, "catalog-health-probes", o.HealthProbes, "In catalog mode, the most addresses that health checks probe in all, of every team.")
	fs.DurationVar(&o.EndpointTTL, "endpoint-ttl", o.EndpointTTL, "How long a source cluster's endpoints stay imported after its API was last reached (its Lease duration).")
	fs.StringVar(&o.LeaseNamespace, "lease-namespace", o.LeaseNamespace, "Namespace, in every member, of the per-source-cluster Leases and of the leader election Lease.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Workers per queue (the clusterset queue and each member's queue).")
	fs.DurationVar(&o.InitialSyncTimeout, "initial-sync-timeout", o.InitialSyncTimeout, "How long start-up waits for every member's caches before working with the members that synced.")
	fs.DurationVar(&o.ClusterIDTimeout, "cluster-id-timeout", o.ClusterIDTimeout, "How long start-up retries reading an unreachable member's cluster ID before giving up.")
	fs.Float32Var(&o.APIQPS, "kube-api-qps", o.APIQPS, "Client QPS per member cluster.")
	fs.IntVar(&o.APIBurst, "kube-api-burst", o.APIBurst, "Client burst per member cluster.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader among replicas (a Lease in --lease-namespace of --leader-elect-context) so that only one writes.")
	fs.StringVar(&o.LeaderElectContext, "leader-elect-context", o.LeaderElectContext, "Member context holding the leader election Lease (default: the first member context).")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", o.LeaderElectLeaseDuration, "Leader election lease duration.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectRenewDeadline, "Leader election renew deadline.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", o.LeaderElectRetryPeriod, "Leader election retry period.")
	fs.StringVar(&o.Identity, "identity", o.Identity, "Identity of this replica in Leases (default: hostname and a random suffix).")
	o.ServingOptions.AddFlags(fs)
	o.FeatureGates.AddFlag(fs)
}

// Validate checks the options.
func (o *Options) Validate() error {
	if _, err := proxy.ParseCIDRs(o.ClusterSetIPCIDRs); err != nil {
		return fmt.Errorf("--clusterset-ip-cidrs: %w", err)
	}
	if o.EndpointTTL < time.Second {
		return fmt.Errorf("--endpoint-ttl %s is shorter than a second", o.EndpointTTL)
	}
	if o.ManagedBy == "" {
		return fmt.Errorf("--managed-by must not be empty")
	}
	if msgs := validation.IsValidLabelValue(o.ClusterSet); len(msgs) > 0 {
		return fmt.Errorf("--clusterset %q: %s", o.ClusterSet, strings.Join(msgs, "; "))
	}
	if errs := o.ServingOptions.Validate(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	if o.MaxClusterSetIPsPerNamespace < 0 || o.MaxForeignImportsPerMember < 0 || o.MaxClusterSetIPsPerMember < 0 || o.CatalogObjectsPerTeam < 0 {
		return fmt.Errorf("--max-clusterset-ips-per-namespace, --max-clusterset-ips-per-member, --max-foreign-imports-per-member and --catalog-objects-per-team must not be negative (0: no bound)")
	}
	if _, err := o.exportNamespaces(); err != nil {
		return err
	}
	if _, err := o.memberClusterIDs(); err != nil {
		return err
	}
	if _, err := o.memberPodCIDRs(); err != nil {
		return err
	}
	for _, id := range o.DerivedMembers {
		if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
			return fmt.Errorf("--derived-members: %q is not a cluster ID: %s", id, errs[0])
		}
	}
	for _, id := range o.IngressMembers {
		if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
			return fmt.Errorf("--ingress-members: %q is not a cluster ID: %s", id, errs[0])
		}
	}
	if t := v1.ServiceType(o.IngressServiceType); t != v1.ServiceTypeNodePort && t != v1.ServiceTypeLoadBalancer {
		return fmt.Errorf("--ingress-service-type %q: want %s or %s", o.IngressServiceType, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer)
	}
	if o.ServiceModel != ModelNamespaceSameness && o.ServiceModel != ModelCatalog {
		return fmt.Errorf("--service-model %q: want %s or %s", o.ServiceModel, ModelNamespaceSameness, ModelCatalog)
	}
	if err := checkDerivedGrace(o.DerivedGrace); err != nil {
		return err
	}
	if o.MemberRecheckPeriod <= 0 {
		return fmt.Errorf("--member-recheck-period must be positive")
	}
	if o.HealthProbesPerTeam < 1 || o.HealthProbes < 1 {
		return fmt.Errorf("--catalog-health-probes-per-team and --catalog-health-probes must be at least 1")
	}
	if _, err := labels.Parse(o.MemberSecretsSelector); err != nil {
		return fmt.Errorf("--member-secrets-selector: %w", err)
	}
	if _, err := labels.Parse(o.InventorySelector); err != nil {
		return fmt.Errorf("--inventory-selector: %w", err)
	}
	if len(o.SourceManagers) == 0 {
		return fmt.Errorf("--source-endpointslice-managers must name at least one manager")
	}
	return nil
}

// validateInventory checks what the controller's member inventory needs
// of the flags; the planner reads profiles for their properties only, and
// reaches no member.
func (o *Options) validateInventory() error {
	if (o.InventoryNamespace == "") != (o.InventoryAccessProviders == "") {
		return fmt.Errorf("--inventory-namespace and --inventory-access-providers go together: the profiles say where each cluster is, the operator's file how to get its credentials")
	}
	return nil
}

// exportNamespaces parses --export-namespaces into cluster ID → namespaces.
func (o *Options) exportNamespaces() (map[string][]string, error) {
	out := map[string][]string{}
	for _, v := range o.ExportNamespaces {
		cluster, list, ok := strings.Cut(v, "=")
		cluster = strings.TrimSpace(cluster)
		if !ok || cluster == "" {
			return nil, fmt.Errorf("--export-namespaces %q: want CLUSTER=NAMESPACE[,NAMESPACE...]", v)
		}
		if _, dup := out[cluster]; dup {
			return nil, fmt.Errorf("--export-namespaces: cluster %q is given twice", cluster)
		}
		var namespaces []string
		for _, ns := range strings.Split(list, ",") {
			if ns = strings.TrimSpace(ns); ns == "" {
				continue
			}
			if ns == export.AnyNamespace {
				namespaces = append(namespaces, ns)
				continue
			}
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return nil, fmt.Errorf("--export-namespaces %q: %q is not a namespace name: %s", v, ns, errs[0])
			}
			namespaces = append(namespaces, ns)
		}
		out[cluster] = namespaces
	}
	return out, nil
}

// memberClusterIDs parses --member-cluster-ids into context → cluster ID.
func (o *Options) memberClusterIDs() (map[string]string, error) {
	out := map[string]string{}
	taken := map[string]string{}
	for _, v := range o.MemberClusterIDs {
		name, id, ok := strings.Cut(v, "=")
		name, id = strings.TrimSpace(name), strings.TrimSpace(id)
		if !ok || name == "" || id == "" {
			return nil, fmt.Errorf("--member-cluster-ids %q: want CONTEXT=ID", v)
		}
		if errs := validation.IsDNS1123Subdomain(id); len(errs) > 0 {
			return nil, fmt.Errorf("--member-cluster-ids %q: %q is not a cluster ID: %s", v, id, errs[0])
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--member-cluster-ids: context %q is given twice", name)
		}
		if other, dup := taken[id]; dup {
			return nil, fmt.Errorf("--member-cluster-ids: contexts %q and %q both state cluster ID %q", other, name, id)
		}
		out[name], taken[id] = id, name
	}
	return out, nil
}

// memberPodCIDRs parses --member-pod-cidrs into cluster ID → ranges. A
// range must be a network (no host bits), start outside the
// special-purpose ranges, hold no clusterset IP, and be no broader than a
// /8 (IPv4) or a /16 (IPv6): a pod range that admits everything would
// make the check it feeds pointless.
func (o *Options) memberPodCIDRs() (map[string][]netip.Prefix, error) {
	clusterset, _ := proxy.ParseCIDRs(o.ClusterSetIPCIDRs)
	out := map[string][]netip.Prefix{}
	for _, flag := range o.MemberPodCIDRs {
		for _, v := range strings.Split(flag, ";") {
			if v = strings.TrimSpace(v); v == "" {
				continue
			}
			cluster, list, ok := strings.Cut(v, "=")
			cluster = strings.TrimSpace(cluster)
			if !ok || cluster == "" {
				return nil, fmt.Errorf("--member-pod-cidrs %q: want CLUSTER=CIDR[,CIDR...]", v)
			}
			if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
				return nil, fmt.Errorf("--member-pod-cidrs %q: %q is not a cluster ID: %s", v, cluster, errs[0])
			}
			if _, dup := out[cluster]; dup {
				return nil, fmt.Errorf("--member-pod-cidrs: cluster %q is given twice", cluster)
			}
			var ranges []netip.Prefix
			for _, c := range strings.Split(list, ",") {
				if c = strings.TrimSpace(c); c == "" {
					continue
				}
				p, err := netip.ParsePrefix(c)
				switch {
				case err != nil:
					return nil, fmt.Errorf("--member-pod-cidrs %q: %q is not a CIDR: %w", v, c, err)
				case p != p.Masked():
					return nil, fmt.Errorf("--member-pod-cidrs %q: %s has host bits set (did you mean %s?)", v, c, p.Masked())
				case p.Addr().Is4() && p.Bits() < 8 || p.Addr().Is6() && p.Bits() < 16:
					return nil, fmt.Errorf("--member-pod-cidrs %q: %s is too broad for a pod range (at most a /8 for IPv4, a /16 for IPv6)", v, c)
				}
				if name, special := proxy.SpecialPurpose(p.Addr()); special {
					return nil, fmt.Errorf("--member-pod-cidrs %q: %s is in the %s range, which holds no pods", v, c, name)
				}
				if err := proxy.CheckDisjoint(clusterset, "the pod range of cluster "+cluster, []netip.Prefix{p}); err != nil {
					return nil, fmt.Errorf("--member-pod-cidrs %q: %w", v, err)
				}
				ranges = append(ranges, p)
			}
			if len(ranges) == 0 {
				return nil, fmt.Errorf("--member-pod-cidrs %q: no range for cluster %q", v, cluster)
			}
			out[cluster] = ranges
		}
	}
	return out, nil
}

// checkDerivedGrace says why --derived-grace cannot be d, the controller's
// and the member agent's alike.
func checkDerivedGrace(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--derived-grace %s is negative", d)
	}
	return nil
}

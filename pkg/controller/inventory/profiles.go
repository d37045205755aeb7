package inventory

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
	"sigs.k8s.io/yaml"
)

// ErrInvalidProfile is why a ClusterProfile is refused as a member.
var ErrInvalidProfile = errors.New("invalid ClusterProfile")

// AccessProvider is one credential plugin the operator allows, for the
// access provider of its name (KEP-5339).
type AccessProvider struct {
	Name string
	Exec *clientcmdapi.ExecConfig
	// CLIArgsPolicy and EnvVarsPolicy say what a profile's reserved exec
	// extensions may add to the plugin's arguments and environment
	// (ExtensionAdditionalArgs, ExtensionAdditionalEnvs), as upstream's
	// pkg/access reads them: Ignore (the default) or Append; Ignore,
	// AppendIfNotExists (the operator's values win) or Replace (the
	// profile's win).
	CLIArgsPolicy, EnvVarsPolicy string
	// EnvVarNames are the only variables a profile may set, and ArgFlags
	// the only flags it may pass (each as one FLAG=VALUE argument), as
	// the operator names them: what a hub writer adds to a command the
	// controller runs is named by the operator, never guarded by a list
	// of what it may not add.
	EnvVarNames, ArgFlags []string
}

// The profile-sourced extension policies (KEP-5339, pkg/access).
const (
	PolicyIgnore            = "Ignore"
	PolicyAppend            = "Append"
	PolicyAppendIfNotExists = "AppendIfNotExists"
	PolicyReplace           = "Replace"
)

// The reserved extensions of a profile's access provider entry that add
// to the plugin's command line and environment (KEP-5339).
const (
	ExtensionAdditionalArgs = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
	ExtensionAdditionalEnvs = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"
)

// AccessProviders are the credential plugins the operator allows, in the
// order of the operator's file, which is the order they are tried in: the
// operator, not whoever writes the profile, decides which plugin runs.
// They come from a file the operator writes (--inventory-access-providers,
// alias --clusterprofile-provider-file), never from the hub: a plugin runs
// in the controller's process with its identity, so whoever may write
// ClusterProfiles chooses only which of these runs, for which server, and
// what the operator's policies let them add.
type AccessProviders []AccessProvider

// named returns the provider of that name, or nil.
func (a AccessProviders) named(name string) *AccessProvider {
	for i := range a {
		if a[i].Name == name {
			return &a[i]
		}
	}
	return nil
}

// accessProvidersFile is the file's format, the one of upstream's
// pkg/access provider configuration (cluster-inventory-api).
type accessProvidersFile struct {
	Providers []struct {
		Name                        string                  `json:"name"`
		ExecConfig                  *clientcmdv1.ExecConfig `json:"execConfig"`
		ProfileSourcedCLIArgsPolicy string                  `json:"profileSourcedCLIArgsPolicy,omitempty"`
		ProfileSourcedEnvVarsPolicy string                  `json:"profileSourcedEnvVarsPolicy,omitempty"`
		// This controller's own: the variables and flags a profile may
		// add, with the policies above (required with any but Ignore).
		ProfileSourcedEnvVarNames []string `json:"profileSourcedEnvVarNames,omitempty"`
		ProfileSourcedArgFlags    []string `json:"profileSourcedArgFlags,omitempty"`
	} `json:"providers"`
}

// envVarName is an environment variable's name as POSIX shells take
// one: a name holding "=" (PATH=/dir:...) would pass a comparison of
// names and still set another variable.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// argFlag is a command-line flag a profile may be allowed to pass.
var argFlag = regexp.MustCompile(`^--?[A-Za-z0-9][A-Za-z0-9._-]*$`)

// loadsCode says whether a variable chooses code that runs in or beside
// the plugin: the search path, the dynamic loader's, the shell's start-up
// files, and the controller's plugin runner's (pluginruns.go). No
// operator file may hand them to profile writers.
func loadsCode(name string) bool {
	return name == "PATH" || name == "BASH_ENV" || name == "ENV" || strings.HasPrefix(name, "LD_") ||
		strings.HasPrefix(name, "DYLD_") || isRunnerVariable(name)
}

// LoadAccessProviders reads the operator's access provider file (JSON or
// YAML), upstream's format: {"providers": [{"name": "<access provider>",
// "execConfig": <a kubeconfig user's exec entry>,
// "profileSourcedCLIArgsPolicy": "Append", "profileSourcedEnvVarsPolicy":
// "AppendIfNotExists"}]}.
func LoadAccessProviders(path string) (AccessProviders, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseAccessProviders(data)
}

// ParseAccessProviders parses the content of an access provider file.
func ParseAccessProviders(data []byte) (AccessProviders, error) {
	var f accessProvidersFile
	if err := yamlOrJSON(data, &f); err != nil {
		return nil, fmt.Errorf("access providers: %w", err)
	}
	var out AccessProviders
	for i, p := range f.Providers {
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("access providers: entry %d has no name", i)
		case out.named(p.Name) != nil:
			return nil, fmt.Errorf("access providers: %q is given twice", p.Name)
		case p.ExecConfig == nil || p.ExecConfig.Command == "":
			return nil, fmt.Errorf("access providers: %q names no execConfig.command", p.Name)
		case !slices.Contains([]string{"", PolicyIgnore, PolicyAppend}, p.ProfileSourcedCLIArgsPolicy):
			return nil, fmt.Errorf("access providers: %q: profileSourcedCLIArgsPolicy %q: want %s or %s", p.Name, p.ProfileSourcedCLIArgsPolicy, PolicyIgnore, PolicyAppend)
		case !slices.Contains([]string{"", PolicyIgnore, PolicyAppendIfNotExists, PolicyReplace}, p.ProfileSourcedEnvVarsPolicy):
			return nil, fmt.Errorf("access providers: %q: profileSourcedEnvVarsPolicy %q: want %s, %s or %s", p.Name, p.ProfileSourcedEnvVarsPolicy, PolicyIgnore, PolicyAppendIfNotExists, PolicyReplace)
		}
		if err := checkProfileSourced(p.ProfileSourcedCLIArgsPolicy, p.ProfileSourcedEnvVarsPolicy, p.ProfileSourcedArgFlags, p.ProfileSourcedEnvVarNames); err != nil {
			return nil, fmt.Errorf("access providers: %q: %w", p.Name, err)
		}
		var exec clientcmdapi.ExecConfig
		if err := clientcmdv1.Convert_v1_ExecConfig_To_api_ExecConfig(p.ExecConfig, &exec, nil); err != nil {
			return nil, fmt.Errorf("access providers: %q: %w", p.Name, err)
		}
		switch exec.APIVersion {
		case "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1":
		default:
			return nil, fmt.Errorf("access providers: %q: execConfig.apiVersion %q: want client.authentication.k8s.io/v1 or v1beta1", p.Name, exec.APIVersion)
		}
		// The controller has no terminal: a plugin that asks for one
		// would hang a member's join.
		exec.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
		out = append(out, AccessProvider{Name: p.Name, Exec: &exec,
			CLIArgsPolicy: cmp.Or(p.ProfileSourcedCLIArgsPolicy, PolicyIgnore), EnvVarsPolicy: cmp.Or(p.ProfileSourcedEnvVarsPolicy, PolicyIgnore),
			EnvVarNames: p.ProfileSourcedEnvVarNames, ArgFlags: p.ProfileSourcedArgFlags})
	}
	if len(out) == 0 {
		return nil, errors.New("access providers: the file names no provider")
	}
	return out, nil
}

// checkProfileSourced checks what the operator lets profiles add: a
// policy other than Ignore takes only what the allowlist beside it names
// (an Append of any argument or variable would let whoever writes
// profiles choose the plugin's behaviour), and the allowlists name valid
// flags and variables, none of them one that loads code.
func checkProfileSourced(argsPolicy, envPolicy string, flags, names []string) error {
	if cmp.Or(argsPolicy, PolicyIgnore) != PolicyIgnore && len(flags) == 0 {
		return fmt.Errorf("profileSourcedCLIArgsPolicy %s takes only the flags profileSourcedArgFlags names; name them", argsPolicy)
	}
	if cmp.Or(envPolicy, PolicyIgnore) != PolicyIgnore && len(names) == 0 {
		return fmt.Errorf("profileSourcedEnvVarsPolicy %s takes only the variables profileSourcedEnvVarNames names; name them", envPolicy)
	}
	for _, f := range flags {
		if !argFlag.MatchString(f) {
			return fmt.Errorf("profileSourcedArgFlags: %q is not a flag (-name or --name)", f)
		}
	}
	for _, n := range names {
		switch {
		case !envVarName.MatchString(n):
			return fmt.Errorf("profileSourcedEnvVarNames: %q is not a variable name", n)
		case loadsCode(n):
			return fmt.Errorf("profileSourcedEnvVarNames: %s chooses code the controller would run; it is never taken from a profile", n)
		}
	}
	return nil
}

// ProfileAccess picks, as upstream's pkg/access does, the access provider
// entry of a profile for the first of the operator's providers (in the
// file's order) that the profile offers: status.accessProviders, or the
// deprecated status.credentialProviders, an accessProviders entry
// overriding a credentialProviders one of the same name.
func ProfileAccess(cp *inventoryv1alpha1.ClusterProfile, providers AccessProviders) (*inventoryv1alpha1.AccessProvider, *AccessProvider, error) {
	offered := map[string]*inventoryv1alpha1.AccessProvider{}
	for _, list := range [][]inventoryv1alpha1.AccessProvider{cp.Status.CredentialProviders, cp.Status.AccessProviders} {
		for i := range list {
			offered[list[i].Name] = &list[i]
		}
	}
	for i := range providers {
		if ap := offered[providers[i].Name]; ap != nil {
			return ap, &providers[i], nil
		}
	}
	if len(offered) == 0 {
		return nil, nil, fmt.Errorf("%w: its status lists no access provider (status.accessProviders)", ErrInvalidProfile)
	}
	names := slices.Sorted(maps.Keys(offered))
	return nil, nil, fmt.Errorf("%w: no credential plugin for its access providers %s in --inventory-access-providers", ErrInvalidProfile, strings.Join(names, ", "))
}

// profileSourced adds to exec what the profile's reserved extensions ask,
// as the operator's policies for provider p allow (upstream's rules), and
// only what p's allowlists name: a variable whose name is a valid name on
// EnvVarNames, an argument FLAG=VALUE whose FLAG is on ArgFlags. Anything
// else refuses the profile, naming what it asked: a plugin runs with the
// controller's identity, and whoever writes profiles is not the operator.
func profileSourced(exec *clientcmdapi.ExecConfig, p *AccessProvider, exts []inventoryv1alpha1.NamedExtension) error {
	for _, ext := range exts {
		switch {
		case ext.Name == ExtensionAdditionalArgs && p.CLIArgsPolicy == PolicyAppend:
			var args []string
			if err := yaml.Unmarshal(ext.Extension.Raw, &args); err != nil {
				return fmt.Errorf("extension %s: want a list of strings: %v", ext.Name, err)
			}
			for _, a := range args {
				flag, _, ok := strings.Cut(a, "=")
				if !ok || !slices.Contains(p.ArgFlags, flag) {
					return fmt.Errorf("extension %s: argument %q is not FLAG=VALUE with a flag the operator lets profiles pass (%s)", ext.Name, a, strings.Join(p.ArgFlags, ", "))
				}
			}
			exec.Args = append(exec.Args, args...)
		case ext.Name == ExtensionAdditionalEnvs && p.EnvVarsPolicy != PolicyIgnore:
			var envs map[string]string
			if err := yaml.Unmarshal(ext.Extension.Raw, &envs); err != nil {
				return fmt.Errorf("extension %s: want a map of names to values: %v", ext.Name, err)
			}
			for _, name := range slices.Sorted(maps.Keys(envs)) {
				if !envVarName.MatchString(name) || !slices.Contains(p.EnvVarNames, name) {
					return fmt.Errorf("extension %s: variable %q is not one the operator lets profiles set (%s)", ext.Name, name, strings.Join(p.EnvVarNames, ", "))
				}
			}
			merged := map[string]string{}
			for _, e := range exec.Env {
				merged[e.Name] = e.Value
			}
			for name, value := range envs {
				if _, operators := merged[name]; !operators || p.EnvVarsPolicy == PolicyReplace {
					merged[name] = value
				}
			}
			exec.Env = exec.Env[:0]
			for _, name := range slices.Sorted(maps.Keys(merged)) {
				exec.Env = append(exec.Env, clientcmdapi.ExecEnvVar{Name: name, Value: merged[name]})
			}
		}
	}
	return nil
}

// ConfigFromProfile builds a member's client configuration from the
// profile's access provider entry (where: server, CA) and the operator's
// credential plugin for it (who: the plugin's credentials, refreshed by
// client-go's exec support whenever they expire or the server answers
// 401). The entry is held to the rules of a member Secret's cluster
// (checkCluster): whoever writes profiles picks the server, and the
// plugin's token goes there.
func ConfigFromProfile(cp *inventoryv1alpha1.ClusterProfile, providers AccessProviders, allowProxy bool) (*rest.Config, string, error) {
	ap, provider, err := ProfileAccess(cp, providers)
	if err != nil {
		return nil, "", err
	}
	c := ap.Cluster
	if err := checkCluster(c.Server, c.CertificateAuthority, c.InsecureSkipTLSVerify, c.ProxyURL, allowProxy); err != nil {
		return nil, "", fmt.Errorf("%w: access provider %q: %v", ErrInvalidProfile, ap.Name, err)
	}
	kc := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server, cluster.TLSServerName, cluster.CertificateAuthorityData = c.Server, c.TLSServerName, c.CertificateAuthorityData
	cluster.ProxyURL, cluster.DisableCompression = c.ProxyURL, c.DisableCompression
	exec := provider.Exec.DeepCopy()
	exec.Env = slices.Clone(exec.Env)
	if err := profileSourced(exec, provider, c.Extensions); err != nil {
		return nil, "", fmt.Errorf("%w: access provider %q: %v", ErrInvalidProfile, ap.Name, err)
	}
	for _, ext := range c.Extensions {
		// KEP-541's per-cluster plugin configuration, given to the
		// plugin in its ExecCredential's spec.cluster.config when the
		// operator's entry sets provideClusterInfo.
		if ext.Name == "client.authentication.k8s.io/exec" && len(ext.Extension.Raw) > 0 {
			exec.Config = &runtime.Unknown{Raw: ext.Extension.Raw, ContentType: runtime.ContentTypeJSON}
			cluster.Extensions[ext.Name] = exec.Config
		}
	}
	user := clientcmdapi.NewAuthInfo()
	user.Exec = exec
	kc.Clusters["member"], kc.AuthInfos["member"] = cluster, user
	kc.Contexts["member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "member"}
	kc.CurrentContext = "member"
	cfg, err := clientConfig(kc)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrInvalidProfile, err)
	}
	// The hash tells a changed entry (new server or CA: new clients) from
	// the same one.
	raw, _ := json.Marshal(ap)
	return cfg, hashOf(raw), nil
}

// ProfileSaysServe says whether the profile says its cluster may be
// served: its control plane healthy (ControlPlaneHealthy, the one
// condition upstream's API defines, and the one other consumers gate on),
// and with requireJoined also joined to its cluster manager (Joined, which
// not every manager writes). A condition missing is not a yes: a cluster
// manager that has not said so yet has not said so.
func ProfileSaysServe(cp *inventoryv1alpha1.ClusterProfile, requireJoined bool) (bool, string) {
	conds := []string{inventoryv1alpha1.ConditionControlPlaneHealthy}
	if requireJoined {
		conds = []string{inventoryv1alpha1.ConditionJoined, inventoryv1alpha1.ConditionControlPlaneHealthy}
	}
	for _, t := range conds {
		c := meta.FindStatusCondition(cp.Status.Conditions, t)
		switch {
		case c == nil:
			return false, fmt.Sprintf("the profile has no %s condition yet", t)
		case c.Status != metav1.ConditionTrue:
			return false, fmt.Sprintf("the profile says %s=%s (%s)", t, c.Status, c.Reason)
		}
	}
	return true, ""
}

// ProfileClusterID is the cluster ID a profile states in its properties
// (KEP-2149's cluster.clusterset.k8s.io), or "".
func ProfileClusterID(cp *inventoryv1alpha1.ClusterProfile) string {
	for _, p := range cp.Status.Properties {
		if p.Name == clusterIDProperty {
			return p.Value
		}
	}
	return ""
}

// ProfileClusterSet is the clusterset a profile's properties say its
// cluster is in (KEP-2149's clusterset.k8s.io), or "".
func ProfileClusterSet(cp *inventoryv1alpha1.ClusterProfile) string {
	for _, p := range cp.Status.Properties {
		if p.Name == aboutv1alpha1.ClusterSetProperty {
			return p.Value
		}
	}
	return ""
}

// ErrOtherClusterSet is why a profile of another clusterset's cluster is
// refused.
var ErrOtherClusterSet = errors.New("the cluster is in another clusterset")

// checkClusterSet refuses a profile whose cluster is not in the clusterset
// the controller serves. property is the profile's clusterset.k8s.io,
// namespace the inventory namespace's label multicluster.x-k8s.io/clusterset
// (the clusterset its profiles form, KEP-4322; "" when missing or
// unreadable), operator the operator's --clusterset. The clusterset served
// is the operator's, else the namespace's; a profile says its own with the
// property, else it is the namespace's. An operator who names a clusterset
// admits only profiles positively said to be in it: a profile that says
// nothing, in a namespace whose label is missing or could not be read, is
// refused. Nothing is checked when neither the operator nor the namespace
// names one.
func checkClusterSet(property, namespace, operator string) error {
	served := cmp.Or(operator, namespace)
	profile := cmp.Or(property, namespace)
	switch {
	case served == "" || profile == served:
		return nil
	case profile == "":
		return fmt.Errorf("%w: neither its profile's property %s nor its inventory namespace's label %s says it is in clusterset %q, which this controller serves (--clusterset admits only profiles said to be in it)", ErrOtherClusterSet, aboutv1alpha1.ClusterSetProperty, inventoryv1alpha1.LabelClusterSet, served)
	case property != "":
		return fmt.Errorf("%w: its profile's property %s names clusterset %q, and this controller serves %q", ErrOtherClusterSet, aboutv1alpha1.ClusterSetProperty, property, served)
	}
	return fmt.Errorf("%w: its inventory namespace is labelled %s=%s, and this controller serves %q (--clusterset)", ErrOtherClusterSet, inventoryv1alpha1.LabelClusterSet, namespace, served)
}

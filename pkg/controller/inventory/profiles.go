package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventoryv1alpha1 "k8s.io/multiclusterservices/apis/inventory/v1alpha1"
)

// ErrInvalidProfile is why a ClusterProfile is refused as a member.
var ErrInvalidProfile = errors.New("invalid ClusterProfile")

// AccessProviders are the credential plugins the operator allows, by
// access provider name (KEP-5339). They come from a file the operator
// writes (--inventory-access-providers), never from the hub: a plugin
// runs in the controller's process with its identity, so whoever may
// write ClusterProfiles chooses only which of these runs, and for which
// server.
type AccessProviders map[string]*clientcmdapi.ExecConfig

// accessProvidersFile is the file's format, the one of the KEP-5339
// library's provider configuration.
type accessProvidersFile struct {
	Providers []struct {
		Name       string                  `json:"name"`
		ExecConfig *clientcmdv1.ExecConfig `json:"execConfig"`
	} `json:"providers"`
}

// LoadAccessProviders reads the operator's access provider file (JSON or
// YAML): {"providers": [{"name": "<access provider>", "execConfig":
// <a kubeconfig user's exec entry>}]}.
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
	out := AccessProviders{}
	for i, p := range f.Providers {
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("access providers: entry %d has no name", i)
		case out[p.Name] != nil:
			return nil, fmt.Errorf("access providers: %q is given twice", p.Name)
		case p.ExecConfig == nil || p.ExecConfig.Command == "":
			return nil, fmt.Errorf("access providers: %q names no execConfig.command", p.Name)
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
		out[p.Name] = &exec
	}
	if len(out) == 0 {
		return nil, errors.New("access providers: the file names no provider")
	}
	return out, nil
}

// ProfileAccess picks the access provider entry of a profile that the
// operator has a plugin for: status.accessProviders in the profile's
// order, then the deprecated status.credentialProviders.
func ProfileAccess(cp *inventoryv1alpha1.ClusterProfile, providers AccessProviders) (*inventoryv1alpha1.AccessProvider, error) {
	var offered []string
	for _, list := range [][]inventoryv1alpha1.AccessProvider{cp.Status.AccessProviders, cp.Status.CredentialProviders} {
		for i := range list {
			if providers[list[i].Name] != nil {
				return &list[i], nil
			}
			offered = append(offered, list[i].Name)
		}
	}
	if len(offered) == 0 {
		return nil, fmt.Errorf("%w: its status lists no access provider (status.accessProviders)", ErrInvalidProfile)
	}
	slices.Sort(offered)
	return nil, fmt.Errorf("%w: no credential plugin for its access providers %s in --inventory-access-providers", ErrInvalidProfile, strings.Join(slices.Compact(offered), ", "))
}

// ConfigFromProfile builds a member's client configuration from the
// profile's access provider entry (where: server, CA) and the operator's
// credential plugin for it (who: the plugin's credentials, refreshed by
// client-go's exec support whenever they expire or the server answers
// 401). The entry is held to the rules of a member Secret's cluster
// (checkCluster): whoever writes profiles picks the server, and the
// plugin's token goes there.
func ConfigFromProfile(cp *inventoryv1alpha1.ClusterProfile, providers AccessProviders, allowProxy bool) (*rest.Config, string, error) {
	ap, err := ProfileAccess(cp, providers)
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
	exec := providers[ap.Name].DeepCopy()
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
// served: joined to its cluster manager and its control plane healthy
// (KEP-4322's conditions). A condition missing is not a yes: a cluster
// manager that has not said so yet has not said so.
func ProfileSaysServe(cp *inventoryv1alpha1.ClusterProfile) (bool, string) {
	for _, t := range []string{inventoryv1alpha1.ConditionJoined, inventoryv1alpha1.ConditionControlPlaneHealthy} {
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

// profileClusterID is the cluster ID a profile states in its properties
// (KEP-2149's cluster.clusterset.k8s.io), or "".
func profileClusterID(cp *inventoryv1alpha1.ClusterProfile) string {
	for _, p := range cp.Status.Properties {
		if p.Name == clusterIDProperty {
			return p.Value
		}
	}
	return ""
}

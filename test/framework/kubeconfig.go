package framework

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigFor builds a kubeconfig with a single context named after the
// cluster, for the identity in cfg (bearer token, optionally impersonating).
func kubeconfigFor(clusterName string, cfg *rest.Config) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	addContext(kc, clusterName, cfg)
	kc.CurrentContext = clusterName
	return kc
}

// addContext adds cluster, user and context entries all named name.
func addContext(kc *clientcmdapi.Config, name string, cfg *rest.Config) {
	cluster := clientcmdapi.NewCluster()
	cluster.Server = cfg.Host
	cluster.CertificateAuthorityData = cfg.CAData
	kc.Clusters[name] = cluster

	user := clientcmdapi.NewAuthInfo()
	user.Token = cfg.BearerToken
	user.Impersonate = cfg.Impersonate.UserName
	user.ImpersonateGroups = cfg.Impersonate.Groups
	kc.AuthInfos[name] = user

	kcContext := clientcmdapi.NewContext()
	kcContext.Cluster = name
	kcContext.AuthInfo = name
	kc.Contexts[name] = kcContext
}

// WriteClusterSetKubeconfig writes one kubeconfig holding a context per
// cluster (named after the cluster, for the admin user), the shape that
// multi-cluster tools such as the mcs-controller take. The first cluster's
// context is the current one.
func WriteClusterSetKubeconfig(path string, clusters ...*Cluster) error {
	return writeClusterSetKubeconfig(path, (*Cluster).RESTConfig, clusters)
}

// WriteImpersonatingClusterSetKubeconfig writes the same, acting in every
// cluster as user in groups (by impersonation through the admin), so that
// a multi-cluster tool has only what RBAC grants that identity.
func WriteImpersonatingClusterSetKubeconfig(path, user string, groups []string, clusters ...*Cluster) error {
	return writeClusterSetKubeconfig(path, func(c *Cluster) *rest.Config {
		cfg := c.RESTConfig()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: slices.Clone(groups)}
		return cfg
	}, clusters)
}

func writeClusterSetKubeconfig(path string, config func(*Cluster) *rest.Config, clusters []*Cluster) error {
	if len(clusters) == 0 {
		return fmt.Errorf("no clusters")
	}
	kc := clientcmdapi.NewConfig()
	for _, c := range clusters {
		if _, dup := kc.Contexts[c.Name()]; dup {
			return fmt.Errorf("two clusters named %q", c.Name())
		}
		addContext(kc, c.Name(), config(c))
	}
	kc.CurrentContext = clusters[0].Name()
	return clientcmd.WriteToFile(*kc, path)
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// kubeconfigPath returns where the kubeconfig of user is written in dir;
// user names such as system:node:n1 are made file-name safe.
func kubeconfigPath(dir, prefix, user string) string {
	return filepath.Join(dir, prefix+unsafeFileChars.ReplaceAllString(user, "_")+".kubeconfig")
}

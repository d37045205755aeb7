package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	aboutv1alpha1 "k8s.io/multiclusterservices/apis/about/v1alpha1"
)

// clusterIDProperty is the ClusterProperty holding a cluster's ID.
const clusterIDProperty = aboutv1alpha1.ClusterIDProperty

// yamlOrJSON decodes an operator's file strictly: a misspelt field is
// an error, not a default.
func yamlOrJSON(data []byte, into any) error {
	return yaml.UnmarshalStrict(data, into)
}

// KubeconfigKey is the key of a member Secret's data that holds the
// member's kubeconfig (its current context is used).
const KubeconfigKey = "kubeconfig"

// ErrInvalidKubeconfig is why a member Secret is refused.
var ErrInvalidKubeconfig = errors.New("invalid member kubeconfig")

// ConfigFromKubeconfig turns a member Secret's kubeconfig into a client
// configuration. Anyone who may write Secrets in the inventory's namespace
// chooses what the controller runs, reads and connects to, so:
//   - only inline credentials are accepted: an exec credential plugin or
//     an auth-provider would run a command or a plugin in the
//     controller's process, and a file path (certificate-authority,
//     client-certificate, client-key, tokenFile) would make it read and
//     send its own files, such as its service account token;
//   - the server is an https URL (checkServer), whose certificate is
//     verified: insecure-skip-tls-verify, or http://, would hand the
//     member's credentials to whoever sits on the path;
//   - no proxy-url unless allowProxy (--member-secret-allow-proxy): it
//     would send the controller's requests, and the member's
//     credentials, through a host of the Secret writer's choosing.
func ConfigFromKubeconfig(data []byte, allowProxy bool) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: no %q key", ErrInvalidKubeconfig, KubeconfigKey)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKubeconfig, err)
	}
	name := kc.CurrentContext
	if name == "" && len(kc.Contexts) == 1 {
		for n := range kc.Contexts {
			name = n
		}
	}
	kctx, ok := kc.Contexts[name]
	if !ok {
		return nil, fmt.Errorf("%w: no current context (set current-context, or hold exactly one context)", ErrInvalidKubeconfig)
	}
	cluster, ok := kc.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("%w: context %q names no cluster of the kubeconfig", ErrInvalidKubeconfig, name)
	}
	if err := checkCluster(cluster.Server, cluster.CertificateAuthority, cluster.InsecureSkipTLSVerify, cluster.ProxyURL, allowProxy); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKubeconfig, err)
	}
	if user, ok := kc.AuthInfos[kctx.AuthInfo]; ok {
		switch {
		case user.Exec != nil:
			return nil, fmt.Errorf("%w: exec credential plugins are not accepted (the controller would run %q); give a token or client certificate data", ErrInvalidKubeconfig, user.Exec.Command)
		case user.AuthProvider != nil:
			return nil, fmt.Errorf("%w: auth-provider plugins are not accepted; give a token or client certificate data", ErrInvalidKubeconfig)
		case user.TokenFile != "":
			return nil, fmt.Errorf("%w: tokenFile is a file path; give token", ErrInvalidKubeconfig)
		case user.ClientCertificate != "" || user.ClientKey != "":
			return nil, fmt.Errorf("%w: client-certificate and client-key are file paths; give client-certificate-data and client-key-data", ErrInvalidKubeconfig)
		}
	} else if kctx.AuthInfo != "" {
		return nil, fmt.Errorf("%w: context %q names no user of the kubeconfig", ErrInvalidKubeconfig, name)
	}
	kc.CurrentContext = name
	cfg, err := clientConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKubeconfig, err)
	}
	return cfg, nil
}

// clientConfig turns a kubeconfig into a client configuration with no
// loading rules: nothing of the controller's own environment
// ($KUBECONFIG, in-cluster credentials) is merged into a member's.
func clientConfig(kc *clientcmdapi.Config) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveClientConfig(*kc, kc.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
}

// checkCluster holds a member's cluster entry, from a Secret's kubeconfig
// or a ClusterProfile's access provider, to what a clusterset's
// administrator would mean by a member's apiserver: a CA given inline
// (a path would make the controller read its own files), the server's
// certificate checked (insecure-skip-tls-verify would hand the member's
// credentials to whoever sits on the path), no proxy unless allowed (it
// would send every request and the credentials through a host of the
// writer's choosing), and a plain https server (checkServer).
func checkCluster(server, caFile string, insecure bool, proxyURL string, allowProxy bool) error {
	switch {
	case caFile != "":
		return errors.New("certificate-authority is a file path; give certificate-authority-data")
	case insecure:
		return errors.New("insecure-skip-tls-verify is not accepted (anyone on the path could take the member's credentials); give certificate-authority-data")
	case proxyURL != "" && !allowProxy:
		return errors.New("proxy-url is not accepted unless the controller runs with --member-secret-allow-proxy")
	}
	return checkServer(server)
}

// checkServer refuses a server URL that a clusterset's administrator
// would not mean for a member's apiserver: not https (http:// sends the
// member's token in clear), credentials in the URL, a query or fragment,
// or a path other than a plain prefix (a proxying front end's
// /k8s/clusters/c-1): dot segments, escapes, or an API path such as an
// apiserver's service proxy (/api/v1/namespaces/.../proxy), through
// which the controller would reach something else than an apiserver.
// The URL is said without its credentials.
func checkServer(server string) error {
	u, err := url.Parse(server)
	if err != nil {
		return errors.New("the server is not a URL")
	}
	switch {
	case u.User != nil:
		return fmt.Errorf("server %s carries credentials in its URL; give them as the user's", u.Redacted())
	case u.Scheme != "https":
		return fmt.Errorf("server %s is not https: the member's credentials would cross the network in clear", u.Redacted())
	case u.Host == "" || u.Opaque != "":
		return fmt.Errorf("server %s names no host", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fmt.Errorf("server %s has a query or fragment; give the apiserver's address", u.Redacted())
	case u.RawPath != "":
		return fmt.Errorf("server %s has an escaped path; give the apiserver's address", u.Redacted())
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		for _, seg := range strings.Split(p, "/") {
			if seg == "" || seg == "." || seg == ".." || seg == "api" || seg == "apis" {
				return fmt.Errorf("server %s has a path into an API, or that is not plain; give the apiserver's address", u.Redacted())
			}
		}
	}
	return nil
}

// hashOf identifies a kubeconfig's content, to tell a changed Secret.
func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

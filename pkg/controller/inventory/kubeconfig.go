package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeconfigKey is the key of a member Secret's data that holds the
// member's kubeconfig (its current context is used).
const KubeconfigKey = "kubeconfig"

// ErrInvalidKubeconfig is why a member Secret is refused.
var ErrInvalidKubeconfig = errors.New("invalid member kubeconfig")

// ConfigFromKubeconfig turns a member Secret's kubeconfig into a client
// configuration. Anyone who may write Secrets in the inventory's namespace
// chooses what the controller runs and reads, so only inline credentials
// are accepted: an exec credential plugin or an auth-provider would run a
// command or a plugin in the controller's process, and a file path
// (certificate-authority, client-certificate, client-key, tokenFile) would
// make it read and send its own files, such as its service account token.
func ConfigFromKubeconfig(data []byte) (*rest.Config, error) {
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
	if cluster.CertificateAuthority != "" {
		return nil, fmt.Errorf("%w: certificate-authority is a file path; give certificate-authority-data", ErrInvalidKubeconfig)
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
	// No loading rules: nothing of the controller's own environment
	// ($KUBECONFIG, in-cluster credentials) is merged into a member's.
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*kc, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKubeconfig, err)
	}
	return cfg, nil
}

// hashOf identifies a kubeconfig's content, to tell a changed Secret.
func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

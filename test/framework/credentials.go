package framework

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/csv"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
)

// User is an identity that the apiserver authenticates by a static bearer
// token. kube-apiserver reads its token file once at start-up, so users are
// declared in ClusterOptions.ExtraUsers rather than added later.
type User struct {
	Name   string
	Groups []string
	// Token is the bearer token; a random one is generated when empty.
	Token string
}

// AdminUser is the name of the built-in admin, a member of system:masters.
const AdminUser = "admin"

// ControllerManagerUser is kube-controller-manager's identity, as kubeadm
// and every production control plane give it: the bootstrap RBAC binds it
// the system:kube-controller-manager role, and with
// --use-service-account-credentials each controller then acts as its own
// service account in kube-system (the EndpointSlice controller as
// endpointslice-controller), which is what admission policies see.
const ControllerManagerUser = "system:kube-controller-manager"

// randomToken returns 32 random hex characters.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// writeTokenFile writes users in the format of --token-auth-file:
// token,user,uid,"group1,group2".
func writeTokenFile(path string, users []User) error {
	var b strings.Builder
	w := csv.NewWriter(&b)
	for _, u := range users {
		if err := w.Write([]string{u.Token, u.Name, u.Name, strings.Join(u.Groups, ",")}); err != nil {
			return err
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// writeServiceAccountKey generates the RSA key that signs service account
// tokens, writing the private key (PKCS#1 PEM) to keyPath and the public key
// (PKIX PEM) to pubPath.
func writeServiceAccountKey(keyPath, pubPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service account key: %w", err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(keyPath, priv, 0o600); err != nil {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}

// caFromServingCert returns the last certificate of the PEM bundle that
// kube-apiserver writes into --cert-dir when it generates its own serving
// certificate: the leaf followed by the self-signed CA that issued it.
func caFromServingCert(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var last *pem.Block
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			last = block
		}
	}
	if last == nil {
		return nil, fmt.Errorf("%s: no certificate yet", path)
	}
	return pem.EncodeToMemory(last), nil
}

package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// KubeletClientUser is the identity kube-apiserver presents to kubelets (its
// --kubelet-client-certificate), in system:masters as kubeadm's is, so
// that a kubelet's authorization check (a SubjectAccessReview for
// nodes/proxy) allows it.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// kubeletPKI is the certificate authority of a cluster's kubelet API: it
// signs the apiserver's client certificate and every kubelet's serving
// certificate, and both sides check the other against it, as
// --kubelet-certificate-authority and a kubelet's --client-ca-file do.
type kubeletPKI struct {
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	pool  *x509.CertPool
}

func (c *Cluster) kubeletCAFile() string    { return filepath.Join(c.certDir(), "kubelet-ca.crt") }
func (c *Cluster) kubeletCAKeyFile() string { return filepath.Join(c.certDir(), "kubelet-ca.key") }
func (c *Cluster) kubeletClientCertFile() string {
	return filepath.Join(c.certDir(), "apiserver-kubelet-client.crt")
}
func (c *Cluster) kubeletClientKeyFile() string {
	return filepath.Join(c.certDir(), "apiserver-kubelet-client.key")
}

// writeKubeletPKI creates the CA and the apiserver's client certificate,
// unless an earlier start left them (a restarted apiserver keeps talking to
// the kubelets it already trusted).
func (c *Cluster) writeKubeletPKI() error {
	if pki, err := readKubeletPKI(c.kubeletCAFile(), c.kubeletCAKeyFile()); err == nil {
		c.kubelet = pki
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: c.name + "-kubelet-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := writePEM(c.kubeletCAFile(), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(c.kubeletCAKeyFile(), "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	if c.kubelet, err = readKubeletPKI(c.kubeletCAFile(), c.kubeletCAKeyFile()); err != nil {
		return err
	}
	client, err := c.kubelet.issue(pkix.Name{CommonName: KubeletClientUser, Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return err
	}
	return writeKeyPair(client, c.kubeletClientCertFile(), c.kubeletClientKeyFile())
}

func readKubeletPKI(certFile, keyFile string) (*kubeletPKI, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New(keyFile + ": not an ECDSA key")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &kubeletPKI{ca: ca, caKey: key, pool: pool}, nil
}

// issue signs a certificate for subject with usage, valid for the DNS names
// and IPs given.
func (p *kubeletPKI) issue(subject pkix.Name, usage x509.ExtKeyUsage, dnsNames []string, ips []net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// KubeletServingCert issues the serving certificate of the kubelet API of
// node nodeName at ips, which the apiserver verifies.
func (c *Cluster) KubeletServingCert(nodeName string, ips ...net.IP) (tls.Certificate, error) {
	if c.kubelet == nil {
		return tls.Certificate{}, fmt.Errorf("cluster %s: no kubelet CA", c.name)
	}
	return c.kubelet.issue(pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		x509.ExtKeyUsageServerAuth, []string{nodeName}, ips)
}

// KubeletClientCAs is the pool a kubelet checks its clients' certificates
// against: only the apiserver's is issued from it.
func (c *Cluster) KubeletClientCAs() *x509.CertPool { return c.kubelet.pool }

// IssueKubeletClientCert issues a client certificate of the kubelet CA for
// user in groups: what a client that talks to kubelets directly would
// hold. Kubelets let it in, then ask the apiserver what it may do.
func (c *Cluster) IssueKubeletClientCert(user string, groups ...string) (tls.Certificate, error) {
	if c.kubelet == nil {
		return tls.Certificate{}, fmt.Errorf("cluster %s: no kubelet CA", c.name)
	}
	return c.kubelet.issue(pkix.Name{CommonName: user, Organization: groups}, x509.ExtKeyUsageClientAuth, nil, nil)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func writeKeyPair(pair tls.Certificate, certFile, keyFile string) error {
	if err := writePEM(certFile, "CERTIFICATE", pair.Certificate[0], 0o644); err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(pair.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return err
	}
	return writePEM(keyFile, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, blockType string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), mode)
}

package clusterset

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/process"
)

// startCoreDNS runs CoreDNS with kind-config/coredns-Corefile in the
// cluster's first node namespace, listening on the node's address like a
// host-network pod; kube-system/kube-dns points at it. It uses the admin
// kubeconfig (a real deployment gives it a ServiceAccount with read access
// to Services, EndpointSlices, Namespaces and ServiceImports).
func (cs *ClusterSet) startCoreDNS(ctx context.Context, c *Cluster) error {
	started := time.Now()
	binary, err := framework.Binary("coredns")
	if err != nil {
		return err
	}
	corefile, err := repoFile("kind-config", "coredns-Corefile")
	if err != nil {
		return err
	}
	// A copy next to the logs shows what ran.
	conf := filepath.Join(c.dir, "Corefile")
	data, err := os.ReadFile(corefile)
	if err != nil {
		return err
	}
	if err := os.WriteFile(conf, data, 0o644); err != nil {
		return err
	}
	node := c.Nodes[0]
	proc, err := process.Start(process.Options{
		Name:  fmt.Sprintf("CoreDNS of %s", c.Name),
		Argv:  []string{binary, "-conf", conf},
		Netns: node.Netns,
		Env:   append(os.Environ(), "MCS_KUBECONFIG="+c.API.Kubeconfig(), "MCS_CONTEXT="+c.Name),
		Log:   filepath.Join(c.dir, "coredns.log"),
	})
	if err != nil {
		return err
	}
	cs.onDown(levelNode, func() { proc.Stop(5 * time.Second) })
	ready := func(context.Context) error {
		_, err := httpGet(node.Netns, "127.0.0.1:8181", "/ready")
		return err
	}
	if err := proc.WaitReady(ctx, startTimeout, ready); err != nil {
		return err
	}
	cs.progress.timed(c.Name, fmt.Sprintf("CoreDNS ready on %s (kube-dns %s)", net.JoinHostPort(node.IP, "53"), strings.Join(c.DNSIPs, ",")), started)
	return nil
}

// httpGet fetches http://addr+path from inside a network namespace and
// fails unless the answer is 200.
func httpGet(ns, addr, path string) (string, error) {
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
				return netns.Dial(ns, network, addr, 2*time.Second)
			},
		},
	}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s%s: %s", addr, path, resp.Status)
	}
	return string(body), nil
}

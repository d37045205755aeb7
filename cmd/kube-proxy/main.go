// Command kube-proxy is upstream kube-proxy with the MultiClusterServices
// feature gate: with it on, kube-proxy also programs ServiceImports.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // for client metric registration
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/kubeproxy"
)

func main() {
	os.Exit(cli.Run(kubeproxy.NewProxyCommand()))
}

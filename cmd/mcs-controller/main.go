// Command mcs-controller is the reference Multi-Cluster Services
// controller (KEP-1645): it merges the ServiceExports of every member
// cluster and writes ServiceImports and per-source-cluster EndpointSlices
// into every member. See pkg/controller/app for the flags.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/inventory"
)

func main() {
	// client-go runs each access provider's credential plugin through
	// this executable, which counts the run (inventory.PluginRuns).
	if inventory.RunsCredentialPlugin() {
		os.Exit(inventory.RunCredentialPlugin())
	}
	os.Exit(cli.Run(app.NewControllerCommand()))
}

// Command clusterset runs the local clusterset harness (test/clusterset):
// `clusterset up` (hack/local-up-clusterset.sh), `clusterset demo` (make
// demo), `clusterset exec` to run a command in a pod, `clusterset export`
// (the stand-in for the mcs-controller) and `clusterset down`
// (hack/local-down-clusterset.sh). The fake kubelet also re-executes this
// binary as the pods' processes (test/podimage).
package main

import "github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset/cli"

func main() { cli.Main() }

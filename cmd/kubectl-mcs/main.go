// kubectl-mcs is the kubectl plugin of multi-cluster Services: `kubectl mcs
// status`, `kubectl mcs get exports|imports`, `kubectl mcs diagnose
// service NS/NAME`. Installed on the PATH (go install ./cmd/kubectl-mcs),
// kubectl finds it as `kubectl mcs`; linked as kubectl_complete-mcs next to
// it, kubectl completes `kubectl mcs <TAB>` through it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/kubectlmcs"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	cmd := kubectlmcs.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	cmd.SetArgs(kubectlmcs.Args(os.Args[0], os.Args[1:]))
	// An interrupt cancels the command's context: what it started (diagnose
	// --probe's pods) is cleaned up before it exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		switch {
		case errors.Is(err, kubectlmcs.ErrNotConverged):
			os.Exit(2)
		case !errors.Is(err, kubectlmcs.ErrChecksFailed):
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(1)
	}
}

// Command echoserver is the test image mcs-kube-proxy/echoserver: a pod of
// a tested Service answering its name on TCP and UDP, and the client the
// end-to-end suite runs inside pods (see test/echoserver.Main).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/echoserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The pod's hostname is its name (or spec.hostname, which the suite
	// sets to the pod's name).
	name, err := os.Hostname()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := echoserver.Main(ctx, os.Args[1:], name, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "echoserver:", err)
		os.Exit(1)
	}
}

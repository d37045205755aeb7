// Command mcs-controller is the reference Multi-Cluster Services
// controller (KEP-1645): it merges the ServiceExports of every member
// cluster and writes ServiceImports and per-source-cluster EndpointSlices
// into every member. See pkg/controller/app for the flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/app"
)

func main() {
	o := app.NewOptions()
	fs := pflag.NewFlagSet("mcs-controller", pflag.ExitOnError)
	o.AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "mcs-controller:", err)
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

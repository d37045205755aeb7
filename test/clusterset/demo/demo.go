// Package demo is what `make demo` shows: two clusters of the local
// clusterset each run pods of Service demo/web, both export it, and a client
// pod in the second cluster reaches pods of both clusters through the
// ServiceImport's clusterset IP and through web.demo.svc.clusterset.local,
// with each answer naming the pod (and so the cluster) that served it.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset/standin"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// Exporters: what turns ServiceExports into ServiceImports and MCS
// EndpointSlices in the demo.
const (
	ExporterAuto       = "auto" // the controller when built, else the stand-in
	ExporterController = "mcs-controller"
	ExporterStandIn    = "stand-in"
)

// Options configures Run.
type Options struct {
	ClusterSet clusterset.Options
	// Requests is how many requests the client sends per name (default 10).
	Requests int
	// Exporter is ExporterAuto (default), ExporterController or
	// ExporterStandIn.
	Exporter string
	// AskCommand runs Ask inside the client pod: the command (the harness
	// CLI's "ask") to which `--count N --timeout D TARGET` is appended.
	AskCommand []string
	// Out receives the demo's narration.
	Out io.Writer
}

// Run brings up two clusters, runs the demo and tears everything down,
// also when ctx is cancelled (Ctrl-C).
func Run(ctx context.Context, opts Options) (err error) {
	if opts.Requests == 0 {
		opts.Requests = 10
	}
	if opts.Exporter == "" {
		opts.Exporter = ExporterAuto
	}
	if len(opts.AskCommand) == 0 {
		return errors.New("demo: no AskCommand")
	}
	if opts.ClusterSet.Clusters == 0 {
		opts.ClusterSet.Clusters = 2
	}
	if opts.ClusterSet.Progress == nil {
		opts.ClusterSet.Progress = opts.Out
	}
	out := opts.Out
	started := time.Now()
	heading(out, "Bringing up %d clusters", opts.ClusterSet.Clusters)
	cs, err := clusterset.Up(ctx, opts.ClusterSet)
	if err != nil {
		return err
	}
	defer func() {
		heading(out, "Cleaning up")
		cs.Down()
		left, lerr := clusterset.Leftovers(cs.Prefix())
		switch {
		case lerr != nil:
			err = errors.Join(err, lerr)
		case len(left) > 0:
			err = errors.Join(err, fmt.Errorf("left behind: %v", left))
		default:
			fmt.Fprintf(out, "nothing left behind: every process stopped, no network namespace %s-* (their veths and nftables tables went with them); logs kept in %s\n", cs.Prefix(), cs.Dir())
		}
	}()
	d := &demo{cs: cs, out: out, opts: opts}
	if err := d.run(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ndemo finished in %.1fs\n", time.Since(started).Seconds())
	return nil
}

type demo struct {
	cs   *clusterset.ClusterSet
	out  io.Writer
	opts Options
	// pods maps a pod name to where it runs, to label answers.
	pods map[string]string
}

func (d *demo) run(ctx context.Context) error {
	a, b := d.cs.Clusters[0], d.cs.Clusters[1]
	heading(d.out, "Deploying Service %s/%s: 2 pods in %s, 1 pod in %s, exported from both; a client pod in %s", namespace, service, a.Name, b.Name, b.Name)
	d.pods = map[string]string{}
	for _, w := range []struct {
		c    *clusterset.Cluster
		pods []string
	}{{a, []string{"web-a-1", "web-a-2"}}, {b, []string{"web-b-1"}}} {
		if err := deploy(ctx, w.c, w.pods); err != nil {
			return err
		}
	}
	if err := createPod(ctx, b, clientPod()); err != nil {
		return err
	}
	for _, c := range []*clusterset.Cluster{a, b} {
		ips, err := waitPodsReady(ctx, c)
		if err != nil {
			return err
		}
		for _, name := range keys(ips) {
			d.pods[name] = fmt.Sprintf("%s, %s", c.Name, ips[name])
			fmt.Fprintf(d.out, "  %-10s %-8s Running, Ready, IP %s\n", c.Name, name, ips[name])
		}
	}

	stop, err := d.startExporter(ctx)
	if err != nil {
		return err
	}
	defer stop()
	vip, err := waitImport(ctx, b, []string{a.Name, b.Name})
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "  ServiceImport %s/%s in %s: clusterset IP %s, EndpointSlices from %s and %s\n", namespace, service, b.Name, vip, a.Name, b.Name)

	clientNetns, err := d.cs.PodNetns(ctx, b, namespace, "client")
	if err != nil {
		return err
	}
	// A literal IPv6 address goes in brackets (JoinHostPort without a port).
	target := "http://" + strings.TrimSuffix(net.JoinHostPort(vip, ""), ":") + "/hostname"
	if err := d.waitBothAnswer(ctx, clientNetns, target, a.Name, b.Name); err != nil {
		return err
	}
	heading(d.out, "%d requests from pod %s/client in %s to the clusterset IP: %s", d.opts.Requests, namespace, b.Name, target)
	if err := d.requests(ctx, clientNetns, target); err != nil {
		return err
	}
	name := fmt.Sprintf("http://%s.%s.svc.clusterset.local/hostname", service, namespace)
	heading(d.out, "%d requests to the clusterset name, resolved by %s's CoreDNS: %s", d.opts.Requests, b.Name, name)
	if err := d.requests(ctx, clientNetns, name); err != nil {
		return err
	}
	local := fmt.Sprintf("http://%s.%s.svc.cluster.local/hostname", service, namespace)
	heading(d.out, "For contrast, %d requests to the cluster-local name %s: only %s's own pod", d.opts.Requests/2, local, b.Name)
	return d.requestsN(ctx, clientNetns, local, d.opts.Requests/2)
}

// startExporter runs the mcs-controller, or the stand-in when the
// controller is not built (or not wanted), and returns how to stop it.
func (d *demo) startExporter(ctx context.Context) (func(), error) {
	exporter := d.opts.Exporter
	binary, berr := framework.Binary("mcs-controller")
	if exporter == ExporterAuto {
		exporter = ExporterController
		if berr != nil {
			exporter = ExporterStandIn
		}
	}
	switch exporter {
	case ExporterController:
		if berr != nil {
			return nil, berr
		}
		heading(d.out, "Exporting: running %s against every context of %s", binary, d.cs.Kubeconfig())
		proc, err := d.cs.StartController()
		if err != nil {
			return nil, err
		}
		return func() { proc.Stop(5 * time.Second) }, nil
	case ExporterStandIn:
		why := "chosen with --exporter=" + ExporterStandIn
		if berr != nil {
			why = "_output/bin/mcs-controller is not built"
		}
		heading(d.out, "Exporting with the stand-in exporter (%s): test/clusterset/standin copies ServiceExports into ServiceImports and MCS EndpointSlices", why)
		members, err := standin.MembersFromKubeconfig(d.cs.ControllerKubeconfig())
		if err != nil {
			return nil, err
		}
		logFile, err := os.Create(filepath.Join(d.cs.Dir(), "stand-in-exporter.log"))
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			standin.Run(ctx, members, time.Second, func(f string, args ...any) { fmt.Fprintf(logFile, f+"\n", args...) })
		}()
		return func() { cancel(); <-done; logFile.Close() }, nil
	default:
		return nil, fmt.Errorf("unknown exporter %q (want %s, %s or %s)", exporter, ExporterAuto, ExporterController, ExporterStandIn)
	}
}

func heading(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "\n== %s\n", fmt.Sprintf(format, args...))
}

// Workload puts on a running clusterset what the demo shows and leaves it
// there: Service demo/web with two pods in the first cluster and one in
// the second, exported from both, a client pod in the second, and the
// mcs-controller running until the returned stop is called. It returns
// once the second cluster imports the Service from both, so that what
// the README's tour inspects (kubectl mcs status, get, diagnose) is there.
func Workload(ctx context.Context, cs *clusterset.ClusterSet, out io.Writer) (stop func(), err error) {
	if len(cs.Clusters) < 2 {
		return nil, errors.New("the demo's workload needs two clusters or more")
	}
	a, b := cs.Clusters[0], cs.Clusters[1]
	heading(out, "Deploying Service %s/%s: 2 pods in %s, 1 pod in %s, exported from both; a client pod in %s", namespace, service, a.Name, b.Name, b.Name)
	for _, w := range []struct {
		c    *clusterset.Cluster
		pods []string
	}{{a, []string{"web-a-1", "web-a-2"}}, {b, []string{"web-b-1"}}} {
		if err := deploy(ctx, w.c, w.pods); err != nil {
			return nil, err
		}
	}
	if err := createPod(ctx, b, clientPod()); err != nil {
		return nil, err
	}
	for _, c := range []*clusterset.Cluster{a, b} {
		if _, err := waitPodsReady(ctx, c); err != nil {
			return nil, err
		}
	}
	d := &demo{cs: cs, out: out, opts: Options{Exporter: ExporterController}}
	stop, err = d.startExporter(ctx)
	if err != nil {
		return nil, err
	}
	vip, err := waitImport(ctx, b, []string{a.Name, b.Name})
	if err != nil {
		stop()
		return nil, err
	}
	fmt.Fprintf(out, "  ServiceImport %s/%s in %s: clusterset IP %s, EndpointSlices from %s and %s; the mcs-controller runs until Ctrl-C\n", namespace, service, b.Name, vip, a.Name, b.Name)
	return stop, nil
}

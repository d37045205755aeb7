package fakekubelet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/netns"
)

// runProber runs a TCP or HTTP readiness probe against the container's
// process until ctx ends, storing the verdict in c and calling changed
// when it flips. Probes leave from the node namespace, as a kubelet's do.
func (k *Kubelet) runProber(ctx context.Context, probe *v1.Probe, podIP string, c *container, changed func()) {
	if probe.HTTPGet == nil && probe.TCPSocket == nil {
		return // exec and gRPC probes are not run; the container counts as ready
	}
	period := seconds(probe.PeriodSeconds, 10)
	timeout := seconds(probe.TimeoutSeconds, 1)
	success, failure := int(max(probe.SuccessThreshold, 1)), int(max(probe.FailureThreshold, 3))
	select {
	case <-ctx.Done():
		return
	case <-time.After(seconds(probe.InitialDelaySeconds, 0)):
	}
	passes, fails := 0, 0
	for {
		err := k.probeOnce(ctx, probe, podIP, c.spec, timeout)
		if err == nil {
			passes, fails = passes+1, 0
		} else {
			passes, fails = 0, fails+1
		}
		ready := c.probeReady.Load()
		switch {
		case !ready && passes >= success:
			c.probeReady.Store(true)
			changed()
		case ready && fails >= failure:
			c.probeReady.Store(false)
			changed()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

func (k *Kubelet) probeOnce(ctx context.Context, probe *v1.Probe, podIP string, spec v1.Container, timeout time.Duration) error {
	dial := func(_ context.Context, network, addr string) (net.Conn, error) {
		return netns.Dial(k.cfg.NodeNetns, network, addr, timeout)
	}
	if t := probe.TCPSocket; t != nil {
		port, err := resolvePort(t.Port, spec)
		if err != nil {
			return err
		}
		conn, err := dial(ctx, "tcp", net.JoinHostPort(podIP, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	h := probe.HTTPGet
	port, err := resolvePort(h.Port, spec)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	path := h.Path
	if path == "" {
		path = "/"
	}
	resp, err := client.Get(fmt.Sprintf("http://%s%s", net.JoinHostPort(podIP, strconv.Itoa(port)), path))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe: %s", resp.Status)
	}
	return nil
}

// resolvePort turns a probe's port (a number or a named container port)
// into a number.
func resolvePort(port intstr.IntOrString, spec v1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range spec.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("no container port named %q", port.StrVal)
}

func seconds(s int32, def int) time.Duration {
	if s <= 0 {
		return time.Duration(def) * time.Second
	}
	return time.Duration(s) * time.Second
}

package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/bench/measure"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/clusterset"
	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// fleet is the processes of ours a mode runs: push mode's controller, or
// pull mode's planner and one agent per member.
type fleet struct {
	names []string
	cmds  []*exec.Cmd
	peaks []*measure.PeakRSS
	stop  chan struct{}
}

func newFleet() *fleet { return &fleet{stop: make(chan struct{})} }

// start starts one more process, its output into log, and samples its
// peak RSS.
func (f *fleet) start(name, binary string, args []string, log io.Writer) error {
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	peak := &measure.PeakRSS{Pid: cmd.Process.Pid}
	go peak.Watch(f.stop)
	f.names, f.cmds, f.peaks = append(f.names, name), append(f.cmds, cmd), append(f.peaks, peak)
	return nil
}

// cpu is the CPU time every process of the fleet has used.
func (f *fleet) cpu() float64 {
	var pids []int
	for _, c := range f.cmds {
		pids = append(pids, c.Process.Pid)
	}
	return cpuSeconds(pids...)
}

// biggest is the process with the highest peak RSS, and that peak in MB.
func (f *fleet) biggest() (string, int) {
	name, kb := "", 0
	for i, p := range f.peaks {
		if got := p.Get(); got > kb {
			name, kb = f.names[i], got
		}
	}
	return name, kb / 1024
}

// kill stops every process of the fleet.
func (f *fleet) kill() {
	select {
	case <-f.stop:
		return
	default:
		close(f.stop)
	}
	for _, c := range f.cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
}

// startPullHub starts one more apiserver, the hub, and lays it out for
// the members as its operator does (clusterset.LayOutPullHub).
func startPullHub(ctx context.Context, dir string, etcd *framework.Etcd, members []*member, apiserverArgs []string) (*framework.Cluster, error) {
	hub, err := framework.StartCluster(ctx, framework.ClusterOptions{Name: "hub", Etcd: etcd, Dir: filepath.Join(dir, "hub"), ExtraArgs: apiserverArgs})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range members {
		ids = append(ids, m.id)
	}
	if err := clusterset.LayOutPullHub(ctx, hub, ids); err != nil {
		hub.Stop()
		return nil, err
	}
	return hub, nil
}

// startPullMode starts pull mode's processes over the members and hub:
// the planner with its hub identity, and in each member its agent, with
// the member's admin credentials (as push mode's controller has them)
// and its own hub identity. The planner gets plannerArgs, each agent
// agentArgs: the controller's client settings and workers.
func startPullMode(hub *framework.Cluster, members []*member, plannerArgs, agentArgs []string, log io.Writer) (*fleet, error) {
	plannerKubeconfig, err := hub.ImpersonatingKubeconfig(clusterset.PlannerIdentity())
	if err != nil {
		return nil, err
	}
	f := newFleet()
	if err := f.start("planner", *controller, append([]string{"planner", "--kubeconfig=" + plannerKubeconfig}, plannerArgs...), log); err != nil {
		f.kill()
		return nil, err
	}
	for _, m := range members {
		hubKubeconfig, err := hub.ImpersonatingKubeconfig(clusterset.AgentIdentity(m.id))
		if err != nil {
			f.kill()
			return nil, err
		}
		args := append([]string{"member-agent", "--kubeconfig=" + m.kubeconfig, "--hub-kubeconfig=" + hubKubeconfig}, agentArgs...)
		if err := f.start("agent of "+m.id, *controller, slices.Clip(args), log); err != nil {
			f.kill()
			return nil, err
		}
	}
	return f, nil
}

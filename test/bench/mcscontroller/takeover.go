package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsproxy "k8s.io/multiclusterservices/proxy"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/test/framework"
)

// measureLeaderChange runs the controller as two replicas electing a
// leader (the Lease in the first member) over the converged clusterset,
// then hands leadership over twice: the leader stopped as a rolling
// update stops it (SIGTERM: it releases the Lease), then the new leader
// killed (SIGKILL: its Lease must expire first) with a third replica
// waiting. For each: the time from the signal until the standby leads
// with every member's caches synced, and the writes of that takeover
// until settle after it. Nothing is out of date: every write but the
// Leases' is one the takeover need not have made.
func measureLeaderChange(ctx context.Context, members []*member, controller string, args []string, log io.Writer, settle time.Duration) error {
	elect := func(n int) (*replica, error) {
		return startReplica(controller, args, log, "--leader-elect=true", fmt.Sprintf("--identity=bench-replica-%d", n))
	}
	leader, err := elect(1)
	if err != nil {
		return err
	}
	defer func() { leader.stop(syscall.SIGKILL) }()
	if _, err := leader.waitReady(true, 5*time.Minute); err != nil {
		return err
	}
	for n, how := range []struct {
		name string
		sig  os.Signal
	}{{"stopped (SIGTERM, Lease released)", syscall.SIGTERM}, {"killed (SIGKILL, Lease left to expire)", syscall.SIGKILL}} {
		standby, err := elect(n + 2)
		if err != nil {
			return err
		}
		if _, err := standby.waitReady(false, time.Minute); err != nil {
			standby.stop(syscall.SIGKILL)
			return err
		}
		time.Sleep(settle / 4)
		before, err := writeSnapshot(ctx, members)
		if err != nil {
			standby.stop(syscall.SIGKILL)
			return err
		}
		signalled := time.Now()
		leader.stop(how.sig)
		leader = standby
		// The standby has run since before the signal: its wait counts
		// from the signal.
		standby.started = signalled
		took, err := standby.waitReady(true, 5*time.Minute)
		if err != nil {
			return err
		}
		time.Sleep(settle)
		w, err := writesSince(ctx, members, before)
		if err != nil {
			return err
		}
		fmt.Printf("leader change, leader %s: the standby led with every member synced %s after the signal; until %s after that, %s\n",
			how.name, took.Round(time.Millisecond), settle, w.describe(len(members)))
	}
	return nil
}

// measureAway takes the last member's apiserver away for away (longer than
// the controller's endpoint TTL: the member's endpoints are withdrawn from
// the others; and its apiserver comes back with a new watch cache, so the
// controller's watches of it cannot resume and list again, as after an
// hour, when etcd has compacted the revisions they had reached), changes
// changed endpoints in the first member meanwhile, brings the member back,
// and reports the time until every member holds every slice again (the
// changed ones as changed in the member that was away), and the writes
// into that member and into the others against what changed.
func measureAway(ctx context.Context, members []*member, apis []*framework.Cluster, controller string, args []string, log io.Writer, away time.Duration, changed int, settle time.Duration) error {
	r, err := startReplica(controller, args, log)
	if err != nil {
		return err
	}
	defer r.stop(syscall.SIGKILL)
	if _, err := r.waitReady(true, 5*time.Minute); err != nil {
		return err
	}
	time.Sleep(settle / 4)
	gone, goneCluster, source := members[len(members)-1], apis[len(apis)-1], members[0]
	others := members[:len(members)-1]
	before, err := writeSnapshot(ctx, others)
	if err != nil {
		return err
	}
	goneCluster.Crash()
	left := time.Now()
	// The changes made while it is away: one endpoint of each of the
	// first changed Services of the first member.
	want := map[string]string{}
	for i := 0; i < min(changed, *exports); i++ {
		s := localSlice(source, i, 1000+i)
		cur, err := source.kube.DiscoveryV1().EndpointSlices(namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.ResourceVersion, s.OwnerReferences = cur.ResourceVersion, cur.OwnerReferences
		if _, err := source.kube.DiscoveryV1().EndpointSlices(namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return err
		}
		want[serviceName(i)] = s.Endpoints[0].Addresses[0]
	}
	time.Sleep(time.Until(left.Add(away)))
	// Before it returns: the others no longer hold its slices whole (the
	// TTL withdrew its endpoints).
	withdrawn := 0
	for _, m := range others {
		_, n := m.observer.counts()
		withdrawn += *exports**clusters - n
	}
	if err := goneCluster.Restart(ctx); err != nil {
		return err
	}
	back := time.Now()
	// A new watch of the member that returned (the benchmark's own had
	// broken, as the controller's).
	stop := make(chan struct{})
	defer close(stop)
	gone.observer = observe(gone, namespace, mcsproxy.DefaultManagedBy, stop)
	wantSlices := *exports * *clusters
	for {
		done := true
		for _, m := range members {
			ni, n := m.observer.counts()
			done = done && ni == *exports && n == wantSlices
		}
		for svc, addr := range want {
			done = done && hasAddress(gone, svc, source.id, addr)
		}
		if done {
			break
		}
		if time.Since(back) > 5*time.Minute {
			return fmt.Errorf("%s not caught up 5 minutes after its return", gone.id)
		}
		time.Sleep(250 * time.Millisecond)
	}
	caughtUp := time.Since(back)
	time.Sleep(settle)
	// The member's apiserver counts from its restart.
	into, err := writesSince(ctx, []*member{gone}, map[string]map[string]int{})
	if err != nil {
		return err
	}
	intoOthers, err := writesSince(ctx, others, before)
	if err != nil {
		return err
	}
	fmt.Printf("away: %s away %s (%d of its slices withdrawn from the others meanwhile), %d endpoints changed in %s meanwhile; back, every member caught up in %s\n",
		gone.id, away.Round(time.Second), withdrawn, len(want), source.id, caughtUp.Round(time.Millisecond))
	fmt.Printf("  into %s from its return until %s after catching up (its size: %d imports and %d slices): %s\n",
		gone.id, settle, *exports, wantSlices, into.describe(1))
	fmt.Printf("  into the %d others from its departure: %s\n", len(others), intoOthers.describe(len(others)))
	return nil
}

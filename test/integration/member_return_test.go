package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMemberBackCostsWhatChanged takes a member's apiserver away past the
// endpoint TTL (its endpoints leave the others) and brings it back with a
// new watch cache, as an apiserver restarted or back after an hour is:
// the controller's watches of it cannot resume and must list it again.
// Meanwhile two of the other member's endpoints change. Back, the member
// must be written what changed, from fresh caches: no write refused as a
// conflict (a write from what the controller held before it went away),
// and a handful of writes, not one per name; and it catches up within
// seconds, not after the watches' backoff.
func TestMemberBackCostsWhatChanged(t *testing.T) {
	ms, kubeconfig := membersWithDemo(t, "cluster-a", "cluster-b")
	a, b := ms[0], ms[1]
	const names, changed = 20, 2
	for i := range names {
		exportService(t, a, "demo", fmt.Sprintf("api-%02d", i), servicePorts("grpc", 9000), endpoints("grpc", 9000, fmt.Sprintf("10.1.%d.1", i)))
	}
	exportService(t, a, "demo", "both", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.1.100.1"))
	exportService(t, b, "demo", "both", servicePorts("grpc", 9000), endpoints("grpc", 9000, "10.2.100.1"))
	ctrl := startController(t, kubeconfig, "replica-1", 2*time.Second)
	ctrl.waitReady(t)
	for i := range names {
		waitSlices(t, b, "demo", fmt.Sprintf("api-%02d", i), fmt.Sprintf("cluster-a=10.1.%d.1 ports grpc:9000", i))
	}
	waitSlices(t, a, "demo", "both", "cluster-a=10.1.100.1 ports grpc:9000;cluster-b=10.2.100.1 ports grpc:9000")

	b.cluster.Crash()
	ctx := context.Background()
	for i := range changed {
		name := fmt.Sprintf("api-%02d-local", i)
		s, err := a.kube.DiscoveryV1().EndpointSlices("demo").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Endpoints[0].Addresses = []string{fmt.Sprintf("10.1.%d.2", i)}
		if _, err := a.kube.DiscoveryV1().EndpointSlices("demo").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The TTL withdrew b's endpoints from a.
	waitSlices(t, a, "demo", "both", "cluster-a=10.1.100.1 ports grpc:9000")
	if err := b.cluster.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for i := range changed {
		waitSlices(t, b, "demo", fmt.Sprintf("api-%02d", i), fmt.Sprintf("cluster-a=10.1.%d.2 ports grpc:9000", i))
	}
	waitSlices(t, a, "demo", "both", "cluster-a=10.1.100.1 ports grpc:9000;cluster-b=10.2.100.1 ports grpc:9000")
	caughtUp := time.Since(back)
	time.Sleep(3 * time.Second)

	// b's apiserver counts from its restart.
	raw, err := b.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writes, conflicts := 0, 0
	var seen []string
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !(strings.Contains(line, `resource="endpointslices"`) || strings.Contains(line, `resource="serviceimports"`)) {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		var n int
		if _, err := fmt.Sscan(value, &n); err != nil {
			continue
		}
		if !strings.Contains(labels, `verb="POST"`) && !strings.Contains(labels, `verb="PUT"`) && !strings.Contains(labels, `verb="PATCH"`) && !strings.Contains(labels, `verb="DELETE"`) {
			continue
		}
		writes += n
		if strings.Contains(labels, `code="409"`) {
			conflicts += n
		}
		seen = append(seen, line)
	}
	t.Logf("back in %s: caught up in %v with %d writes of slices and imports into it, %d refused as conflicts:\n%s",
		b.id, caughtUp.Round(time.Millisecond), writes, conflicts, strings.Join(seen, "\n"))
	if conflicts > 0 {
		t.Errorf("%d writes into %s after its return were made from caches older than its return (409 Conflict)", conflicts, b.id)
	}
	// What changed: the two slices; the apiserver's own slice of the
	// kubernetes Service may be written once at its start.
	if writes > changed+1 {
		t.Errorf("%d writes of slices and imports into %s after its return, for %d changes of %d names", writes, b.id, changed, names+1)
	}
	if caughtUp > 15*time.Second {
		t.Errorf("%s caught up %v after its return", b.id, caughtUp)
	}
}

package multicluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodeEvents records "Kind ns/name type Reason related-node" for every event.
type nodeEvents struct {
	mu     sync.Mutex
	events []string
}

func (r *nodeEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := regarding.(*v1.ObjectReference)
	node := "<none>"
	if related != nil {
		node = related.(*v1.ObjectReference).Name
	}
	r.events = append(r.events, fmt.Sprintf("%s %s/%s %s %s %s", ref.Kind, ref.Namespace, ref.Name, eventtype, reason, node))
}

func (r *nodeEvents) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// TestProgrammedEvents: an import programmed is not reported per node
// (a tenant's imports times the node count, each naming a node in the
// tenant's namespace); a rejection names the node, and the fix after it
// is said too, so that the node's last word on the import is true.
func TestProgrammedEvents(t *testing.T) {
	f := newFixture(t)
	events := &nodeEvents{}
	f.proxier.events.recorder = events
	f.proxier.SetNode(&v1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"})
	expect := func(want ...string) {
		t.Helper()
		if diff := cmp.Diff(want, events.take()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	}

	f.proxier.OnServiceImportUpsert(serviceImport("ns", "old", 0, "10.250.0.1"))
	f.proxier.MultiClusterSynced()
	expect()

	for i := range 50 {
		f.proxier.OnServiceImportUpsert(serviceImport("ns", fmt.Sprintf("web-%d", i), 0, fmt.Sprintf("10.250.1.%d", i)))
	}
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.2"))
	expect()
	added := 0
	for _, c := range f.provider.takeCalls() {
		if strings.HasPrefix(c, "ServiceAdd ns/web") {
			added++
		}
	}
	if added != 51 {
		t.Errorf("%d imports programmed, want 51", added)
	}

	// Refused, then fixed: both are said, with the node.
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.96.0.1"))
	expect("ServiceImport ns/web Warning IPOutsideClusterSetCIDR node-1")
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.2"))
	expect("ServiceImport ns/web Normal Programmed node-1")
}

// TestAnnounce: a node's kube-proxy says on its Node that it programs
// imports (kubectl mcs status reads the gate there), only once the
// wrapped Provider has the first full state, and again every period.
func TestAnnounce(t *testing.T) {
	f := newFixture(t)
	events := &nodeEvents{}
	f.proxier.events.recorder = events
	f.proxier.SetNode(&v1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.proxier.Announce(ctx, 20*time.Millisecond)
	}()

	f.proxier.OnServiceSynced()
	f.proxier.OnEndpointSlicesSynced()
	time.Sleep(100 * time.Millisecond)
	if got := events.take(); len(got) != 0 {
		t.Fatalf("announced before the imports were synced: %v", got)
	}
	f.proxier.MultiClusterSynced()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got = append(got, events.take()...)
	}
	cancel()
	<-done
	if len(got) < 2 {
		t.Fatalf("announcements %v, want one at the sync and one a period later", got)
	}
	for _, e := range got {
		if e != "Node /node-1 Normal ServingServiceImports <none>" {
			t.Errorf("announcement %q, want a Normal ServingServiceImports event on Node node-1", e)
		}
	}
}

// TestProgrammedEventBeforeSyncAfterRejection: an import refused and
// fixed before the first sync still ends on a Programmed event, so that
// its last event from this node is true.
func TestProgrammedEventBeforeSyncAfterRejection(t *testing.T) {
	f := newFixture(t)
	events := &nodeEvents{}
	f.proxier.events.recorder = events
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.96.0.1"))
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.2"))
	want := []string{"ServiceImport ns/web Warning IPOutsideClusterSetCIDR <none>", "ServiceImport ns/web Normal Programmed <none>"}
	if diff := cmp.Diff(want, events.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

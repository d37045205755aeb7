package multicluster

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodeEvents records "Kind ns/name type Reason related-node" for every event.
type nodeEvents struct{ events []string }

func (r *nodeEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	ref := regarding.(*v1.ObjectReference)
	node := "<none>"
	if related != nil {
		node = related.(*v1.ObjectReference).Name
	}
	r.events = append(r.events, fmt.Sprintf("%s %s/%s %s %s %s", ref.Kind, ref.Namespace, ref.Name, eventtype, reason, node))
}

func (r *nodeEvents) take() []string {
	e := r.events
	r.events = nil
	return e
}

// TestProgrammedEvents: once synced, kube-proxy says on which node it
// programmed an import (a Normal Programmed event related to its Node),
// and every rejection names the node too; at start-up it says nothing for
// imports it programs, so a rollout records no event per node and import.
func TestProgrammedEvents(t *testing.T) {
	f := newFixture(t)
	events := &nodeEvents{}
	f.proxier.recorder = events
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

	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.2"))
	expect("ServiceImport ns/web Normal Programmed node-1")
	// An update of a programmed import is not news.
	updated := serviceImport("ns", "web", 0, "10.250.0.2")
	updated.Spec.Ports[0].Port = 81
	f.proxier.OnServiceImportUpsert(updated)
	expect()

	// Refused, then fixed: both are said, with the node.
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.96.0.1"))
	expect("ServiceImport ns/web Warning IPOutsideClusterSetCIDR node-1")
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.2"))
	expect("ServiceImport ns/web Normal Programmed node-1")
}

// TestProgrammedEventBeforeSyncAfterRejection: an import refused and
// fixed before the first sync still ends on a Programmed event, so that
// its last event from this node is true.
func TestProgrammedEventBeforeSyncAfterRejection(t *testing.T) {
	f := newFixture(t)
	events := &nodeEvents{}
	f.proxier.recorder = events
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.96.0.1"))
	f.proxier.OnServiceImportUpsert(serviceImport("ns", "web", 0, "10.250.0.2"))
	want := []string{"ServiceImport ns/web Warning IPOutsideClusterSetCIDR <none>", "ServiceImport ns/web Normal Programmed <none>"}
	if diff := cmp.Diff(want, events.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

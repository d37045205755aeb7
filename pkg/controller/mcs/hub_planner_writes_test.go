package mcs

import (
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestPlannerWaitsForItsOwnWrites: a name is not planned again from a
// cache that does not show the planner's last writes of it yet (it would
// write them again from old resourceVersions, refused as conflicts), and
// is once the cache shows them, once they are deleted, or once cacheWait
// has passed.
func TestPlannerWaitsForItsOwnWrites(t *testing.T) {
	slice := func(name, rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-plan", Name: name, ResourceVersion: rv}}
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	w := newOwnWrites()
	if wait := w.behind("demo/web"); wait != 0 {
		t.Fatalf("a name never written waits %v", wait)
	}

	w.wrote("demo/web", resourceEndpointSlices, slice("web-a", "10"), store)
	w.wrote("demo/web", resourceEndpointSlices, slice("web-b", "11"), store)
	if wait := w.behind("demo/web"); wait <= 0 || wait > cacheWait {
		t.Fatalf("after two writes the cache has not shown: waits %v, want (0, %v]", wait, cacheWait)
	}
	if wait := w.behind("demo/db"); wait != 0 {
		t.Errorf("another name waits %v for web's writes", wait)
	}
	// An older event of web-a (the watch delivers in order: it comes
	// before the write's) ends nothing; the write's own event does.
	w.seen(resourceEndpointSlices, slice("web-a", "9"), false)
	w.seen(resourceEndpointSlices, slice("web-a", "10"), false)
	if wait := w.behind("demo/web"); wait == 0 {
		t.Fatal("web-b's write is not shown yet, but web waits no more")
	}
	// The same name and version of another resource is another object.
	w.seen(resourceServicePlans, slice("web-b", "11"), false)
	if wait := w.behind("demo/web"); wait == 0 {
		t.Fatal("a ServicePlan's event ended the wait for a slice's write")
	}
	w.seen(resourceEndpointSlices, slice("web-b", "0"), true)
	if wait := w.behind("demo/web"); wait != 0 {
		t.Fatalf("every write shown or deleted: still waits %v", wait)
	}

	// A write whose event came before it returned is already shown.
	if err := store.Add(slice("web-c", "12")); err != nil {
		t.Fatal(err)
	}
	w.wrote("demo/web", resourceEndpointSlices, slice("web-c", "12"), store)
	if wait := w.behind("demo/web"); wait != 0 {
		t.Fatalf("a write the cache showed when it returned: waits %v", wait)
	}

	// A write whose event never comes is waited for cacheWait at most.
	w.wrote("demo/web", resourceEndpointSlices, slice("web-d", "13"), store)
	w.mu.Lock()
	w.byService["demo/web"]["endpointslices/mcs-plan/web-d"] = ownWrite{resourceVersion: "13", at: time.Now().Add(-cacheWait)}
	w.mu.Unlock()
	if wait := w.behind("demo/web"); wait != 0 {
		t.Fatalf("a write waited for cacheWait is still waited for: %v", wait)
	}
	if len(w.byService) != 0 || len(w.service) != 0 {
		t.Errorf("writes still remembered once none is waited for: %v %v", w.byService, w.service)
	}
}

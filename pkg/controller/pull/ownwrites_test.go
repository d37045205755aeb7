package pull

import (
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestOwnWrites: a name is not synced again (planned, or published) from
// a cache that does not show its last writes yet (they would be written
// again from old resourceVersions, or created again, and refused), and is
// once the cache shows them, once they are deleted, or once Wait has
// passed.
func TestOwnWrites(t *testing.T) {
	slice := func(name, rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-plan", Name: name, ResourceVersion: rv}}
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	w := NewOwnWrites(CacheWait)
	if wait := w.Behind("demo/web"); wait != 0 {
		t.Fatalf("a name never written waits %v", wait)
	}

	w.Wrote("demo/web", "endpointslices", slice("web-a", "10"), store)
	w.Wrote("demo/web", "endpointslices", slice("web-b", "11"), store)
	if wait := w.Behind("demo/web"); wait <= 0 || wait > CacheWait {
		t.Fatalf("after two writes the cache has not shown: waits %v, want (0, %v]", wait, CacheWait)
	}
	if wait := w.Behind("demo/db"); wait != 0 {
		t.Errorf("another name waits %v for web's writes", wait)
	}
	// An older event of web-a (the watch delivers in order: it comes
	// before the write's) ends nothing; the write's own event does.
	w.Seen("endpointslices", slice("web-a", "9"), false)
	w.Seen("endpointslices", slice("web-a", "10"), false)
	if wait := w.Behind("demo/web"); wait == 0 {
		t.Fatal("web-b's write is not shown yet, but web waits no more")
	}
	// The same name and version of another resource is another object.
	w.Seen("serviceplans", slice("web-b", "11"), false)
	if wait := w.Behind("demo/web"); wait == 0 {
		t.Fatal("a ServicePlan's event ended the wait for a slice's write")
	}
	w.Seen("endpointslices", slice("web-b", "0"), true)
	if wait := w.Behind("demo/web"); wait != 0 {
		t.Fatalf("every write shown or deleted: still waits %v", wait)
	}

	// A write whose event came before it returned is already shown.
	if err := store.Add(slice("web-c", "12")); err != nil {
		t.Fatal(err)
	}
	w.Wrote("demo/web", "endpointslices", slice("web-c", "12"), store)
	if wait := w.Behind("demo/web"); wait != 0 {
		t.Fatalf("a write the cache showed when it returned: waits %v", wait)
	}

	// A write whose event never comes is waited for CacheWait at most.
	w.Wrote("demo/web", "endpointslices", slice("web-d", "13"), store)
	w.mu.Lock()
	w.byService["demo/web"]["endpointslices/mcs-plan/web-d"] = ownWrite{resourceVersion: "13", at: time.Now().Add(-CacheWait)}
	w.mu.Unlock()
	if wait := w.Behind("demo/web"); wait != 0 {
		t.Fatalf("a write waited for CacheWait is still waited for: %v", wait)
	}
	if len(w.byService) != 0 || len(w.service) != 0 {
		t.Errorf("writes still remembered once none is waited for: %v %v", w.byService, w.service)
	}
}

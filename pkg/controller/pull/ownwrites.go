package pull

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// OwnWrites remembers, per name, the writes into the hub that the writer's
// informers have not shown yet: the planner's of each planned name, an
// agent's of each export it publishes. A name is synced again as soon as
// any of its objects changes, its own writes included, while the events
// of its other writes are still on their way (at hundreds of members a
// planned name is hundreds of writes, each sent to hundreds of watchers;
// an agent's export is a MemberExport and its slices): synced from that
// cache, it would write again what was just written, from old
// resourceVersions or as a create of what exists, refused and retried
// through the rate limiter. So a name waits until the cache shows the
// writes of it, for no longer than Wait, as push mode's slices do
// (memberState.cacheBehind).
//
// A write is shown when the informer delivers the object at the
// resourceVersion the write returned. A watch delivers an object's events
// in order, so the events with other versions seen before it are older
// ones; once it is seen, nothing of that write is left to wait for.
type OwnWrites struct {
	// Wait is how long a write is waited for at most: its watch may be
	// broken or the event missed.
	Wait time.Duration

	mu sync.Mutex
	// byService are, per name (namespace/name), its objects' writes not
	// shown yet, by object (resource/namespace/name).
	byService map[string]map[string]ownWrite
	// service is each such object's name.
	service map[string]string
}

type ownWrite struct {
	resourceVersion string
	at              time.Time
}

// NewOwnWrites returns an OwnWrites whose writes are waited for wait at
// most.
func NewOwnWrites(wait time.Duration) *OwnWrites {
	return &OwnWrites{Wait: wait, byService: map[string]map[string]ownWrite{}, service: map[string]string{}}
}

// Wrote records the write of object (resource/namespace/name), part of
// service, which the hub stored at obj's resourceVersion.
// The write's event may have come before the record: then store, the
// informer's, already shows it, and nothing is recorded.
func (w *OwnWrites) Wrote(service, resource string, obj metav1.Object, store cache.Store) {
	key := obj.GetNamespace() + "/" + obj.GetName()
	if cached, ok, _ := store.GetByKey(key); ok {
		if o, isObject := cached.(metav1.Object); isObject && o.GetResourceVersion() == obj.GetResourceVersion() {
			return
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	object := resource + "/" + key
	if w.byService[service] == nil {
		w.byService[service] = map[string]ownWrite{}
	}
	w.byService[service][object] = ownWrite{resourceVersion: obj.GetResourceVersion(), at: time.Now()}
	w.service[object] = service
}

// Seen is an informer's event of object at resourceVersion ("" for a
// deletion, which ends any wait for it).
func (w *OwnWrites) Seen(resource string, obj metav1.Object, deleted bool) {
	object := resource + "/" + obj.GetNamespace() + "/" + obj.GetName()
	w.mu.Lock()
	defer w.mu.Unlock()
	service, ok := w.service[object]
	if !ok {
		return
	}
	if !deleted && w.byService[service][object].resourceVersion != obj.GetResourceVersion() {
		return
	}
	w.forget(service, object)
}

// Behind says how long service is still to wait for the cache to show the
// writes of it: 0 when it shows them all, or when the oldest has been
// waited for Wait (its watch is broken or the event was missed:
// the cache is not trusted to catch up by itself, and the name is planned
// from it as it is).
func (w *OwnWrites) Behind(service string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var wait time.Duration
	for object, write := range w.byService[service] {
		left := w.Wait - time.Since(write.at)
		if left <= 0 {
			w.forget(service, object)
			continue
		}
		wait = max(wait, left)
	}
	return wait
}

func (w *OwnWrites) forget(service, object string) {
	delete(w.service, object)
	delete(w.byService[service], object)
	if len(w.byService[service]) == 0 {
		delete(w.byService, service)
	}
}

package pull

import (
	"context"
	"errors"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// ApplySlices makes the EndpointSlices api holds of one name want, where
// have is what a cache shows of them: it creates what is missing, updates
// what upToDate says differs, replaces a slice whose address type changed
// (the field is immutable) and deletes the rest, writing nothing that is
// already right. Every write's result goes through written (with the
// slice as the apiserver stored it, nil for a deletion), which counts it
// and returns its error; slots runs the writes (nil: one after the
// other). The agent's published slices and the planner's plan are both
// written so.
func ApplySlices(ctx context.Context, api discoveryclient.EndpointSliceInterface, have, want []*discoveryv1.EndpointSlice,
	upToDate func(have, want *discoveryv1.EndpointSlice) bool, written func(*discoveryv1.EndpointSlice, error) error, slots WriteSlots) error {
	byName := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range have {
		byName[s.Name] = s
	}
	remove := func(h *discoveryv1.EndpointSlice) error {
		return IgnoreNotFound(written(nil, api.Delete(ctx, h.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &h.UID}})))
	}
	var writes []func() error
	for _, w := range want {
		h := byName[w.Name]
		delete(byName, w.Name)
		switch {
		case h == nil:
			writes = append(writes, func() error { return written(api.Create(ctx, w, metav1.CreateOptions{})) })
		case upToDate(h, w):
		case h.AddressType != w.AddressType:
			writes = append(writes, func() error {
				if err := remove(h); err != nil {
					return err
				}
				return written(api.Create(ctx, w, metav1.CreateOptions{}))
			})
		default:
			w.ResourceVersion = h.ResourceVersion
			writes = append(writes, func() error { return written(api.Update(ctx, w, metav1.UpdateOptions{})) })
		}
	}
	for _, h := range byName {
		writes = append(writes, func() error { return remove(h) })
	}
	return slots.Do(writes)
}

// WriteSlots bound the writes in flight of everyone who shares them: the
// planner's workers share one set, so that while a worker plans, the
// writes of the names others planned keep the hub busy, and no more are
// in flight than it has workers. A name's writes are hundreds at hundreds
// of members; one after the other, they would leave the hub idle between
// each and the worker's next plan.
type WriteSlots chan struct{}

// NewWriteSlots returns n slots.
func NewWriteSlots(n int) WriteSlots { return make(WriteSlots, max(n, 1)) }

// Do runs writes, each in a slot as one frees (nil slots: one after the
// other, stopping at the first error), and returns their errors joined.
func (s WriteSlots) Do(writes []func() error) error {
	if s == nil {
		for _, w := range writes {
			if err := w(); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		s <- struct{}{}
		wg.Go(func() {
			defer func() { <-s }()
			errs[i] = w()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// IgnoreNotFound is err, but nil for NotFound: what was to go is gone.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ObjectOf returns obj, or the object of a deletion tombstone, as T.
func ObjectOf[T any](obj any) T {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, _ := obj.(T)
	return t
}

// HasLabels says whether have holds every key of want with its value.
func HasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

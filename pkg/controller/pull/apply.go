package pull

import (
	"context"

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
// and returns its error. The agent's published slices and the planner's
// plan are both written so.
func ApplySlices(ctx context.Context, api discoveryclient.EndpointSliceInterface, have, want []*discoveryv1.EndpointSlice,
	upToDate func(have, want *discoveryv1.EndpointSlice) bool, written func(*discoveryv1.EndpointSlice, error) error) error {
	byName := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range have {
		byName[s.Name] = s
	}
	remove := func(h *discoveryv1.EndpointSlice) error {
		return IgnoreNotFound(written(nil, api.Delete(ctx, h.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &h.UID}})))
	}
	for _, w := range want {
		h := byName[w.Name]
		delete(byName, w.Name)
		var stored *discoveryv1.EndpointSlice
		var err error
		switch {
		case h == nil:
			stored, err = api.Create(ctx, w, metav1.CreateOptions{})
		case upToDate(h, w):
			continue
		case h.AddressType != w.AddressType:
			if err = remove(h); err == nil {
				stored, err = api.Create(ctx, w, metav1.CreateOptions{})
			}
		default:
			w.ResourceVersion = h.ResourceVersion
			stored, err = api.Update(ctx, w, metav1.UpdateOptions{})
		}
		if err := written(stored, err); err != nil {
			return err
		}
	}
	for _, h := range byName {
		if err := remove(h); err != nil {
			return err
		}
	}
	return nil
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

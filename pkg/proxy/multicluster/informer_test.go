package multicluster

import (
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/proxy"
)

// Tests hand EndpointSlices to a Proxier the way production does: as
// kube-proxy's EndpointSlice informer delivers them (an add, then updates
// from the object it last delivered, then a delete of that object), so
// that every MCS slice goes through the route (route.go) before its
// import gets it.
var delivered = struct {
	sync.Mutex
	last map[proxy.Provider]map[types.NamespacedName]*discoveryv1.EndpointSlice
}{last: map[proxy.Provider]map[types.NamespacedName]*discoveryv1.EndpointSlice{}}

// DeliverSlice hands p slice as kube-proxy's EndpointSlice informer would:
// an add the first time, else an update from what it last delivered.
func DeliverSlice(p proxy.Provider, slice *discoveryv1.EndpointSlice) {
	key := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
	delivered.Lock()
	if delivered.last[p] == nil {
		delivered.last[p] = map[types.NamespacedName]*discoveryv1.EndpointSlice{}
	}
	old := delivered.last[p][key]
	delivered.last[p][key] = slice
	delivered.Unlock()
	if old == nil {
		p.OnEndpointSliceAdd(slice)
		return
	}
	p.OnEndpointSliceUpdate(old, slice)
}

// WithdrawSlice deletes slice from p as kube-proxy's EndpointSlice
// informer would: the object it last delivered (slice itself if none).
func WithdrawSlice(p proxy.Provider, slice *discoveryv1.EndpointSlice) {
	key := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
	delivered.Lock()
	if old := delivered.last[p][key]; old != nil {
		slice = old
	}
	delete(delivered.last[p], key)
	delivered.Unlock()
	p.OnEndpointSliceDelete(slice)
}

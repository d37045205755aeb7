package mcs

import (
	"sync"
	"time"

	"github.com/mcs-kube-proxy/mcs-kube-proxy/pkg/controller/pull"
)

// memberState is what the controller remembers of one member between
// syncs. It belongs to the member and goes when the member leaves
// (Leave), so that nothing of a cluster outlives its membership: a
// cluster that joins again is told again what it was told before.
type memberState struct {
	// told holds what was reported once about the member's objects and
	// must not be again: slices not mirrored, addresses outside pod
	// ranges, users' Services that native names reach, derived names
	// taken, ServiceCIDRs overlapping the clusterset.
	told sync.Map
	// retiring holds, per import key, since when a derived Service has
	// been left over in the member now served natively.
	retiring sync.Map
	// switching holds, per import key, since when a derived import has
	// announced its clusterset IPs to the member's proxies on a switch
	// to native mode.
	switching sync.Map
	// chosen holds, per import key of a derived member, the cluster
	// selection result its slices were last written with, per port
	// (map[string]int, see chooseForDerived).
	chosen sync.Map
	// wroteSlices holds, per slice (namespace/name), the generation of
	// the controller's last write of it until the member's cache shows
	// that write. A sync in between (the slice's other events, an
	// enqueueAll, a member joined again and listed) would otherwise
	// compare with the older copy and write again from its
	// resourceVersion: refused as a conflict, and retried.
	wroteSlices sync.Map
}

// firstTime records report id and tells whether it was not recorded
// before: a report told once per object and cause.
func (s *memberState) firstTime(id string) bool {
	_, seen := s.told.LoadOrStore(id, true)
	return !seen
}

// since returns when the step of import key that times holds began,
// starting it now if it had not.
func since(times *sync.Map, key string) time.Time {
	t, _ := times.LoadOrStore(key, time.Now())
	return t.(time.Time)
}

// sliceWrite is the controller's last write of one slice.
type sliceWrite struct {
	generation int64
	at         time.Time
}

// wroteSlice records the controller's write of slice key, which the
// member's apiserver stored at generation.
func (s *memberState) wroteSlice(key string, generation int64) {
	s.wroteSlices.Store(key, sliceWrite{generation: generation, at: time.Now()})
}

// forgetSlice forgets the controller's last write of slice key: the slice
// is gone, or the member's cache shows that write.
func (s *memberState) forgetSlice(key string) { s.wroteSlices.Delete(key) }

// cacheBehind tells whether cached, the member's cached copy of slice key,
// is older than the controller's last write of it, and for how much longer
// to wait for it. A copy that shows the write, or a wait past
// pull.CacheWait,
// ends it. A slice written and not cached yet is the controller's create
// still on its way to the cache: it is waited for too, rather than
// created again and found by its name (writeSlices does that after the
// wait, and for a slice someone else deleted, whose event forgets it).
func (s *memberState) cacheBehind(key string, cached *writtenSlice) (bool, time.Duration) {
	v, ok := s.wroteSlices.Load(key)
	if !ok {
		return false, 0
	}
	w := v.(sliceWrite)
	left := pull.CacheWait - time.Since(w.at)
	if left <= 0 || (cached != nil && cached.generation >= w.generation) {
		s.wroteSlices.CompareAndDelete(key, v)
		return false, 0
	}
	return true, left
}

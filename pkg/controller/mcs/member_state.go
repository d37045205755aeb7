package mcs

import (
	"sync"
	"time"
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

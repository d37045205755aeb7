package mcs

import (
	"context"
	"slices"
	"sync"
)

// memberSet is the clusterset's members, which change at run time as
// members join and leave (Controller.Join, Controller.Leave). Readers take
// a snapshot.
type memberSet struct {
	mu   sync.RWMutex
	list []*member
	byID map[string]*member
	// changes counts the changes of the set. A plan records the count it
	// read its members at, a member the count it joined at: a plan older
	// than a member says nothing of it (syncMember).
	changes uint64
	// runCtx is Run's context once its workers run: members joining
	// after that are served under it.
	runCtx context.Context
}

// all returns a snapshot of the members.
func (s *memberSet) all() []*member {
	members, _ := s.at()
	return members
}

// at returns a snapshot of the members and the count of changes it
// reflects.
func (s *memberSet) at() ([]*member, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.list), s.changes
}

// get returns the member of cluster ID id, or nil.
func (s *memberSet) get(id string) *member {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID[id]
}

// serveFrom records Run's context: members join from then on.
func (s *memberSet) serveFrom(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runCtx = ctx
}

// serving returns Run's context (nil before its workers run) and the
// member now holding cluster ID id, if any.
func (s *memberSet) serving(id string) (context.Context, *member) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.runCtx, s.byID[id]
}

// replace makes m the member of its cluster ID in place of old (nil: a
// new member), unless another has taken the ID since old was read: then
// it returns that holder (nil when the ID was given up) and false.
func (s *memberSet) replace(old, m *member) (*member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.byID[m.id]; cur != old {
		return cur, false
	}
	if i := slices.Index(s.list, old); old != nil && i >= 0 {
		s.list[i] = m
	} else {
		s.list = append(s.list, m)
	}
	s.byID[m.id] = m
	s.changes++
	m.joinedAt = s.changes
	return m, true
}

// remove takes the member of cluster ID id out of the set and returns it,
// or nil if there is none.
func (s *memberSet) remove(id string) *member {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.byID[id]
	if m == nil {
		return nil
	}
	delete(s.byID, id)
	s.list = slices.DeleteFunc(s.list, func(x *member) bool { return x == m })
	s.changes++
	return m
}

// stop stops every member's informers and workers.
func (s *memberSet) stop() {
	for _, m := range s.all() {
		m.stop()
	}
}

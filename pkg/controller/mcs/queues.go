package mcs

import (
	"context"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// The two levels of queues (see the package doc): the clusterset queue,
// whose worker plans a name from a snapshot of every member
// (syncClusterset), and one queue per member, whose workers write the
// plan into it (syncMember).

func newLimiter() *rate.Limiter {
	// Overall retry rate across keys, as in client-go's default controller
	// rate limiter but with room for thousands of names: after a member
	// outage every name of the member is retried at once.
	return rate.NewLimiter(rate.Limit(500), 5000)
}

func rateLimiter() workqueue.TypedRateLimiter[string] {
	// Backoff is capped well below client-go's default 1000 s so that a
	// member coming back is caught up within seconds.
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: newLimiter()},
	)
}

// enqueueAll merges every name any member exports or imports again. It
// runs on rare transitions (a member syncing, a lease expiring), never on
// the hot path.
func (c *Controller) enqueueAll() {
	keys := map[string]bool{}
	c.mu.RLock()
	for k := range c.desired {
		keys[k] = true
	}
	c.mu.RUnlock()
	for _, m := range c.members.all() {
		for _, k := range m.exportKeys() {
			keys[k] = true
		}
	}
	for k := range keys {
		c.queue.Add(k)
	}
}

// work takes q's keys until q shuts down, each to sync: one that fails
// is retried at q's rate limit, one done is forgotten. Both levels' workers
// run it: the clusterset queue's with the plan, a member's with its
// writes.
func work(q workqueue.TypedRateLimitingInterface[string], sync func(key string) error) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		if err := sync(key); err != nil {
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// writeInto is the sync of m's queue: the member's writes of key, timed
// and counted.
func (c *Controller) writeInto(ctx context.Context, m *member) func(key string) error {
	return func(key string) error {
		if m.stale.Load() {
			// Written by the member that replaces it, from new caches.
			return nil
		}
		start := time.Now()
		err := c.syncMember(ctx, m, key)
		c.metrics.observeSliceSync(m.id, time.Since(start), err)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Writing into member failed; retrying", "cluster", m.id, "key", key, "err", err)
		}
		return err
	}
}

// enqueueMembers asks every member to write key.
func (c *Controller) enqueueMembers(key string) {
	for _, m := range c.members.all() {
		m.queue.Add(key)
	}
}

// writeAgain has m write every name at once: its writes, failing while it
// did not answer, may be backing off (up to 30 s).
func (c *Controller) writeAgain(m *member) {
	for _, k := range c.desiredKeys() {
		m.queue.Forget(k)
		m.queue.Add(k)
	}
}

func (c *Controller) desiredKeys() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	keys := make([]string, 0, len(c.desired))
	for k := range c.desired {
		keys = append(keys, k)
	}
	return keys
}

package ec2sim

import (
	"net/url"
	"sync"
	"time"
)

// limiter applies one account's request limits. Its buckets are made up
// front, one per action and category a request can fall in, so that the
// map is read-only and each bucket has its own lock: nodes asking for
// different actions never wait for each other, and nothing here ever
// waits for a node's model.
type limiter struct {
	cfg     *ThrottleConfig // private copy, never changed
	now     func() time.Time
	buckets map[string]*lockedBucket // by bucketFor's key
}

type lockedBucket struct {
	mu sync.Mutex
	b  tokenBucket
}

func newLimiter(cfg *ThrottleConfig, now func() time.Time) *limiter {
	l := &limiter{cfg: cfg.clone(), now: now, buckets: map[string]*lockedBucket{}}
	start := now()
	// A request of a modelled action falls in the category CategoryOf
	// gives for it asking for everything, or for something narrower.
	shapes := []url.Values{nil, {"MaxResults": {"5"}}}
	for action := range actions {
		for _, form := range shapes {
			key, b, ok := l.cfg.bucketFor(action, CategoryOf(action, form))
			if ok && l.buckets[key] == nil {
				l.buckets[key] = &lockedBucket{b: newTokenBucket(b, start)}
			}
		}
	}
	return l
}

// admit spends a token of the request's bucket: gateThrottled when it
// has none, gateNone when no bucket covers the request.
func (l *limiter) admit(action string, form url.Values) gate {
	key, _, ok := l.cfg.bucketFor(action, CategoryOf(action, form))
	if !ok {
		return gateNone
	}
	lb := l.buckets[key]
	if lb == nil {
		return gateNone // not an action the simulator implements
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.b.take(l.now()) {
		return gateAdmitted
	}
	return gateThrottled
}

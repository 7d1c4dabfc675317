package ec2sim

import (
	"sync"
	"sync/atomic"
)

// gate is what the request limits did to one request.
type gate int

const (
	gateNone      gate = iota // no limits apply (none configured, or not an implemented action)
	gateAdmitted              // a bucket had a token
	gateThrottled             // refused with RequestLimitExceeded
)

// tally counts requests per action, cheaply enough for an account of a
// thousand nodes: implemented actions have fixed slots made up front and
// are counted with atomics, without a lock; other names (unknown actions,
// a missing Action) share a small locked map.
type tally struct {
	known map[string]*actionTally // read-only after newTally
	mu    sync.Mutex
	other map[string]*actionTally
}

type actionTally struct {
	requests, admitted, throttled, retries, errors atomic.Int64
}

func newTally() *tally {
	t := &tally{known: map[string]*actionTally{}, other: map[string]*actionTally{}}
	for a := range actions {
		t.known[a] = &actionTally{}
	}
	return t
}

func (t *tally) slot(action string) *actionTally {
	if at, ok := t.known[action]; ok {
		return at
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.other[action]
	if !ok {
		at = &actionTally{}
		t.other[action] = at
	}
	return at
}

// add counts one answered request.
func (t *tally) add(c Call, g gate) {
	at := t.slot(c.Action)
	at.requests.Add(1)
	if c.Attempt > 1 {
		at.retries.Add(1)
	}
	if c.ErrorCode != "" {
		at.errors.Add(1)
	}
	switch g {
	case gateAdmitted:
		at.admitted.Add(1)
	case gateThrottled:
		at.throttled.Add(1)
	}
}

// each calls f for every action that has had a request.
func (t *tally) each(f func(action string, at *actionTally)) {
	for a, at := range t.known {
		if at.requests.Load() > 0 {
			f(a, at)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for a, at := range t.other {
		f(a, at)
	}
}

// ThrottleStat is what the request limits did to one action's requests.
type ThrottleStat struct {
	Admitted  int // requests a bucket had a token for
	Throttled int // requests refused with RequestLimitExceeded by a bucket
}

// ThrottleStats returns, per action, what this simulator's (or, for a
// node, its account's) request limits did to its own requests. Actions no
// bucket covered are left out; it is empty when throttling is off.
// Throttles made by the SetThrottle fault are not counted here.
func (s *Sim) ThrottleStats() map[string]ThrottleStat {
	out := map[string]ThrottleStat{}
	s.tally.each(func(action string, at *actionTally) {
		st := ThrottleStat{Admitted: int(at.admitted.Load()), Throttled: int(at.throttled.Load())}
		if st != (ThrottleStat{}) {
			out[action] = st
		}
	})
	return out
}

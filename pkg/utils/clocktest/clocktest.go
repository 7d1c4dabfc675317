// Package clocktest owns the one manually advanced clock the tests of this
// module share (the datastore's, the reconciler's, the agent's, the log
// limiter's). It is a leaf: standard library only, so even the datastore's
// tests, which may not reach anything above them, can use it. Production
// code never imports it.
package clocktest

import (
	"sort"
	"sync"
	"time"
)

// Start is the instant a new Clock shows: fixed, so failures replay.
var Start = time.Unix(1_800_000_000, 0)

// Clock is a clock that moves only when told to. Functions given to
// AfterFunc run, in the order they fall due, when Advance or Set reaches
// their time, outside the clock's lock. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []timer
}

type timer struct {
	at time.Time
	f  func()
}

// New returns a clock standing at Start.
func New() *Clock { return &Clock{now: Start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc runs f once the clock has moved d past now.
func (c *Clock) AfterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	c.timers = append(c.timers, timer{at: c.now.Add(d), f: f})
	c.mu.Unlock()
}

// Advance moves the clock forward by d and runs the timers now due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.fire()
}

// Set moves the clock to t and runs the timers now due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.fire()
}

// fire is called with c.mu held; it releases the lock, then runs the
// timers due by now, earliest first.
func (c *Clock) fire() {
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	var due []timer
	for len(c.timers) > 0 && !c.timers[0].at.After(c.now) {
		due = append(due, c.timers[0])
		c.timers = c.timers[1:]
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// Package clocktest owns the one manually advanced clock the tests of this
// module share (the datastore's, the reconciler's, the agent's). It is a
// leaf: standard library only, so even the datastore's tests, which may not
// reach anything above them, can use it. Production code never imports it.
package clocktest

import (
	"sync"
	"time"
)

// Start is the instant a new Clock shows: fixed, so failures replay.
var Start = time.Unix(1_800_000_000, 0)

// Clock is a clock that moves only when told to. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock standing at Start.
func New() *Clock { return &Clock{now: Start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

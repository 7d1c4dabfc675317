// Package trigger is a coalescing wake-up for a loop run by one goroutine
// (the pool manager, the pod-IP reconciler). Fire never blocks; fires that
// arrive while one is pending fold into it, with their reasons; and none is
// lost: a fire within the minimum interval of the loop's last run is
// delivered when the interval ends, never dropped. The loop waits on C and
// calls Take each time it runs, however it was woken.
//
// It starts no goroutine of its own: a delayed delivery is a time.AfterFunc,
// cancelled by Take or Stop. It imports nothing but the standard library.
package trigger

import (
	"sync"
	"time"
)

// Options tune a trigger.
type Options struct {
	MinInterval time.Duration // least time between two runs of the loop (0: none)
}

// Trigger is a pending-or-not wake-up with the reasons it was fired for.
// The zero value is not usable: call New or NewWithOptions.
type Trigger struct {
	c           chan struct{} // holds at most one delivered fire
	minInterval time.Duration

	mu       sync.Mutex
	fired    bool                // a fire since the last Take
	reasons  []string            // distinct reasons since the last Take, first fired first
	seen     map[string]struct{} // the set of reasons
	lastTake time.Time           // zero until the first Take
	late     *time.Timer         // the delayed delivery, while one is armed
	lateSeq  uint64              // tells the armed delivery from one cancelled as it ran
}

// New returns a trigger with nothing pending and no minimum interval.
func New() *Trigger { return NewWithOptions(Options{}) }

// NewWithOptions returns a trigger with nothing pending. A MinInterval <= 0
// is none.
func NewWithOptions(o Options) *Trigger {
	return &Trigger{c: make(chan struct{}, 1), minInterval: max(o.MinInterval, 0)}
}

// Fire asks the loop to run, for reason ("" gives none). It never blocks.
// It is delivered on C at once, unless the loop ran (called Take) less than
// MinInterval ago: then it is delivered when the interval ends. A fire
// while one is pending, delivered or not, folds into it.
func (t *Trigger) Fire(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fired = true
	t.addReason(reason)
	if t.late != nil {
		return // folded into the delayed delivery
	}
	wait := t.minInterval - time.Since(t.lastTake)
	if t.lastTake.IsZero() || wait <= 0 {
		t.deliver()
		return
	}
	t.lateSeq++
	seq := t.lateSeq
	// Armed under t.mu, which the callback takes first: it cannot see
	// t.late before it is set.
	t.late = time.AfterFunc(wait, func() { t.deliverLate(seq) })
}

// C is what the loop waits on. Receiving from it does not take the fire:
// the loop calls Take when it runs.
func (t *Trigger) C() <-chan struct{} { return t.c }

// Take is called by the loop each time it runs, whether C or its own timer
// woke it. It consumes the pending fire if any (a delivered one, so C does
// not wake the loop again for it, or a delayed one, which is cancelled),
// returns the reasons fired since the last Take (distinct, in the order
// first fired; nil when none), and starts the MinInterval.
func (t *Trigger) Take() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.c:
	default:
	}
	t.cancelLate()
	reasons := t.reasons
	t.fired, t.reasons, t.seen = false, nil, nil
	t.lastTake = time.Now()
	return reasons
}

// Pending reports whether a fire waits to be taken, delivered on C or held
// for the end of the MinInterval.
func (t *Trigger) Pending() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fired
}

// Stop cancels a delayed delivery, for a loop that ends, so that no timer
// outlives it. The fire stays pending (Pending says so, the next Take
// returns its reasons) but is not delivered on C; a later Fire behaves as
// usual. Safe to call at any time, more than once.
func (t *Trigger) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cancelLate()
}

// addReason records reason once; t.mu is held.
func (t *Trigger) addReason(reason string) {
	if reason == "" {
		return
	}
	if _, ok := t.seen[reason]; ok {
		return
	}
	if t.seen == nil {
		t.seen = map[string]struct{}{}
	}
	t.seen[reason] = struct{}{}
	t.reasons = append(t.reasons, reason)
}

// deliver puts the fire on C; t.mu is held. A fire already there absorbs it.
func (t *Trigger) deliver() {
	select {
	case t.c <- struct{}{}:
	default:
	}
}

// deliverLate is the delayed delivery armed as seq. One that Take or Stop
// cancelled while it was already running finds t.late changed and does
// nothing.
func (t *Trigger) deliverLate(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.late == nil || seq != t.lateSeq {
		return
	}
	t.late = nil
	t.deliver()
}

// cancelLate stops the delayed delivery if one is armed; t.mu is held.
func (t *Trigger) cancelLate() {
	if t.late != nil {
		t.late.Stop()
		t.late = nil
	}
}

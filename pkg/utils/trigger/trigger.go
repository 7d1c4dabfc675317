// Package trigger is a coalescing wake-up for a loop run by one goroutine
// (the pool manager, the pod-IP reconciler): Fire never blocks, fires that
// arrive while one is pending merge into it, and none is lost, since the
// loop sees a pending fire the next time it waits. It imports nothing but
// the standard library.
package trigger

// Trigger is a pending-or-not wake-up. The zero value is not usable: call New.
type Trigger struct{ c chan struct{} }

// New returns a trigger with nothing pending.
func New() *Trigger { return &Trigger{c: make(chan struct{}, 1)} }

// Fire asks the loop to run; it never blocks.
func (t *Trigger) Fire() {
	select {
	case t.c <- struct{}{}:
	default: // one is already pending: merged
	}
}

// C is what the loop waits on; receiving consumes the pending fire.
func (t *Trigger) C() <-chan struct{} { return t.c }

// Pending reports whether a fire waits to be consumed.
func (t *Trigger) Pending() bool { return len(t.c) > 0 }

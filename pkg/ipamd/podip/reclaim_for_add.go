package podip

import "context"

// ReclaimForAdd frees one leaked address an ADD that found the pool
// exhausted can be given at once, so the pod starts without a failed ADD.
// It takes a fresh list and applies the one decision (reclaim.go) with a
// limit of one address that has rested for the cooldown already. It never
// waits for a pass in progress (that pass frees what it finds), and it
// reports whether one was freed.
func (r *Reconciler) ReclaimForAdd(ctx context.Context) bool {
	if r.cfg.Mode != Enforce {
		return false
	}
	var evs eventBatch
	defer evs.post(ctx, r.events)
	if !r.run.TryLock() {
		return false // a pass is running: it releases leaks itself
	}
	defer r.run.Unlock()
	defer r.publish()
	l, err := r.view.list(ctx)
	if err != nil || len(l.sandboxes) == 0 {
		return false
	}
	res := r.decide(ctx, l, scope{path: pathAdd, limit: 1, rested: true}, &evs)
	return res.Reclaimed > 0
}

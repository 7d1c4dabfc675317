package podip

import (
	"context"
	"errors"
	"time"
)

// PassReport is what one pass saw and did (also served on /v1/reconciler).
type PassReport struct {
	Start     time.Time
	Duration  humanDuration
	Triggered bool
	Mode      Mode
	Skipped   string `json:",omitempty"`
	Sandboxes int
	// Allocations is how many the datastore held; Candidates how many of
	// them a list left out past their grace period, and Confirmed how
	// many of those the runtime, asked by their IDs, said it has no
	// sandbox for.
	Allocations, Candidates, Confirmed int
	Reclaimed, WouldReclaim            int
	// HandedOver counts leaks whose address went to the running sandbox
	// that uses it; Readopted free addresses assigned back to the READY
	// sandbox that uses them (the reverse check). Pending.Adopted counts
	// the third way an address reaches the sandbox using it.
	HandedOver, Readopted int
	Capped                bool
	// Pending is what the verification of addresses that joined the pool
	// did in this pass.
	Pending VerifyResult
	// UnplacedEnded counts checkpoint entries on no ENI whose sandbox the
	// runtime said is gone (unplaced.go).
	UnplacedEnded int `json:",omitempty"`
}

// Pass runs one reconciliation. Passes never overlap; events are posted
// after the reconciler's lock is released.
func (r *Reconciler) Pass(ctx context.Context, triggered bool) PassReport {
	var evs eventBatch
	rep := r.pass(ctx, triggered, &evs)
	evs.post(ctx, r.events)
	return rep
}

func (r *Reconciler) pass(ctx context.Context, triggered bool, evs *eventBatch) PassReport {
	r.run.Lock()
	defer r.run.Unlock()
	rep := PassReport{Start: r.now(), Triggered: triggered, Mode: r.cfg.Mode}
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		rep.Duration = humanDuration(r.now().Sub(rep.Start))
		r.m.reconcilePassSeconds.Observe(time.Duration(rep.Duration).Seconds())
		if rep.Skipped == "" {
			r.m.reconcileLastSuccess.Set(float64(r.now().Unix()))
		} else {
			r.totals.Skipped++
		}
		r.totals.Passes++
		r.last = rep
		r.publishLocked()
	}()
	r.mu.Lock()
	if now := r.now(); r.budgetAt.IsZero() || now.Sub(r.budgetAt) >= r.cfg.Interval {
		// Triggered passes come every few seconds on a full node: the cap
		// is per interval, not per pass.
		r.budget, r.budgetAt = r.capPerInterval(), now
	}
	r.mu.Unlock()

	l, ok := r.list(ctx, &rep)
	if !ok {
		return rep
	}
	allocs := r.store.Allocations()
	r.mu.Lock()
	r.judgeList(l, allocs, pathPass)
	r.mu.Unlock()
	if rep.Pending = r.verifyPending(ctx, l, evs); rep.Pending.Adopted > 0 {
		allocs = r.store.Allocations() // the adoptions are allocations now
	}
	rep.Sandboxes, rep.Allocations = len(l.sandboxes), len(allocs)
	if len(l.sandboxes) == 0 && len(allocs) > 0 {
		// A real node always lists at least aws-node's own sandbox.
		r.skip(&rep, SkipEmptyList, "the runtime listed no sandbox at all while addresses are allocated")
		return rep
	}
	res := r.reclaim(ctx, l, allocs, scope{path: pathPass}, evs)
	rep.Candidates, rep.Confirmed, rep.Reclaimed, rep.WouldReclaim, rep.HandedOver, rep.Capped = res.Candidates, res.Gone, res.Reclaimed, res.WouldReclaim, res.HandedOver, res.Capped
	if res.Held != "" {
		r.skip(&rep, res.Held, res.detail)
	}
	r.readopt(ctx, l, allocs, &rep, evs)
	rep.UnplacedEnded = r.endUnplaced(ctx, l)
	r.retire(l, allocs)
	if rep.Reclaimed+rep.Readopted+rep.HandedOver+rep.WouldReclaim > 0 || rep.Pending.Verified+rep.Pending.Adopted > 0 {
		r.log.Info("pod-IP reconcile pass", "sandboxes", rep.Sandboxes, "allocations", rep.Allocations,
			"candidates", rep.Candidates, "reclaimed", rep.Reclaimed, "wouldReclaim", rep.WouldReclaim,
			"handedOver", rep.HandedOver, "readopted", rep.Readopted, "verified", rep.Pending.Verified,
			"adoptedPending", rep.Pending.Adopted, "pendingWaiting", rep.Pending.Waiting, "triggered", triggered)
	}
	return rep
}

// list is the view's list for a pass: any failure skips the pass, and pending
// addresses keep waiting.
func (r *Reconciler) list(ctx context.Context, rep *PassReport) (*listing, bool) {
	l, err := r.view.list(ctx)
	if err != nil {
		reason := SkipCRIError
		if errors.Is(err, ErrRuntimeTimeout) {
			reason = SkipCRITimeout
		}
		r.skip(rep, reason, err.Error())
		if n := len(r.store.PendingAddresses()); n > 0 {
			r.mu.Lock()
			r.noteVerifyLocked(VerifyResult{Waiting: n, Reason: WaitRuntime})
			r.mu.Unlock()
		}
		return nil, false
	}
	return l, true
}

func (r *Reconciler) skip(rep *PassReport, reason, detail string) {
	rep.Skipped = reason
	r.m.reconcileSkipped.WithLabelValues(reason).Inc()
	r.log.Warn("pod-IP reconcile pass skipped; nothing freed", "reason", reason, "detail", detail)
}

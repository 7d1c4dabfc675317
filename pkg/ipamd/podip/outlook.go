package podip

import "time"

// Outlook is the reconciler's answer to "when does a full pool get an
// address back": what an ADD that found no address is told.
type Outlook struct {
	// Candidates are allocations past their grace period whose sandbox
	// the runtime no longer lists; Confirmed of them the runtime said,
	// asked by sandbox ID, it has no sandbox for.
	Candidates, Confirmed int
	// NextReclaim is when the next of them can be freed (zero: unknown).
	NextReclaim time.Time
	// ReportOnly: POD_IP_RECONCILE_MODE=report, nothing is freed.
	ReportOnly bool
	// PendingReason says why addresses that joined the pool wait for the
	// check against the runtime ("" when none waits).
	PendingReason string
}

// Outlook reads the last published status at now. A confirmed candidate
// can be given to an ADD once it has rested for the cooldown since the
// runtime said its sandbox is gone; another is asked about at the next
// pass, which a full pool triggers (MinTriggerGap after the last one).
func (r *Reconciler) Outlook(now time.Time) Outlook {
	st := r.Status()
	o := Outlook{Candidates: len(st.Candidates), ReportOnly: r.cfg.Mode == Report, PendingReason: st.PendingReason}
	next := r.nextPass(st.LastPass.Start)
	cool := r.store.Cooldown()
	for _, c := range st.Candidates {
		at := next
		if c.Confirmed {
			o.Confirmed++
			at = c.ConfirmedAt.Add(cool)
		}
		if !at.IsZero() && (o.NextReclaim.IsZero() || at.Before(o.NextReclaim)) {
			o.NextReclaim = at
		}
	}
	if !o.NextReclaim.IsZero() && o.NextReclaim.Before(now) {
		o.NextReclaim = now
	}
	return o
}

// nextPass is when the pass after one that started at last runs when
// triggered (zero: no pass yet).
func (r *Reconciler) nextPass(last time.Time) time.Time {
	if last.IsZero() {
		return time.Time{}
	}
	return last.Add(min(r.cfg.MinTriggerGap, r.cfg.Interval))
}

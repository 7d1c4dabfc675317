package podip

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// PassReport is what one pass saw and did (also served on /v1/reconciler).
type PassReport struct {
	Start        time.Time
	Duration     humanDuration
	Triggered    bool
	Mode         Mode
	Skipped      string `json:",omitempty"`
	Sandboxes    int
	Allocations  int
	Candidates   int
	Confirmed    int
	Reclaimed    int
	WouldReclaim int
	Readopted    int
	Capped       bool
	// Pending is what the verification of addresses that joined the pool
	// did in this pass.
	Pending VerifyResult
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
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := PassReport{Start: r.now(), Triggered: triggered, Mode: r.cfg.Mode}
	defer func() {
		r.listedIDs.forget()
		rep.Duration = humanDuration(r.now().Sub(rep.Start))
		r.m.reconcilePassSeconds.Observe(time.Duration(rep.Duration).Seconds())
		if rep.Skipped == "" {
			r.m.reconcileLastSuccess.Set(float64(r.now().Unix()))
		} else {
			r.totals.Skipped++
		}
		r.totals.Passes++
		r.totals.Reclaimed += rep.Reclaimed
		r.totals.WouldReclaim += rep.WouldReclaim
		r.totals.Readopted += rep.Readopted
		r.last = rep
		r.lastPass = r.now()
		r.publishLocked()
	}()
	r.budget = r.maxRelease()

	sandboxes, ok := r.list(ctx, &rep)
	if !ok {
		return rep
	}
	rep.Pending = r.verifyPendingLocked(ctx, sandboxes, evs)
	allocs := r.store.Allocations()
	rep.Sandboxes, rep.Allocations = len(sandboxes), len(allocs)
	if len(sandboxes) == 0 && len(allocs) > 0 {
		// A real node always lists at least aws-node's own sandbox.
		r.skip(&rep, SkipEmptyList, "the runtime listed no sandbox at all while addresses are allocated")
		return rep
	}
	confirmed := r.updateCandidates(sandboxes, allocs, triggered)
	rep.Candidates, rep.Confirmed = len(r.candidates), len(confirmed)
	if len(confirmed) > 0 {
		fresh, ok := r.release(ctx, confirmed, len(allocs), &rep, evs)
		if !ok {
			return rep // no usable fresh list
		}
		sandboxes = fresh
	} else {
		r.massStreak = 0
	}
	r.readoptLocked(ctx, sandboxes, allocs, &rep, evs)
	rep.Candidates = len(r.candidates)
	if rep.Reclaimed+rep.Readopted+rep.WouldReclaim > 0 || rep.Pending.Verified+rep.Pending.Adopted > 0 {
		r.log.Info("pod-IP reconcile pass", "sandboxes", rep.Sandboxes, "allocations", rep.Allocations,
			"candidates", rep.Candidates, "reclaimed", rep.Reclaimed, "wouldReclaim", rep.WouldReclaim,
			"readopted", rep.Readopted, "verified", rep.Pending.Verified, "adoptedPending", rep.Pending.Adopted,
			"pendingWaiting", rep.Pending.Waiting, "triggered", triggered)
	}
	return rep
}

// listLocked asks the runtime for every sandbox and records whether it
// answered. Requires r.mu.
func (r *Reconciler) listLocked(ctx context.Context) ([]cri.Sandbox, error) {
	sandboxes, err := r.cri.ListSandboxes(ctx)
	r.reachable = err == nil
	r.m.runtimeReachable.Set(boolGauge(r.reachable))
	if err != nil {
		return nil, err
	}
	r.lastList = r.now()
	if f := r.onFirstList; f != nil {
		r.onFirstList = nil
		f()
	}
	return sandboxes, nil
}

// list is listLocked for a pass: any failure skips the pass, and pending
// addresses keep waiting.
func (r *Reconciler) list(ctx context.Context, rep *PassReport) ([]cri.Sandbox, bool) {
	sandboxes, err := r.listLocked(ctx)
	if err != nil {
		reason := SkipCRIError
		if errors.Is(err, context.DeadlineExceeded) || status.Code(errors.Unwrap(err)) == codes.DeadlineExceeded || status.Code(err) == codes.DeadlineExceeded {
			reason = SkipCRITimeout
		}
		r.skip(rep, reason, err.Error())
		if n := len(r.store.PendingAddresses()); n > 0 {
			r.noteVerifyLocked(VerifyResult{Waiting: n, Reason: WaitRuntime})
		}
		return nil, false
	}
	return sandboxes, true
}

func (r *Reconciler) skip(rep *PassReport, reason, detail string) {
	rep.Skipped = reason
	r.m.reconcileSkipped.WithLabelValues(reason).Inc()
	r.log.Warn("pod-IP reconcile pass skipped; nothing freed", "reason", reason, "detail", detail)
}

// updateCandidates records which allocations' sandboxes are absent and
// returns those confirmed (seen absent on two passes a confirm delay apart),
// oldest assignment first.
func (r *Reconciler) updateCandidates(sandboxes []cri.Sandbox, allocs []datastore.Allocation, triggered bool) []*candidate {
	listed := r.listedIDs.listed(sandboxes)
	now := r.now()
	next := make(map[datastore.IPAMKey]*candidate)
	for _, a := range allocs {
		if _, ok := listed[a.Key.ContainerID]; ok || WithinGrace(a.AssignedAt, now, r.cfg.Grace) {
			continue
		}
		c := r.candidates[a.Key]
		if c == nil || !c.alloc.AssignedAt.Equal(a.AssignedAt) {
			c = &candidate{alloc: a, firstSeen: now}
		}
		c.passes++
		c.lastSeen = now
		next[a.Key] = c
	}
	r.candidates = next
	delay := r.cfg.ConfirmDelay
	if triggered {
		delay = r.cfg.TriggeredConfirmDelay
	}
	var confirmed []*candidate
	for _, c := range next {
		if r.confirmed(c, now, delay) {
			confirmed = append(confirmed, c)
		}
	}
	sort.Slice(confirmed, func(i, j int) bool { return confirmed[i].alloc.AssignedAt.Before(confirmed[j].alloc.AssignedAt) })
	return confirmed
}

// release re-lists, settles first what frees nothing (candidates whose
// sandbox is listed after all, and those whose address a running sandbox
// uses, handed over to it), then applies the brakes and frees what is
// still absent. It returns the fresh sandbox list, or false when there is
// none to use.
func (r *Reconciler) release(ctx context.Context, confirmed []*candidate, allocations int, rep *PassReport, evs *eventBatch) ([]cri.Sandbox, bool) {
	fresh, ok := r.list(ctx, rep)
	if !ok {
		return nil, false
	}
	if len(fresh) == 0 {
		r.skip(rep, SkipEmptyList, "the runtime listed no sandbox right before freeing")
		return nil, false
	}
	view := r.releaseViewLocked(ctx, fresh)
	var toFree []*candidate
	for _, c := range confirmed {
		a := c.alloc
		if view.isListed(a.Key.ContainerID) {
			delete(r.candidates, a.Key) // it is there after all
			continue
		}
		if s, used := view.user(a.IP); used {
			r.handOver(ctx, c, s, rep, evs)
			continue
		}
		toFree = append(toFree, c)
	}
	// The brakes are for frees only.
	if !r.massBrakeReleased(len(toFree), allocations, rep, evs) {
		return fresh, true
	}
	limit := r.maxRelease()
	if r.cfg.Mode == Enforce {
		limit = min(limit, r.budget)
	}
	if len(toFree) > limit {
		toFree = toFree[:limit]
		rep.Capped = true
	}
	if len(toFree) == 0 {
		return fresh, true
	}
	if blocked := view.blocked(); blocked != "" {
		r.skip(rep, SkipStatusUnknown, blocked)
		return fresh, true
	}
	for _, c := range toFree {
		a := c.alloc
		age := r.now().Sub(a.AssignedAt).Round(time.Second)
		if r.cfg.Mode == Report {
			if c.reported {
				continue // counted and announced once per leaked allocation
			}
			c.reported = true
			rep.WouldReclaim++
			r.m.reconcileWouldReclaim.Inc()
			r.log.Info("report mode: would reclaim leaked pod IP", "ip", a.IP.String(), "pod", podRef(a.Metadata),
				"containerID", a.Key.ContainerID, "age", age.String())
			evs.normalForPod(a.Metadata, "PodIPLeakReported", "ReconcilePodIPs", fmt.Sprintf(
				"would reclaim %s held by %s (container %s, age %s): its sandbox no longer exists", a.IP, podRef(a.Metadata), a.Key.ContainerID, age))
			continue
		}
		_, err := r.store.ReleaseIfUnchanged(a.Key, a.AssignedAt)
		if err != nil {
			delete(r.candidates, a.Key)
			if !errors.Is(err, datastore.ErrUnknownPod) && !errors.Is(err, datastore.ErrAllocationChanged) {
				r.log.Error("could not reclaim pod IP", "ip", a.IP.String(), "error", err)
			}
			continue
		}
		delete(r.candidates, a.Key)
		r.budget--
		rep.Reclaimed++
		r.m.reconcileReclaimed.Inc()
		r.log.Info("reclaimed leaked pod IP", "ip", a.IP.String(), "pod", podRef(a.Metadata),
			"containerID", a.Key.ContainerID, "age", age.String())
		evs.normalForPod(a.Metadata, "PodIPReclaimed", "ReleasePodIP", fmt.Sprintf(
			"reclaimed %s held by %s (container %s, age %s): its sandbox no longer exists", a.IP, podRef(a.Metadata), a.Key.ContainerID, age))
	}
	return fresh, true
}

// massBrakeReleased applies the mass-release brake to n frees out of
// allocations: more than half is held until it repeats on 3 passes, then
// proceeds at the per-pass cap, loudly. It reports whether freeing may go
// ahead.
func (r *Reconciler) massBrakeReleased(n, allocations int, rep *PassReport, evs *eventBatch) bool {
	if 2*n <= allocations {
		r.massStreak = 0
		return true
	}
	r.massStreak++
	if r.massStreak < 3 {
		evs.warning("PodIPMassReleaseHeld", "ReconcilePodIPs", fmt.Sprintf(
			"%d of %d pod IP allocations have no sandbox; holding the release until this repeats on 3 passes (%d so far)",
			n, allocations, r.massStreak))
		r.skip(rep, SkipMassHeld, fmt.Sprintf("%d of %d allocations would go", n, allocations))
		return false
	}
	verb := "releasing"
	if r.cfg.Mode == Report {
		verb = "report mode, would release"
	}
	evs.warning("PodIPMassReleaseProceeding", "ReconcilePodIPs", fmt.Sprintf(
		"%d of %d pod IP allocations have had no sandbox for %d passes; %s at most %d per pass",
		n, allocations, r.massStreak, verb, r.maxRelease()))
	return true
}

func podRef(m datastore.IPAMMetadata) string {
	if m.K8SPodName == "" {
		return "unknown pod"
	}
	return m.K8SPodNamespace + "/" + m.K8SPodName
}

// humanDuration renders as a Go duration string ("1.2ms") in JSON.
type humanDuration time.Duration

func (d humanDuration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

package podip

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// The one release decision. Every path that frees a leaked allocation (a
// pass, the reclaim for an ADD that found the pool exhausted, CNI GC)
// calls reclaimLocked with a listing it just took and its scope; the
// paths differ only in what triggers them and how many they may free. An
// allocation may be freed now when all of these hold:
//
//   - it is past its grace period (its CNI ADD returned long ago:
//     runtimes list a sandbox, and answer for its ID, only after that);
//   - its sandbox is not on the listing;
//   - no listed sandbox uses its address (that one is handed over to its
//     READY user instead, or left alone while the user is not ready);
//   - every listed sandbox that holds no allocation has known IPs (one
//     with unknown IPs could be using it);
//   - the runtime, asked for the sandbox by its ID after a list left it
//     out, said it has no such sandbox: per-allocation evidence. A live
//     sandbox that a partial list leaves out answers, and stays;
//   - the listing is corroborated (it lists ipamd's own pod, a sandbox
//     that holds an allocation, or continues a corroborated list): a
//     runtime that is not this node's says "not found" for every one of
//     our sandboxes. Frees on an uncorroborated listing are held until
//     three passes in a row saw one, then go at the capped rate;
//   - the per-interval budget allows it, when a cap applies (the
//     operator's POD_IP_RECONCILE_MAX_RELEASE_PER_PASS, or a release that
//     proceeds after a hold);
//   - the datastore entry is the one observed (same key, same assignment
//     time): the release is conditional.
//
// An address whose sandbox has been gone for at least the cooldown has
// rested already and is free at once; the others rest first. Report mode
// decides the same way and counts each allocation it would free once.

// candidate is an allocation past its grace period whose sandbox a list
// left out.
type candidate struct {
	alloc     datastore.Allocation
	firstSeen time.Time // first list (of any path) that left its sandbox out
	lastSeen  time.Time
	lists     int // lists that left it out since firstSeen
	// gone: asked by its ID after a list left it out, the runtime said it
	// has no such sandbox (first at goneAt). Sandbox IDs are never reused,
	// so it stays true.
	gone   bool
	goneAt time.Time
	// statusFailed: when asking for it by its ID last failed.
	statusFailed time.Time
	// counted: report mode counted and announced it (once).
	counted bool
	// noted: a hand-over that cannot happen yet was logged (once).
	noted bool
}

// path is an entry point of the decision: its wording and metrics.
type path int

const (
	pathPass path = iota
	pathAdd
	pathGC
)

// scope is what one entry point may free.
type scope struct {
	path path
	// include limits the decision to some allocations (CNI GC: those its
	// runtime no longer knows); nil includes all.
	include func(datastore.Allocation) bool
	// limit is the most this entry point frees (0: no limit of its own).
	limit int
	// rested keeps only addresses that rested for the cooldown already:
	// an ADD needs one it can be given now.
	rested bool
}

// reclaimResult is what one decision did.
type reclaimResult struct {
	Candidates   int // in scope
	Gone         int // the runtime said it has no such sandbox
	Reclaimed    int
	WouldReclaim int // report mode
	HandedOver   int
	Capped       bool
	// Held, when set, is why nothing was freed (a skip reason), with
	// detail for the log.
	Held, detail string
	// corroborated is the listing's corroboration, when it was asked.
	corroborated, asked bool
}

// holdRepeats is how many passes in a row, over at least holdRepeats-1
// intervals, must see an uncorroborated listing before its frees proceed
// (at the capped rate), when ipamd's own pod is not known.
const holdRepeats = 3

// reclaimLocked is the decision, on l (a successful, non-empty list taken
// by the caller) and allocs (a snapshot taken no earlier). Requires r.mu.
func (r *Reconciler) reclaimLocked(ctx context.Context, l *listing, allocs []datastore.Allocation, sc scope, evs *eventBatch) reclaimResult {
	var res reclaimResult
	now := r.now()
	r.noteAbsences(l, allocs, now)
	var in []*candidate
	for _, c := range r.candidates {
		if sc.include == nil || sc.include(c.alloc) {
			in = append(in, c)
		}
	}
	res.Candidates = len(in)
	if len(in) == 0 {
		return res
	}
	slices.SortFunc(in, func(a, b *candidate) int {
		return cmp.Or(a.alloc.AssignedAt.Compare(b.alloc.AssignedAt), cmp.Compare(a.alloc.Key.ContainerID, b.alloc.Key.ContainerID))
	})
	r.learn(ctx, l, allocs)
	l.users = r.usersOf(l)

	// What frees nothing comes first, whatever the brakes say.
	var rest []*candidate
	for _, c := range in {
		if s, used := l.user(c.alloc.IP); used {
			r.handOver(ctx, c, s, &res, evs)
			continue
		}
		rest = append(rest, c)
	}
	if len(rest) == 0 {
		return res
	}

	if why := l.blocked(); why != "" {
		res.Held, res.detail = SkipStatusUnknown, why
		return res
	}
	limit, capped, ok := r.brakesLocked(l, allocs, sc, len(rest), now, &res, evs)
	if !ok {
		return res
	}

	// Asked first: candidates whose status call never failed, so one that
	// keeps timing out never keeps the others unasked.
	slices.SortStableFunc(rest, func(a, b *candidate) int {
		return cmp.Compare(boolGauge(!a.statusFailed.IsZero()), boolGauge(!b.statusFailed.IsZero()))
	})
	asking := true // a status call that times out ends the round
	partial := 0
	for _, c := range rest {
		if limit > 0 && res.Reclaimed+res.WouldReclaim >= limit {
			res.Capped = true
			break
		}
		switch r.evidence(ctx, c, now, &asking) {
		case sandboxAlive:
			delete(r.candidates, c.alloc.Key) // a partial list left it out
			partial++
			continue
		case sandboxUnknown:
			continue
		}
		res.Gone++
		switch s, st := r.unlistedUser(ctx, c.alloc.IP, &asking); st {
		case inUse:
			// A sandbox a list showed using this address earlier, left out
			// now, answers by its ID: it is using it still.
			r.handOver(ctx, c, s, &res, evs)
			continue
		case userUnknown:
			continue // its earlier user did not answer: wait
		}
		rested := now.Sub(c.goneAt) >= r.store.Cooldown()
		if sc.rested && !rested {
			continue // not usable now: a pass frees it
		}
		if r.free(c, rested, sc, &res, evs) && capped && r.cfg.Mode == Enforce {
			r.budget--
		}
	}
	r.notePartial(partial)
	return res
}

// brakesLocked applies the brakes for frees to n candidates on l: an
// uncorroborated list holds them (for good when ipamd's own pod is known,
// since this node's runtime always lists it; else until passes over at
// least two intervals saw such lists three times in a row), and a cap
// (the operator's, or the one a release proceeding after a hold takes)
// limits them to the budget left until the next interval. It returns the
// limit (0: none) and whether the decision may go on. Requires r.mu.
func (r *Reconciler) brakesLocked(l *listing, allocs []datastore.Allocation, sc scope, n int, now time.Time, res *reclaimResult, evs *eventBatch) (limit int, capped, ok bool) {
	limit, capped = sc.limit, r.operatorCap()
	res.corroborated, res.asked = r.corroborated(l, allocs), true
	if !res.corroborated {
		if sc.path == pathPass {
			if r.holdStreak == 0 {
				r.holdSince = now
			}
			r.holdStreak++
		}
		if why := r.holdLocked(now); why != "" {
			res.Held, res.detail = SkipMassHeld, fmt.Sprintf("%d allocations have no sandbox on a list %s", n, why)
			if sc.path == pathPass {
				evs.warning("PodIPMassReleaseHeld", "ReconcilePodIPs", fmt.Sprintf(
					"%d pod IP allocations have no sandbox, but the runtime's list %s; holding the release", n, why))
			}
			return 0, false, false
		}
		capped = true
		if sc.path == pathPass {
			verb := "releasing"
			if r.cfg.Mode == Report {
				verb = "report mode, would release"
			}
			evs.warning("PodIPMassReleaseProceeding", "ReconcilePodIPs", fmt.Sprintf(
				"%d pod IP allocations have had no sandbox on %d passes of a runtime list that has nothing in common with this node's pods; %s at most %d per interval",
				n, r.holdStreak, verb, r.capPerInterval()))
		}
	}
	switch {
	case capped && r.cfg.Mode == Enforce && r.budget <= 0:
		res.Capped = true
		return 0, true, false
	case capped && r.cfg.Mode == Enforce:
		limit = minLimit(limit, r.budget)
	case capped:
		limit = minLimit(limit, r.capPerInterval())
	}
	return limit, capped, true
}

// holdLocked says why frees on an uncorroborated list are held ("" when
// they may proceed). Requires r.mu.
func (r *Reconciler) holdLocked(now time.Time) string {
	if r.cfg.PodName != "" {
		return fmt.Sprintf("does not name ipamd's own pod (MY_POD_NAME=%s), which this node's runtime always lists, nor any sandbox holding an allocation", r.cfg.PodName)
	}
	if r.holdStreak < holdRepeats || now.Sub(r.holdSince) < time.Duration(holdRepeats-1)*r.cfg.Interval {
		return fmt.Sprintf("names no sandbox holding an allocation (%d of %d passes, over at least %s)",
			r.holdStreak, holdRepeats, time.Duration(holdRepeats-1)*r.cfg.Interval)
	}
	return ""
}

// minLimit is the lower of two limits, where 0 means none.
func minLimit(a, b int) int {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// noteAbsences records which allocations past their grace period l
// leaves out: new candidates, and one more sighting for the others.
// Candidates whose allocation is listed, gone or changed are dropped.
// Every decision's list counts, whatever its scope. Requires r.mu.
func (r *Reconciler) noteAbsences(l *listing, allocs []datastore.Allocation, now time.Time) {
	next := make(map[datastore.IPAMKey]*candidate, len(r.candidates))
	for _, a := range allocs {
		if l.has(a.Key.ContainerID) || WithinGrace(a.AssignedAt, now, r.cfg.Grace) {
			continue
		}
		c := r.candidates[a.Key]
		if c == nil || !c.alloc.AssignedAt.Equal(a.AssignedAt) {
			c = &candidate{alloc: a, firstSeen: now}
		}
		if c.lists == 0 || c.lastSeen.Before(now) {
			c.lists++
			c.lastSeen = now
		}
		next[a.Key] = c
	}
	r.candidates = next
}

// evidence is what the runtime says of a candidate's sandbox asked by its
// ID.
type evidence int

const (
	sandboxGone evidence = iota
	sandboxAlive
	sandboxUnknown
)

// evidence asks the runtime for c's sandbox by its ID, unless it already
// said it has none. A failed call is asked again only after
// statusRetryAfter; one that timed out also ends the round (*asking): a
// hung runtime costs one timeout per decision, not one per candidate.
// Requires r.mu.
func (r *Reconciler) evidence(ctx context.Context, c *candidate, now time.Time, asking *bool) evidence {
	if c.gone {
		return sandboxGone
	}
	if !*asking || now.Sub(c.statusFailed) < statusRetryAfter {
		return sandboxUnknown
	}
	id := c.alloc.Key.ContainerID
	_, err := r.src.SandboxStatus(ctx, id)
	switch {
	case err == nil:
		return sandboxAlive
	case errors.Is(err, ErrSandboxNotFound):
		c.gone, c.goneAt = true, now
		return sandboxGone
	}
	if errors.Is(err, ErrRuntimeTimeout) || ctx.Err() != nil {
		*asking = false
	}
	if ctx.Err() == nil { // a caller that gave up learnt nothing of the sandbox
		if c.statusFailed.IsZero() {
			r.log.Warn("could not ask the runtime for the sandbox of an allocation its list left out; it is kept until the runtime answers",
				"ip", c.alloc.IP.String(), "containerID", id, "error", err)
		}
		c.statusFailed = now
	}
	return sandboxUnknown
}

// notePartial logs, when the count changes, how many sandboxes a list
// left out that answered when asked by their IDs. Requires r.mu.
func (r *Reconciler) notePartial(n int) {
	if n == r.partial {
		return
	}
	if n > 0 {
		r.log.Warn("the runtime's sandbox list left out sandboxes that answer when asked by their IDs: its lists are partial, and nothing they leave out is freed",
			"sandboxes", n)
	}
	r.partial = n
}

// free releases (or, in report mode, counts once) one allocation the
// decision judged leaked, and accounts for it. It reports whether an
// address was released. Requires r.mu.
func (r *Reconciler) free(c *candidate, rested bool, sc scope, res *reclaimResult, evs *eventBatch) bool {
	a := c.alloc
	age := r.now().Sub(a.AssignedAt).Round(time.Second)
	if r.cfg.Mode == Report {
		if c.counted {
			return false // counted and announced once per leaked allocation
		}
		c.counted = true
		res.WouldReclaim++
		r.totals.WouldReclaim++
		r.m.reconcileWouldReclaim.Inc()
		r.log.Info("report mode: would reclaim leaked pod IP", "ip", a.IP.String(), "pod", podRef(a.Metadata),
			"containerID", a.Key.ContainerID, "age", age.String())
		evs.normalForPod(a.Metadata, "PodIPLeakReported", "ReconcilePodIPs", fmt.Sprintf(
			"would reclaim %s held by %s (container %s, age %s): its sandbox no longer exists", a.IP, podRef(a.Metadata), a.Key.ContainerID, age))
		return false
	}
	release := r.store.ReleaseIfUnchanged
	if rested {
		release = r.store.ReleaseRestedIfUnchanged
	}
	if _, err := release(a.Key, a.AssignedAt); err != nil {
		if errors.Is(err, datastore.ErrUnknownPod) || errors.Is(err, datastore.ErrAllocationChanged) {
			delete(r.candidates, a.Key) // no longer this allocation
			return false
		}
		r.log.Error("could not reclaim pod IP; trying again at the next pass", "ip", a.IP.String(), "error", err)
		return false
	}
	delete(r.candidates, a.Key)
	res.Reclaimed++
	r.totals.Reclaimed++
	r.m.reconcileReclaimed.Inc()
	what, note := "reclaimed leaked pod IP", ": its sandbox no longer exists"
	switch sc.path {
	case pathAdd:
		r.m.reclaimedForAdd.Inc()
		what, note = "reclaimed leaked pod IP for an ADD that found the pool exhausted", " for a new pod: its sandbox no longer exists"
	case pathGC:
		what, note = "CNI GC released pod IP", ": the runtime no longer has it (CNI GC)"
	}
	r.log.Info(what, "ip", a.IP.String(), "pod", podRef(a.Metadata), "containerID", a.Key.ContainerID, "age", age.String(), "rested", rested)
	evs.normalForPod(a.Metadata, "PodIPReclaimed", "ReleasePodIP", fmt.Sprintf(
		"reclaimed %s held by %s (container %s, age %s)%s", a.IP, podRef(a.Metadata), a.Key.ContainerID, age, note))
	return true
}

// decideLocked is the decision for an entry point on its fresh listing l,
// which then becomes the previous list for the next one's corroboration.
// Requires r.mu.
func (r *Reconciler) decideLocked(ctx context.Context, l *listing, sc scope, evs *eventBatch) reclaimResult {
	allocs := r.store.Allocations()
	res := r.reclaimLocked(ctx, l, allocs, sc, evs)
	r.retire(l, allocs, res)
	return res
}

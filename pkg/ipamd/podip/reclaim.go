package podip

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// The one release decision (docs/pod-ip-reconciler.md, "One release
// decision", states its rules). Every path that frees a leaked allocation
// (a pass, the reclaim for an ADD that found the pool exhausted, CNI GC)
// calls reclaim with a listing it just took and its scope; the
// paths differ only in what triggers them and how many they may free.
// Whether the address is in use is the one answer of inuse.go; what the
// runtime said of the allocation's sandbox asked by its ID comes from
// runtimeView. An address whose sandbox has been gone for at least the
// cooldown has rested already and is free at once; the others rest first.
// Report mode decides the same way and counts each allocation it would
// free once.

// candidate is an allocation past its grace period whose sandbox a list
// left out.
type candidate struct {
	alloc     datastore.Allocation
	firstSeen time.Time // first list (of any path) that left its sandbox out
	lastSeen  time.Time
	lists     int // lists that left it out since firstSeen
	// Whether the runtime said its sandbox is gone, and since when, is the
	// view's (runtimeView.goneAt): sandbox IDs are never reused.
	// counted: report mode counted and announced it (once).
	counted bool
	// noted: a hand-over that cannot happen yet was logged (once).
	noted bool
	// held says why the last decision did not free it ("" when it was
	// not decided on), and usedBy names the sandbox that decision found
	// using its address ("" when none).
	held, usedBy string
	// use is the last answer on its address (judged: one was given).
	use    Use
	judged bool
}

// addressUse is use in CandidateStatus's words.
func (c *candidate) addressUse() string {
	switch {
	case !c.judged:
		return ""
	case c.use == Unused:
		return "unused"
	case c.use == UseUnknown:
		return "unknown"
	}
	return "used"
}

// judge records the answer on c's address and the sandbox that uses it.
func (c *candidate) judge(u Use, by string) { c.use, c.judged, c.usedBy = u, true, by }

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
}

// holdRepeats is how many passes in a row, over at least holdRepeats-1
// intervals, must see an uncorroborated listing before its frees proceed
// (at the capped rate), when ipamd's own pod is not known.
const holdRepeats = 3

// reclaim is the decision, on l (a successful, non-empty list taken by
// the caller) and allocs (a snapshot taken no earlier): the runtime is
// asked first (runtimeView, outside the decision lock), what frees
// nothing and the brakes are decided under it, the candidates the brakes
// let through are asked by their IDs outside it again, the plan
// (planRelease) is decided under it, the node rules of the addresses it
// frees are removed outside it (netlink), and the plan is applied under
// it. Requires r.run.
func (r *Reconciler) reclaim(ctx context.Context, l *listing, allocs []datastore.Allocation, sc scope, evs *eventBatch) reclaimResult {
	rd := &round{}
	r.view.learn(ctx, l, allocs, rd)
	r.noteCardCover(l, nil)

	r.mu.Lock()
	res, rest, limit, capped, ok := r.prepareLocked(ctx, l, allocs, sc, evs)
	r.mu.Unlock()
	if !ok {
		return res
	}
	in := releaseInput{cands: rest, goneAt: r.view.goneAt, use: r.useEvidence(l), report: r.cfg.Mode == Report,
		limit: limit, restedOnly: sc.rested, cooldown: r.store.Cooldown(), now: r.now()}
	r.askCandidates(ctx, l, &in, rd)

	r.mu.Lock()
	plan := planRelease(in)
	r.mu.Unlock()
	r.removeRulesOfFrees(plan)

	r.mu.Lock()
	defer r.mu.Unlock()
	res.Gone, res.Capped = plan.gone, plan.capped
	r.applyReleaseLocked(ctx, plan, sc, capped, &res, evs)
	r.notePartial(plan.partial)
	return res
}

// prepareLocked notes the candidates of l, hands the addresses listed
// sandboxes use over (what frees nothing comes first, whatever the brakes
// say), and applies the brakes. It returns the candidates that may be
// freed, in the order they are decided, the limit, whether a cap applies
// and whether the decision goes on. Requires r.run and r.mu.
func (r *Reconciler) prepareLocked(ctx context.Context, l *listing, allocs []datastore.Allocation, sc scope, evs *eventBatch) (res reclaimResult, rest []*candidate, limit int, capped, ok bool) {
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
		return res, nil, 0, false, false
	}
	slices.SortFunc(in, func(a, b *candidate) int {
		return cmp.Or(a.alloc.AssignedAt.Compare(b.alloc.AssignedAt), cmp.Compare(a.alloc.Key.ContainerID, b.alloc.Key.ContainerID))
	})
	ev := r.useEvidence(l)
	for _, c := range in {
		if s, used := ev.users[c.alloc.IP]; used {
			c.held = fmt.Sprintf("sandbox %s (pod %s/%s, ready %v) reports its address", s.ID, s.Namespace, s.Name, s.Ready)
			c.judge(usedBy(s), s.ID)
			r.handOver(ctx, c, s, &res, evs)
			continue
		}
		rest = append(rest, c)
	}
	if len(rest) == 0 {
		return res, nil, 0, false, false
	}
	// hold keeps rest for why; doubt (a sandbox of unknown IPs, a list
	// that may be another runtime's) makes the use of their addresses
	// unknown: an earlier answer is not this decision's.
	hold := func(why string, doubt bool) {
		for _, c := range rest {
			c.held = why
			if doubt {
				c.judge(UseUnknown, "")
			}
		}
	}
	if why := l.blocked(); why != "" {
		res.Held, res.detail = SkipStatusUnknown, why
		hold(why, true)
		return res, nil, 0, false, false
	}
	limit, capped, ok = r.brakesLocked(l, allocs, sc, len(rest), now, &res, evs)
	if !ok {
		hold(cmp.Or(res.detail, "the per-interval release budget is spent"), res.Held == SkipMassHeld)
	}
	// Asked first: candidates whose status call never failed, so one that
	// keeps timing out never keeps the others unasked.
	failed := func(c *candidate) float64 {
		_, f := r.view.failed[c.alloc.Key.ContainerID]
		return boolGauge(f)
	}
	slices.SortStableFunc(rest, func(a, b *candidate) int { return cmp.Compare(failed(a), failed(b)) })
	return res, rest, limit, capped, ok
}

// askCandidates asks the runtime, in order, for each candidate's sandbox
// by its ID and, for one it says is gone, for the last known users of its
// address; with a limit it stops once the plan would free that many.
// Requires r.run (not r.mu: it calls the runtime).
func (r *Reconciler) askCandidates(ctx context.Context, l *listing, in *releaseInput, rd *round) {
	in.asked = make(map[*candidate]answer, len(in.cands))
	for i, c := range in.cands {
		if in.limit > 0 && i > 0 {
			asked := *in
			if asked.cands = in.cands[:i]; planRelease(asked).capped {
				return // what is asked already fills the limit
			}
		}
		_, ans := r.view.ask(ctx, c.alloc.Key.ContainerID, rd)
		in.asked[c] = ans
		if ans == answerGone {
			r.askLastUsers(ctx, in.use, l, []netip.Prefix{single(c.alloc.IP)}, nil, rd)
		}
	}
}

// removeRulesOfFrees removes the node rules of the addresses plan frees,
// before they are released (removeNodeRules): the decision is taken, the
// netlink calls run outside r.mu, and the frees then go ahead whatever
// they did. Report mode frees nothing and removes nothing. Requires r.run
// (so the plan's candidates stay this decision's), not r.mu.
func (r *Reconciler) removeRulesOfFrees(plan releasePlan) {
	if r.rules == nil || r.cfg.Mode == Report {
		return
	}
	for _, st := range plan.steps {
		if st.act == actFree {
			removeNodeRules(r.rules, r.store.Find, st.c.alloc, r.log)
		}
	}
}

// applyReleaseLocked carries a release plan out. Requires r.mu.
func (r *Reconciler) applyReleaseLocked(ctx context.Context, plan releasePlan, sc scope, capped bool, res *reclaimResult, evs *eventBatch) {
	for _, st := range plan.steps {
		c := st.c
		c.held = st.why
		if st.judged {
			c.judge(st.use, st.user.ID) // user: set by actHandOver only
		} else {
			c.judged, c.usedBy = false, "" // not this decision's answer
		}
		switch st.act {
		case actForget:
			delete(r.candidates, c.alloc.Key) // a partial list left it out
		case actHandOver:
			r.handOver(ctx, c, st.user, res, evs)
		case actFree:
			if r.free(c, st.rested, sc, res, evs) && capped && r.cfg.Mode == Enforce {
				r.budget--
			}
		}
	}
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
	if !r.judgeList(l, allocs, sc.path) {
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

// decide is the decision for an entry point on its fresh listing l,
// which then becomes the previous list for the next one's corroboration.
// Requires r.run.
func (r *Reconciler) decide(ctx context.Context, l *listing, sc scope, evs *eventBatch) reclaimResult {
	allocs := r.store.Allocations()
	res := r.reclaim(ctx, l, allocs, sc, evs)
	r.retire(l, allocs)
	return res
}

package podip

import (
	"net/netip"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// The plans: pure functions from the evidence to what to do, one for the
// leaks a decision may free and one for the addresses that joined the
// pool. They read no runtime and no datastore; the callers gather the
// evidence first (runtimeView, outside the decision lock) and apply the
// plan after, conditionally (every datastore change checks that the entry
// is still the one observed). docs/pod-ip-reconciler.md states the rules
// they implement.

// releaseAct is what a release plan does with one candidate.
type releaseAct int

const (
	// actKeep: nothing now (why says what it waits for).
	actKeep releaseAct = iota
	// actForget: its sandbox answered by its ID, so a partial list left it
	// out: not a candidate.
	actForget
	// actHandOver: a sandbox uses its address; the address goes to it
	// (when READY and in enforce mode) or stays.
	actHandOver
	// actFree: released (report mode: counted once).
	actFree
)

// releaseStep is the plan for one candidate.
type releaseStep struct {
	c    *candidate
	act  releaseAct
	user Sandbox // actHandOver
	// use is the answer on the address (judged: its sandbox is gone, so
	// the answer was asked for).
	use    Use
	judged bool
	// rested: gone for at least the cooldown, so free at once (actFree).
	rested bool
	why    string
}

// releaseInput is what a release plan reads.
type releaseInput struct {
	// cands are the candidates the brakes let through, in the order they
	// are decided; asked holds what the runtime said of each one's sandbox
	// asked by its ID (absent: not asked).
	cands []*candidate
	asked map[*candidate]answer
	// goneAt is when the runtime first said a sandbox is gone.
	goneAt func(id string) (time.Time, bool)
	use    *addrEvidence
	report bool // report mode: a free counts once per candidate
	// limit is the most frees (0: none); restedOnly keeps only addresses
	// that rested for the cooldown already (an ADD's).
	limit      int
	restedOnly bool
	cooldown   time.Duration
	now        time.Time
}

// releasePlan is the plan of one decision.
type releasePlan struct {
	steps   []releaseStep
	gone    int // candidates whose sandbox the runtime said is gone
	partial int // candidates whose sandbox answered (a partial list)
	frees   int
	capped  bool
}

// planRelease decides, candidate by candidate in order, until the limit:
// one whose sandbox answered is forgotten; one whose sandbox did not
// answer waits; one whose sandbox is gone is handed over when a sandbox
// uses its address, waits when that use is unknown, and is freed
// otherwise (at once when it rested for the cooldown since the runtime
// first said its sandbox is gone, after resting otherwise; an ADD takes
// only a rested one).
func planRelease(in releaseInput) releasePlan {
	var p releasePlan
	for _, c := range in.cands {
		if in.limit > 0 && p.frees >= in.limit {
			p.capped = true
			break
		}
		step := releaseStep{c: c}
		switch ans, asked := in.asked[c]; {
		case asked && ans == answerAlive:
			step.act = actForget
			p.partial++
		case !asked || ans == answerUnknown:
			step.why = "the runtime has not said whether its sandbox exists"
		default:
			p.gone++
			step = planGone(in, c)
			if step.act == actFree && !(in.report && c.counted) {
				p.frees++
			}
		}
		p.steps = append(p.steps, step)
	}
	return p
}

// planGone is the plan for a candidate whose sandbox the runtime said is
// gone. Its address's use is cardUseOf's: on a card above 0 a listed
// multi-NIC sandbox the runtime's IPs do not cover could be using it.
func planGone(in releaseInput, c *candidate) releaseStep {
	use, s, why := in.use.cardUseOf(c.alloc.IP)
	step := releaseStep{c: c, use: use, judged: true}
	switch use {
	case UsedReady, UsedNotReady:
		step.act, step.user, step.why = actHandOver, s, why
		return step
	case UseUnknown:
		step.why = why
		return step
	}
	at, _ := in.goneAt(c.alloc.Key.ContainerID)
	step.rested = in.now.Sub(at) >= in.cooldown
	if in.restedOnly && !step.rested {
		step.why = "not rested for the cooldown yet: a pass frees it"
		return step
	}
	step.act = actFree
	return step
}

// verifyAct is what a verification plan does with one pending address.
type verifyAct int

const (
	actWait verifyAct = iota
	actVerify
	actAdopt
)

// verifyStep is the plan for one pending address (not a whole prefix).
type verifyStep struct {
	p      datastore.Pending
	act    verifyAct
	user   Sandbox // actAdopt, or the user it waits for
	reason string  // actWait: a Wait* reason
	why    string
	// uncovered: it waits (WaitStatuses) only on the multi-NIC sandbox
	// the runtime's IPs do not cover (user).
	uncovered bool
}

// planVerify decides each pending single address by the one answer (for
// an address joining the pool: cardUseOf): no sandbox uses it, verified
// free; a READY sandbox uses it, adopted by it
// (enforce mode); otherwise it waits. Whole prefixes are settled by
// settlePrefix.
func planVerify(pending []datastore.Pending, use *addrEvidence, enforce bool) []verifyStep {
	steps := make([]verifyStep, 0, len(pending))
	for _, p := range pending {
		if !p.IP.IsValid() {
			continue
		}
		st := verifyStep{p: p}
		u, s, why, uncovered := use.cardUse(p.IP)
		st.user, st.why, st.uncovered = s, why, uncovered
		switch {
		case u == Unused:
			st.act = actVerify
		case u == UseUnknown:
			st.reason = WaitStatuses
		case u == UsedReady && enforce:
			st.act = actAdopt
		default:
			st.reason = WaitInUse
		}
		steps = append(steps, st)
	}
	return steps
}

// pendingAddrs are the addresses of pending as prefixes, and the last
// holders the datastore remembers for them, by address.
func pendingAddrs(pending []datastore.Pending) ([]netip.Prefix, map[netip.Addr]string) {
	addrs := make([]netip.Prefix, 0, len(pending))
	var holders map[netip.Addr]string
	for _, p := range pending {
		if p.IP.IsValid() {
			addrs = append(addrs, single(p.IP))
		} else {
			addrs = append(addrs, p.Prefix)
		}
		for _, h := range p.LastHolders {
			holders = setAddr(holders, h.IP, h.Key.ContainerID)
		}
	}
	return addrs, holders
}

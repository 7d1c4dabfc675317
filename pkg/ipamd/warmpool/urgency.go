package warmpool

// PodsWaitBelow is the assignable count under which pods are about to
// wait: with none assignable the next ADD fails, and with one the next pod
// takes it and the pod after that fails. Either way the pool grows only
// at the next step and then waits on EC2 (an assignment, or an ENI's
// create and attach), so growth that starts after the pool is empty comes
// too late for the pods arriving meanwhile.
const PodsWaitBelow = 2

// PodsAboutToWait reports whether fewer than PodsWaitBelow addresses are
// assignable: held, not assigned, not cooling and not pending (disputed
// addresses are not in Stats at all). Then Decide counts cooling addresses
// as unavailable to growth, and HoldBackAtStart never holds growth back.
func PodsAboutToWait(s Stats) bool {
	return assignable(normStats(s)) < PodsWaitBelow
}

// coolingAsAssigned is s with its cooling addresses counted as assigned
// (never more assigned than held, unless s already claims so).
func coolingAsAssigned(s Stats) Stats {
	s.AssignedIPs = min(satAdd(s.AssignedIPs, s.CooldownIPs), max(s.TotalIPs, s.AssignedIPs))
	s.CooldownIPs = 0
	return s
}

// StartEvidence is what HoldBackAtStart decides from.
type StartEvidence struct {
	// InStartSpread: the node's random point of WARM_POOL_START_SPREAD
	// has not come yet.
	InStartSpread bool
	// Throttling: EC2 recently answered one of the node's requests with a
	// throttling error, or a request recently had to wait for the node's
	// EC2 request budget.
	Throttling bool
}

// HoldBackAtStart reports whether the growth a decision on s asks for
// waits for the start's spread (WARM_POOL_START_SPREAD). It does only
// while all of these hold:
//   - the node's point of the spread has not come (e.InStartSpread);
//   - the account shows it is throttling (e.Throttling): without that
//     evidence a fresh node grows as upstream's does, spare included;
//   - pods are not about to wait (PodsAboutToWait);
//   - the pool holds at least MINIMUM_IP_TARGET addresses: what the
//     operator asked to be there is not a spare.
//
// So only spares wait, and only while the account's request tokens are
// short: a fleet started together then spends them on the ENIs pods wait
// for first.
func HoldBackAtStart(s Stats, c Config, e StartEvidence) bool {
	s, c = normStats(s), normConfig(c)
	return e.InStartSpread && e.Throttling && !PodsAboutToWait(s) && s.TotalIPs >= c.MinimumIPTarget
}

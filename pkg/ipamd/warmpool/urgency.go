package warmpool

// PodsWaitBelow is the assignable count under which pods are about to
// wait even when none arrived lately: with none assignable the next ADD
// fails, and with one the next pod takes it and the pod after that fails.
const PodsWaitBelow = 2

// PodsAboutToWait reports whether pods are about to wait for the pool to
// grow: fewer addresses are assignable (held, not assigned, not cooling,
// not pending; disputed ones are not in Stats at all) than PodsWaitBelow
// plus RecentAssigns. The pool decides once a step and growth then waits
// on EC2 (an assignment, or an ENI's create and attach), so the pods that
// arrive meanwhile, as many as arrived since the last decision, need
// addresses already there. Then Decide counts cooling addresses as
// unavailable to growth, and HoldSpareBack never holds growth back.
func PodsAboutToWait(s Stats) bool {
	s = normStats(s)
	return assignable(s) < satAdd(PodsWaitBelow, s.RecentAssigns)
}

// coolingAsAssigned is s with its cooling addresses counted as assigned
// (never more assigned than held, unless s already claims so).
func coolingAsAssigned(s Stats) Stats {
	s.AssignedIPs = min(satAdd(s.AssignedIPs, s.CooldownIPs), max(s.TotalIPs, s.AssignedIPs))
	s.CooldownIPs = 0
	return s
}

// HoldSpareBack reports whether the growth a decision on s asks for waits
// for the start's spread (WARM_POOL_START_SPREAD) while inStartSpread (the
// node's random point of it has not come). Only a spare waits: growth pods
// are not about to wait on (PodsAboutToWait), with the pool at
// MINIMUM_IP_TARGET or above (what the operator asked to be there is not a
// spare). A fleet started together then spends the account's ENI tokens
// on the ENIs its pods wait for first, and a node whose pods keep arriving
// grows as upstream's does.
func HoldSpareBack(s Stats, c Config, inStartSpread bool) bool {
	s, c = normStats(s), normConfig(c)
	return inStartSpread && !PodsAboutToWait(s) && s.TotalIPs >= c.MinimumIPTarget
}

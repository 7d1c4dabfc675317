package warmpool

// normStats clamps a snapshot into a shape the math can trust: negative
// counts become 0, and FreePrefixes never exceeds TotalPrefixes (the pool
// cannot give back prefixes it does not hold).
func normStats(s Stats) Stats {
	s.TotalIPs = nonNeg(s.TotalIPs)
	s.AssignedIPs = nonNeg(s.AssignedIPs)
	s.CooldownIPs = nonNeg(s.CooldownIPs)
	s.PendingIPs = nonNeg(s.PendingIPs)
	s.RecentAssigns = nonNeg(s.RecentAssigns)
	s.TotalPrefixes = nonNeg(s.TotalPrefixes)
	s.FreePrefixes = min(nonNeg(s.FreePrefixes), s.TotalPrefixes)
	return s
}

// normConfig maps every unset (<= 0) target, an unknown (<= 0) MaxPods or
// MaxAddresses and a negative SlotsPerENI to 0.
func normConfig(c Config) Config {
	c.WarmENITarget = nonNeg(c.WarmENITarget)
	c.WarmIPTarget = nonNeg(c.WarmIPTarget)
	c.MinimumIPTarget = nonNeg(c.MinimumIPTarget)
	c.WarmPrefixTarget = nonNeg(c.WarmPrefixTarget)
	c.MaxPods = nonNeg(c.MaxPods)
	c.MaxAddresses = nonNeg(c.MaxAddresses)
	c.SlotsPerENI = nonNeg(c.SlotsPerENI)
	return c
}

// available is the number of unassigned addresses, cooling ones included.
// Inconsistent stats with more assigned than held yield 0, not a negative.
func available(s Stats) int {
	return nonNeg(s.TotalIPs - s.AssignedIPs)
}

// assignable is what the next ADD could be given: the available addresses
// that are neither cooling nor pending (never negative; no overflow, every
// operand is >= 0 and each difference is re-clamped).
func assignable(s Stats) int {
	return nonNeg(nonNeg(available(s)-s.CooldownIPs) - s.PendingIPs)
}

// ipTargetsSet reports whether WARM_IP_TARGET or MINIMUM_IP_TARGET is set.
func ipTargetsSet(c Config) bool {
	return c.WarmIPTarget > 0 || c.MinimumIPTarget > 0
}

// warmIPs is the effective warm-IP target: at least 1, so a pool sized by
// MINIMUM_IP_TARGET alone still keeps an address ready for the next pod.
func warmIPs(c Config) int {
	return max(c.WarmIPTarget, 1)
}

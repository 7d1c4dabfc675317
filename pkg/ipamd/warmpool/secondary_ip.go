package warmpool

// SecondaryIPTargetState sizes the pool in individual IPs against
// WARM_IP_TARGET and MINIMUM_IP_TARGET. It ignores PrefixDelegation.
//
// enabled is true iff either target is set. With warm = max(WarmIPTarget, 1)
// and available = TotalIPs - AssignedIPs:
//
//	short = max(warm - available, MinimumIPTarget - TotalIPs, 0)
//	over  = max(min(available - warm, TotalIPs - MinimumIPTarget), 0)
//
// short > 0 needs warm > available or MinimumIPTarget > TotalIPs, and either
// makes the min in over negative, so short and over are never both > 0.
func SecondaryIPTargetState(s Stats, c Config) (short, over int, enabled bool) {
	s, c = normStats(s), normConfig(c)
	if !ipTargetsSet(c) {
		return 0, 0, false
	}
	avail := available(s)
	warm := warmIPs(c)
	// All operands are >= 0, so these differences cannot overflow.
	short = max(warm-avail, c.MinimumIPTarget-s.TotalIPs, 0)
	over = max(min(avail-warm, s.TotalIPs-c.MinimumIPTarget), 0)
	return short, over, true
}

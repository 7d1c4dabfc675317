package warmpool

// PrefixTargetState sizes the pool in /28 prefixes. It ignores
// PrefixDelegation.
//
// When WARM_IP_TARGET or MINIMUM_IP_TARGET is set they take precedence over
// WARM_PREFIX_TARGET, and the pool must hold
// needed = max(AssignedIPs + max(WarmIPTarget, 1), MinimumIPTarget) addresses:
//
//	short = ceil(max(needed - TotalIPs, 0) / 16)
//	over  = min(FreePrefixes, floor((TotalIPs - needed) / 16))  if TotalIPs > needed, else 0
//
// Otherwise, when WARM_PREFIX_TARGET is set:
//
//	short = max(WarmPrefixTarget - FreePrefixes, 1)  if available < 16*WarmPrefixTarget, else 0
//	over  = max(FreePrefixes - WarmPrefixTarget, 0)
//
// Otherwise prefix targets are not enabled and (0, 0, false) is returned.
func PrefixTargetState(s Stats, c Config) (short, over int, enabled bool) {
	s, c = normStats(s), normConfig(c)
	switch {
	case ipTargetsSet(c):
		short, over = prefixByIPTargets(s, c)
	case c.WarmPrefixTarget > 0:
		short, over = prefixByWarmPrefix(s, c)
	default:
		return 0, 0, false
	}
	return short, over, true
}

// prefixByIPTargets converts the IP targets into whole prefixes. short > 0
// needs needed > TotalIPs and over > 0 needs TotalIPs > needed, so the two
// are exclusive.
func prefixByIPTargets(s Stats, c Config) (short, over int) {
	needed := max(satAdd(s.AssignedIPs, warmIPs(c)), c.MinimumIPTarget)
	if needed > s.TotalIPs {
		return ceilDiv(needed-s.TotalIPs, AddressesPerPrefix), 0
	}
	return 0, min(s.FreePrefixes, (s.TotalIPs-needed)/AddressesPerPrefix)
}

// prefixByWarmPrefix keeps WarmPrefixTarget whole prefixes' worth of
// addresses available, asking for at least one prefix when short.
//
// With consistent stats (16*FreePrefixes <= available) short and over cannot
// both be > 0: over > 0 means FreePrefixes > WarmPrefixTarget, hence
// available >= 16*FreePrefixes > 16*WarmPrefixTarget and short = 0. Stats
// that break that invariant (free prefixes claimed but few addresses
// available) could produce both; short then wins and over is dropped,
// because failing the next pod's IP request is an outage while holding a
// spare prefix a little longer only costs addresses, and releasing while
// allocating is exactly the churn this package exists to prevent.
func prefixByWarmPrefix(s Stats, c Config) (short, over int) {
	if available(s) < satMul(AddressesPerPrefix, c.WarmPrefixTarget) {
		short = max(c.WarmPrefixTarget-s.FreePrefixes, 1)
	}
	over = max(s.FreePrefixes-c.WarmPrefixTarget, 0)
	if short > 0 {
		over = 0
	}
	return short, over
}

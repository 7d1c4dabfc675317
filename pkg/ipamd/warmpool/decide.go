package warmpool

// Decide picks the sizing unit for c, computes how far the pool is from
// its targets, and applies the max-pods clamp last.
//
// Unit selection:
//   - PrefixDelegation: UnitPrefix, from PrefixTargetState; with no prefix
//     or IP target set, one prefix is requested only when nothing is
//     available and nothing is ever released.
//   - otherwise, if WARM_IP_TARGET or MINIMUM_IP_TARGET is set: UnitIP, from
//     SecondaryIPTargetState.
//   - otherwise UnitENI: one ENI is requested when fewer than
//     IPsPerENI*WarmENITarget addresses are available, or when
//     WarmENITarget is unset and nothing is available. ENIs are never
//     released here (Over is 0).
//
// The max-pods clamp (MaxPods > 0 only): with room = MaxPods - TotalIPs,
// room <= 0 sets Short to 0 and AtMaxPods; otherwise Short is capped at
// room (UnitIP) or ceil(room/16) (UnitPrefix), and a UnitENI request is
// left as is. LeakSuspected is AssignedIPs > MaxPods, or AtMaxPods with no
// address available.
//
// Short and Over are never both > 0.
func Decide(s Stats, c Config) Decision {
	s, c = normStats(s), normConfig(c)
	d := decideUnclamped(s, c)
	clampMaxPods(&d, s, c)
	if d.Short > 0 {
		// The state functions already guarantee this; keep the invariant
		// local so a future edit cannot break it silently. Short wins for
		// the reason given on prefixByWarmPrefix.
		d.Over = 0
	}
	return d
}

func decideUnclamped(s Stats, c Config) Decision {
	avail := available(s)
	if c.PrefixDelegation {
		d := Decision{Unit: UnitPrefix}
		var enabled bool
		d.Short, d.Over, enabled = PrefixTargetState(s, c)
		if !enabled {
			d.Short, d.Over = boolToInt(avail <= 0), 0
		}
		return d
	}
	if short, over, enabled := SecondaryIPTargetState(s, c); enabled {
		return Decision{Unit: UnitIP, Short: short, Over: over}
	}
	want := satMul(c.IPsPerENI, c.WarmENITarget)
	short := avail < want || (c.WarmENITarget == 0 && avail <= 0)
	return Decision{Unit: UnitENI, Short: boolToInt(short)}
}

// clampMaxPods applies the max-pods limit to d in place.
func clampMaxPods(d *Decision, s Stats, c Config) {
	if c.MaxPods == 0 {
		return
	}
	room := c.MaxPods - s.TotalIPs // both >= 0: no overflow
	switch {
	case room <= 0:
		d.Short = 0
		d.AtMaxPods = true
	case d.Unit == UnitIP:
		d.Short = min(d.Short, room)
	case d.Unit == UnitPrefix:
		d.Short = min(d.Short, ceilDiv(room, AddressesPerPrefix))
	}
	d.LeakSuspected = s.AssignedIPs > c.MaxPods || (d.AtMaxPods && available(s) == 0)
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

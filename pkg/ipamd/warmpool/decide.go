package warmpool

// Decide picks the sizing unit for c, computes how far the pool is from
// its targets, and then applies two growth limits: max pods, then capacity.
//
// Unit selection:
//   - PrefixDelegation: UnitPrefix, from PrefixTargetState; with no prefix
//     or IP target set, one prefix is requested only when nothing is
//     available and nothing is ever released.
//   - otherwise, if WARM_IP_TARGET or MINIMUM_IP_TARGET is set: UnitIP, from
//     SecondaryIPTargetState.
//   - otherwise UnitENI: one ENI is requested when fewer than
//     SlotsPerENI*WarmENITarget addresses are available, or when
//     WarmENITarget is unset and nothing is available. ENIs are never
//     released here (Over is 0).
//
// Cooling addresses count as available to the targets, as upstream,
// with two exceptions:
//   - when pods are about to wait (PodsAboutToWait: fewer addresses
//     assignable than PodsWaitBelow plus the pods that arrived since the
//     last decision), Short is computed with the
//     cooling addresses counted as assigned, so the pool grows rather than
//     refusing pods for the cooldown (upstream counts them as available
//     and refuses). Counting fewer as available never lowers Short.
//   - Over is always computed with them counted as assigned: a cooling
//     address cannot be released, and it must not make a free one look
//     spare. Otherwise the growth above would be released again at the
//     next step. Over is at most upstream's.
//
// Each limit L (MaxPods, then MaxAddresses) applies only when L > 0. With
// room = L - TotalIPs, room <= 0 sets Short to 0 and the matching flag
// (AtMaxPods, AtCapacity); otherwise Short is capped at room (UnitIP) or
// ceil(room/16) (UnitPrefix), and a UnitENI request is left as is. Over is
// never touched: a full node may still give addresses back.
//
// LeakSuspected is AssignedIPs > MaxPods (MaxPods known), or either limit
// reached with no address assignable (every unassigned address cooling or
// pending counts as none): the pool cannot grow and the next pod would
// fail, so the caller should check for leaked addresses now. The second
// part needs only one known limit, so it also fires on a node whose max
// pods is unknown but whose ENI capacity is.
//
// Short and Over are never both > 0.
func Decide(s Stats, c Config) Decision {
	s, c = normStats(s), normConfig(c)
	d := decideUnclamped(s, c)
	held := decideUnclamped(coolingAsAssigned(s), c)
	if PodsAboutToWait(s) {
		d.Short = held.Short
	}
	d.Over = held.Over
	d.AtMaxPods = clampToLimit(&d, s.TotalIPs, c.MaxPods)
	d.AtCapacity = clampToLimit(&d, s.TotalIPs, c.MaxAddresses)
	d.LeakSuspected = (c.MaxPods > 0 && s.AssignedIPs > c.MaxPods) ||
		((d.AtMaxPods || d.AtCapacity) && assignable(s) == 0)
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
	want := satMul(c.SlotsPerENI, c.WarmENITarget)
	short := avail < want || (c.WarmENITarget == 0 && avail <= 0)
	return Decision{Unit: UnitENI, Short: boolToInt(short)}
}

// clampToLimit caps d.Short so the pool does not grow past limit
// addresses, and reports whether it already holds at least limit. A limit
// of 0 is unknown: d is left alone. A prefix request may overshoot the
// limit by up to 15 addresses, since a prefix cannot be split; an ENI
// request is not capped at all, since an ENI cannot be attached partially.
func clampToLimit(d *Decision, total, limit int) (atLimit bool) {
	if limit == 0 {
		return false
	}
	room := limit - total // both >= 0: no overflow
	switch {
	case room <= 0:
		d.Short = 0
		return true
	case d.Unit == UnitIP:
		d.Short = min(d.Short, room)
	case d.Unit == UnitPrefix:
		d.Short = min(d.Short, ceilDiv(room, AddressesPerPrefix))
	}
	return false
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

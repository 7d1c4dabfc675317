package warmpool

import (
	"math"
	"testing"
)

// eniMode builds the config most ENI-mode edge cases start from.
func eniMode(warmENI, maxPods, ipsPerENI int) Config {
	return Config{WarmENITarget: warmENI, MaxPods: maxPods, SlotsPerENI: ipsPerENI}
}

// withCapacity returns c with MaxAddresses set to n.
func withCapacity(c Config, n int) Config {
	c.MaxAddresses = n
	return c
}

func TestDecideEdgeCases(t *testing.T) {
	const big = math.MaxInt
	tests := []struct {
		name string
		s    Stats
		c    Config
		want Decision
	}{
		// Fresh node: nothing held yet, every mode asks to grow.
		{"fresh node, ENI mode", Stats{}, eniMode(1, 29, 9), Decision{Unit: UnitENI, Short: 1}},
		{"fresh node, no targets at all", Stats{}, Config{}, Decision{Unit: UnitENI, Short: 1}},
		{"fresh node, warm-ip 5", Stats{}, Config{WarmIPTarget: 5, MaxPods: 29}, Decision{Unit: UnitIP, Short: 5}},
		{"fresh node, minimum-ip 10", Stats{}, Config{MinimumIPTarget: 10}, Decision{Unit: UnitIP, Short: 10}},
		{"fresh node, PD no targets", Stats{}, Config{PrefixDelegation: true}, Decision{Unit: UnitPrefix, Short: 1}},
		{"fresh node, PD warm-prefix 3", Stats{}, Config{PrefixDelegation: true, WarmPrefixTarget: 3}, Decision{Unit: UnitPrefix, Short: 3}},
		{"fresh node, PD warm-ip 20", Stats{}, Config{PrefixDelegation: true, WarmIPTarget: 20}, Decision{Unit: UnitPrefix, Short: 2}},

		// Negative inputs are clamped: stats to 0, targets to unset, MaxPods to unknown.
		{"negative stats behave like a fresh node", Stats{-5, -3, -1, -2, -4, -6, -7}, eniMode(1, 29, 9), Decision{Unit: UnitENI, Short: 1}},
		{"negative targets are unset", Stats{TotalIPs: 9, AssignedIPs: 5}, Config{WarmENITarget: -1, WarmIPTarget: -5, MinimumIPTarget: -10, WarmPrefixTarget: -1, MaxPods: 29, SlotsPerENI: 9}, Decision{Unit: UnitENI}},
		{"negative max pods is unknown", Stats{TotalIPs: 64, AssignedIPs: 64, TotalPrefixes: 4}, Config{PrefixDelegation: true, WarmPrefixTarget: 1, MaxPods: -62}, Decision{Unit: UnitPrefix, Short: 1}},
		{"MinInt everywhere", Stats{math.MinInt, math.MinInt, math.MinInt, math.MinInt, math.MinInt, math.MinInt, math.MinInt}, Config{math.MinInt, math.MinInt, math.MinInt, math.MinInt, math.MinInt, math.MinInt, math.MinInt, true}, Decision{Unit: UnitPrefix, Short: 1}},
		// SlotsPerENI unknown (0 or negative) with WARM_ENI_TARGET set: the spec's
		// "available < SlotsPerENI*WarmENITarget" can never hold, so no ENI is asked for.
		{"negative SlotsPerENI never triggers ENI growth", Stats{TotalIPs: 9, AssignedIPs: 9}, eniMode(1, 0, -9), Decision{Unit: UnitENI}},

		// Huge values saturate instead of wrapping.
		{"MaxInt warm-ip", Stats{TotalIPs: 10, AssignedIPs: 7}, Config{WarmIPTarget: big}, Decision{Unit: UnitIP, Short: big - 3}},
		{"MaxInt minimum-ip", Stats{TotalIPs: 10, AssignedIPs: 7}, Config{MinimumIPTarget: big}, Decision{Unit: UnitIP, Short: big - 10}},
		{"MaxInt warm-ip clamped by max pods", Stats{TotalIPs: 10, AssignedIPs: 7}, Config{WarmIPTarget: big, MaxPods: 29}, Decision{Unit: UnitIP, Short: 19}},
		{"PD MaxInt warm-ip with MaxInt assigned", Stats{TotalIPs: big, AssignedIPs: big}, Config{PrefixDelegation: true, WarmIPTarget: big}, Decision{Unit: UnitPrefix}},
		{"PD MaxInt warm-ip", Stats{TotalIPs: 16, AssignedIPs: 1, TotalPrefixes: 1}, Config{PrefixDelegation: true, WarmIPTarget: big}, Decision{Unit: UnitPrefix, Short: (big-16)/16 + 1}},
		{"PD MaxInt warm-prefix", Stats{TotalIPs: 16, AssignedIPs: 1, TotalPrefixes: 1}, Config{PrefixDelegation: true, WarmPrefixTarget: big}, Decision{Unit: UnitPrefix, Short: big}},
		{"PD MaxInt free prefixes", Stats{TotalIPs: big, TotalPrefixes: big, FreePrefixes: big}, Config{PrefixDelegation: true, WarmPrefixTarget: 1}, Decision{Unit: UnitPrefix, Over: big - 1}},
		{"MaxInt warm-ENI and SlotsPerENI", Stats{TotalIPs: big, AssignedIPs: 1}, eniMode(big, 0, big), Decision{Unit: UnitENI, Short: 1}},
		{"MaxInt available meets saturated warm-ENI want", Stats{TotalIPs: big}, eniMode(big, 0, big), Decision{Unit: UnitENI}},
		{"MaxInt total, warm-ip 5", Stats{TotalIPs: big}, Config{WarmIPTarget: 5}, Decision{Unit: UnitIP, Over: big - 5}},
		{"MaxInt total and max pods", Stats{TotalIPs: big, AssignedIPs: big}, Config{WarmIPTarget: 5, MaxPods: big}, Decision{Unit: UnitIP, AtMaxPods: true, LeakSuspected: true}},
		{"MaxInt max pods, fresh node", Stats{}, Config{PrefixDelegation: true, WarmIPTarget: 5, MaxPods: big}, Decision{Unit: UnitPrefix, Short: 1}},

		// MaxPods below one ENI's worth of IPs.
		{"max pods 4 < 9 IPs per ENI: ENI request is not clamped", Stats{}, eniMode(1, 4, 9), Decision{Unit: UnitENI, Short: 1}},
		{"max pods 4 < 9 IPs per ENI: after attach", Stats{TotalIPs: 9, AssignedIPs: 4}, eniMode(1, 4, 9), Decision{Unit: UnitENI, AtMaxPods: true}},
		{"max pods 4, warm-ip 10: clamped to room", Stats{}, Config{WarmIPTarget: 10, MaxPods: 4, SlotsPerENI: 9}, Decision{Unit: UnitIP, Short: 4}},
		{"max pods 4 < one prefix: one prefix still allowed", Stats{}, Config{PrefixDelegation: true, WarmPrefixTarget: 2, MaxPods: 4}, Decision{Unit: UnitPrefix, Short: 1}},

		// MaxPods exactly equal to TotalIPs: at max, but a leak only when nothing is assignable.
		{"max pods == total, spare IPs", Stats{TotalIPs: 29, AssignedIPs: 20}, eniMode(1, 29, 9), Decision{Unit: UnitENI, AtMaxPods: true}},
		{"max pods == total, all used", Stats{TotalIPs: 29, AssignedIPs: 29}, Config{WarmIPTarget: 1, MaxPods: 29}, Decision{Unit: UnitIP, AtMaxPods: true, LeakSuspected: true}},
		{"max pods == total, still over target", Stats{TotalIPs: 29, AssignedIPs: 3}, Config{WarmIPTarget: 5, MaxPods: 29}, Decision{Unit: UnitIP, Over: 21, AtMaxPods: true}},
		{"PD max pods == total, free prefix above target", Stats{TotalIPs: 48, AssignedIPs: 2, TotalPrefixes: 3, FreePrefixes: 2}, Config{PrefixDelegation: true, WarmPrefixTarget: 1, MaxPods: 48}, Decision{Unit: UnitPrefix, Over: 1, AtMaxPods: true}},
		{"assigned above max pods, still over target", Stats{TotalIPs: 40, AssignedIPs: 31}, Config{WarmIPTarget: 1, MaxPods: 30}, Decision{Unit: UnitIP, Over: 8, AtMaxPods: true, LeakSuspected: true}},

		// Capacity (MaxAddresses) clamp.
		{"capacity tighter than max pods", Stats{TotalIPs: 20, AssignedIPs: 19}, Config{WarmIPTarget: 10, MaxPods: 110, MaxAddresses: 24}, Decision{Unit: UnitIP, Short: 4}},
		{"max pods tighter than capacity", Stats{TotalIPs: 20, AssignedIPs: 19}, Config{WarmIPTarget: 10, MaxPods: 22, MaxAddresses: 24}, Decision{Unit: UnitIP, Short: 2}},
		{"capacity 4 < 9 IPs per ENI: ENI request is not clamped", Stats{}, withCapacity(eniMode(1, 0, 9), 4), Decision{Unit: UnitENI, Short: 1}},
		{"capacity 4 < 9 IPs per ENI: after attach", Stats{TotalIPs: 9, AssignedIPs: 4}, withCapacity(eniMode(1, 0, 9), 4), Decision{Unit: UnitENI, AtCapacity: true}},
		{"capacity 1 < one prefix: one prefix still allowed", Stats{}, Config{PrefixDelegation: true, WarmPrefixTarget: 2, MaxAddresses: 1}, Decision{Unit: UnitPrefix, Short: 1}},
		{"PD capacity 40, warm-prefix 3: capped at ceil(room/16)", Stats{TotalIPs: 16, AssignedIPs: 16, TotalPrefixes: 1}, Config{PrefixDelegation: true, WarmPrefixTarget: 3, MaxAddresses: 40}, Decision{Unit: UnitPrefix, Short: 2}},
		{"capacity full, max pods unknown: leak fires without max pods", Stats{TotalIPs: 27, AssignedIPs: 27}, withCapacity(eniMode(1, 0, 9), 27), Decision{Unit: UnitENI, AtCapacity: true, LeakSuspected: true}},
		{"capacity and max pods both reached", Stats{TotalIPs: 29, AssignedIPs: 29}, withCapacity(eniMode(1, 29, 9), 27), Decision{Unit: UnitENI, AtMaxPods: true, AtCapacity: true, LeakSuspected: true}},
		{"total above capacity, still over target", Stats{TotalIPs: 40, AssignedIPs: 10}, Config{WarmIPTarget: 5, MaxAddresses: 30}, Decision{Unit: UnitIP, Over: 25, AtCapacity: true}},
		{"negative capacity is unknown", Stats{TotalIPs: 64, AssignedIPs: 64, TotalPrefixes: 4}, Config{PrefixDelegation: true, WarmPrefixTarget: 1, MaxAddresses: -64}, Decision{Unit: UnitPrefix, Short: 1}},
		{"MinInt capacity is unknown", Stats{TotalIPs: 27, AssignedIPs: 27}, withCapacity(eniMode(1, 0, 9), math.MinInt), Decision{Unit: UnitENI, Short: 1}},

		// Overflow-ish capacity: room = MaxAddresses - TotalIPs never wraps.
		{"MaxInt capacity, fresh node", Stats{}, Config{WarmIPTarget: 5, MaxAddresses: big}, Decision{Unit: UnitIP, Short: 5}},
		{"MaxInt warm-ip clamped by MaxInt capacity", Stats{TotalIPs: 10, AssignedIPs: 7}, Config{WarmIPTarget: big, MaxAddresses: big}, Decision{Unit: UnitIP, Short: big - 10}},
		{"PD MaxInt warm-prefix clamped by MaxInt capacity", Stats{TotalIPs: 16, AssignedIPs: 1, TotalPrefixes: 1}, Config{PrefixDelegation: true, WarmPrefixTarget: big, MaxAddresses: big}, Decision{Unit: UnitPrefix, Short: (big-16)/16 + 1}},
		{"MaxInt total, capacity 1", Stats{TotalIPs: big}, Config{WarmIPTarget: 5, MaxAddresses: 1}, Decision{Unit: UnitIP, Over: big - 5, AtCapacity: true}},
		{"MaxInt total and capacity", Stats{TotalIPs: big, AssignedIPs: big}, Config{WarmIPTarget: 5, MaxAddresses: big}, Decision{Unit: UnitIP, AtCapacity: true, LeakSuspected: true}},
		{"MaxInt total, max pods and capacity", Stats{TotalIPs: big, AssignedIPs: big}, Config{WarmIPTarget: 5, MaxPods: big, MaxAddresses: big}, Decision{Unit: UnitIP, AtMaxPods: true, AtCapacity: true, LeakSuspected: true}},
		{"MaxInt capacity one below total", Stats{TotalIPs: big, AssignedIPs: big - 1}, withCapacity(eniMode(1, 0, 9), big-1), Decision{Unit: UnitENI, AtCapacity: true}},
		{"MaxInt everywhere", Stats{big, big, big, big, big, big, big}, Config{big, big, big, big, big, big, big, true}, Decision{Unit: UnitPrefix, AtMaxPods: true, AtCapacity: true, LeakSuspected: true}},

		// Inconsistent stats.
		{"assigned above total counts as nothing available", Stats{TotalIPs: 5, AssignedIPs: 9}, Config{WarmIPTarget: 2}, Decision{Unit: UnitIP, Short: 2}},
		{"free prefixes above total prefixes are capped", Stats{TotalIPs: 32, TotalPrefixes: 2, FreePrefixes: 7}, Config{PrefixDelegation: true, WarmPrefixTarget: 1}, Decision{Unit: UnitPrefix, Over: 1}},
		// 16*free > available: the warm-prefix formulas give short 1 and over 1; short wins.
		{"free prefixes with no available addresses: short wins", Stats{TotalIPs: 32, AssignedIPs: 32, TotalPrefixes: 2, FreePrefixes: 2}, Config{PrefixDelegation: true, WarmPrefixTarget: 1}, Decision{Unit: UnitPrefix, Short: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.s, tt.c); got != tt.want {
				t.Errorf("Decide(%+v, %+v)\n got {%v}\nwant {%v}", tt.s, tt.c, got, tt.want)
			}
		})
	}
}

// While pods are not about to wait (two or more addresses assignable, no
// pod since the last decision),
// cooling addresses count as available to growth, as upstream: CooldownIPs
// alone never changes the unit, Short or the limit flags; FreePrefixes
// (which already excludes cooling prefixes) does. Over is another rule
// (TestCoolingNeverMakesAFreeAddressSpare). The next ADD cannot have a
// cooling address, so at a limit with every unassigned address cooling the
// leak is suspected, as with none left at all.
func TestCoolingCountsAsAvailableUntilPodsWait(t *testing.T) {
	tests := []struct {
		name string
		s    Stats
		c    Config
		want Decision
	}{
		{"warm-ip 5, 4 available of which 2 cooling", Stats{TotalIPs: 11, AssignedIPs: 7, CooldownIPs: 2}, Config{WarmIPTarget: 5, MaxPods: 29, SlotsPerENI: 9}, Decision{Unit: UnitIP, Short: 1}},
		{"warm-ip 3, 4 available of which 2 cooling", Stats{TotalIPs: 14, AssignedIPs: 10, CooldownIPs: 2}, Config{WarmIPTarget: 3, MaxPods: 29, SlotsPerENI: 9}, Decision{Unit: UnitIP}},
		{"ENI mode, 4 available, 2 cooling", Stats{TotalIPs: 9, AssignedIPs: 5, CooldownIPs: 2}, eniMode(1, 29, 9), Decision{Unit: UnitENI, Short: 1}},
		{"ENI mode, no warm-ENI, 3 available, 1 cooling", Stats{TotalIPs: 9, AssignedIPs: 6, CooldownIPs: 1}, eniMode(0, 29, 9), Decision{Unit: UnitENI}},
		{"PD no targets, 3 available, 1 cooling", Stats{TotalIPs: 16, AssignedIPs: 13, CooldownIPs: 1, TotalPrefixes: 1}, Config{PrefixDelegation: true, MaxPods: 110}, Decision{Unit: UnitPrefix}},
		// 22 available, 6 cooling in the otherwise free prefix: it is not free.
		{"PD warm-prefix 1, cooling prefix not free", Stats{TotalIPs: 32, AssignedIPs: 10, CooldownIPs: 6, TotalPrefixes: 2}, Config{PrefixDelegation: true, WarmPrefixTarget: 1, MaxPods: 110}, Decision{Unit: UnitPrefix}},
		{"negative cooldown ignored", Stats{TotalIPs: 10, AssignedIPs: 7, CooldownIPs: -3}, Config{WarmIPTarget: 5}, Decision{Unit: UnitIP, Short: 2}},

		// At a limit: everything unassigned cooling is a suspected leak.
		{"capacity full, all 3 free cooling", Stats{TotalIPs: 27, AssignedIPs: 24, CooldownIPs: 3}, withCapacity(eniMode(1, 29, 9), 27), Decision{Unit: UnitENI, AtCapacity: true, LeakSuspected: true}},
		{"capacity full, 2 of 3 free cooling", Stats{TotalIPs: 27, AssignedIPs: 24, CooldownIPs: 2}, withCapacity(eniMode(1, 29, 9), 27), Decision{Unit: UnitENI, AtCapacity: true}},
		{"max pods == total, all free cooling", Stats{TotalIPs: 29, AssignedIPs: 20, CooldownIPs: 9}, eniMode(1, 29, 9), Decision{Unit: UnitENI, AtMaxPods: true, LeakSuspected: true}},
		{"PD at capacity, all free cooling", Stats{TotalIPs: 32, AssignedIPs: 20, CooldownIPs: 12, TotalPrefixes: 2}, Config{PrefixDelegation: true, WarmPrefixTarget: 1, MaxAddresses: 32}, Decision{Unit: UnitPrefix, AtCapacity: true, LeakSuspected: true}},
		{"cooling above what is free counts as none assignable", Stats{TotalIPs: 27, AssignedIPs: 24, CooldownIPs: 50}, withCapacity(eniMode(1, 29, 9), 27), Decision{Unit: UnitENI, AtCapacity: true, LeakSuspected: true}},
		{"MaxInt cooling at a limit", Stats{TotalIPs: 27, AssignedIPs: 24, CooldownIPs: math.MaxInt}, withCapacity(eniMode(1, 29, 9), 27), Decision{Unit: UnitENI, AtCapacity: true, LeakSuspected: true}},
		{"pending at a limit counts as none assignable", Stats{TotalIPs: 27, AssignedIPs: 24, CooldownIPs: 1, PendingIPs: 2}, withCapacity(eniMode(1, 29, 9), 27), Decision{Unit: UnitENI, AtCapacity: true, LeakSuspected: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.s, tt.c)
			if got != tt.want {
				t.Errorf("Decide = {%v}, want {%v}", got, tt.want)
			}
			if PodsAboutToWait(tt.s) && !got.AtMaxPods && !got.AtCapacity {
				return // the other rule
			}
			noCooldown := tt.s
			noCooldown.CooldownIPs = 0
			other := Decide(noCooldown, tt.c)
			other.LeakSuspected, other.Over = got.LeakSuspected, got.Over
			if other != got {
				t.Errorf("CooldownIPs changed more than the leak flag and Over: {%v} vs {%v} without cooldown", got, other)
			}
		})
	}
}

// A pod about to wait (fewer addresses assignable than PodsWaitBelow plus
// the pods that arrived since the last decision) grows the pool despite
// cooling addresses: growth counts them as
// unavailable, where upstream counts them as available and refuses pods
// for the whole cooldown (its issues 2896 and 3685). Growth still stops
// at max pods and capacity, and pending addresses (checked within the
// step that added them) do not make the pool grow again.
func TestPodAboutToWaitGrowsPoolDespiteCoolingAddresses(t *testing.T) {
	pdMin32 := Config{PrefixDelegation: true, MinimumIPTarget: 32, MaxPods: 110}
	tests := []struct {
		name     string
		s        Stats
		c        Config
		want     Decision
		upstream int // Short with cooling counted as available
	}{
		{"PD minimum-ip 32, 30 of 32 assigned, 2 cooling (upstream 3685)", Stats{TotalIPs: 32, AssignedIPs: 30, CooldownIPs: 2, TotalPrefixes: 2}, pdMin32, Decision{Unit: UnitPrefix, Short: 1}, 0},
		{"PD minimum-ip 32, 31 of 32 assigned, 1 cooling", Stats{TotalIPs: 32, AssignedIPs: 31, CooldownIPs: 1, TotalPrefixes: 2}, pdMin32, Decision{Unit: UnitPrefix, Short: 1}, 0},
		{"warm-ip 1, the only free address cooling (upstream 2896)", Stats{TotalIPs: 10, AssignedIPs: 9, CooldownIPs: 1}, Config{WarmIPTarget: 1, MaxPods: 29}, Decision{Unit: UnitIP, Short: 1}, 0},
		{"warm-ip 5, 3 free all cooling", Stats{TotalIPs: 10, AssignedIPs: 7, CooldownIPs: 3}, Config{WarmIPTarget: 5, MaxPods: 29, MaxAddresses: 27, SlotsPerENI: 9}, Decision{Unit: UnitIP, Short: 5}, 2},
		{"warm-ip 3, one assignable, 2 cooling", Stats{TotalIPs: 13, AssignedIPs: 10, CooldownIPs: 2}, Config{WarmIPTarget: 3, MaxPods: 29}, Decision{Unit: UnitIP, Short: 2}, 0},
		{"ENI mode without warm-ENI, the free address cooling", Stats{TotalIPs: 9, AssignedIPs: 8, CooldownIPs: 1}, eniMode(0, 29, 9), Decision{Unit: UnitENI, Short: 1}, 0},
		{"fresh node churn: 6 of 9 assigned, 3 cooling", Stats{TotalIPs: 9, AssignedIPs: 6, CooldownIPs: 3}, eniMode(1, 29, 9), Decision{Unit: UnitENI, Short: 1}, 1},
		{"churn: 5 pods since the last step, 5 assignable, 8 cooling", Stats{TotalIPs: 18, AssignedIPs: 5, CooldownIPs: 8, RecentAssigns: 5}, eniMode(1, 29, 9), Decision{Unit: UnitENI, Short: 1}, 0},
		{"warm-ip 5, 4 pods since the last step, 3 assignable, 3 cooling", Stats{TotalIPs: 16, AssignedIPs: 10, CooldownIPs: 3, RecentAssigns: 4}, Config{WarmIPTarget: 5, MaxPods: 29}, Decision{Unit: UnitIP, Short: 2}, 0},
		{"PD no targets, only cooling left", Stats{TotalIPs: 16, AssignedIPs: 13, CooldownIPs: 3, TotalPrefixes: 1}, Config{PrefixDelegation: true, MaxPods: 110}, Decision{Unit: UnitPrefix, Short: 1}, 0},
		{"PD warm-prefix 1, fragmented, the free ones cooling", Stats{TotalIPs: 48, AssignedIPs: 30, CooldownIPs: 17, TotalPrefixes: 3}, Config{PrefixDelegation: true, WarmPrefixTarget: 1, MaxPods: 110}, Decision{Unit: UnitPrefix, Short: 1}, 0},

		// Still clamped: max pods, then capacity.
		{"clamped to max pods' room", Stats{TotalIPs: 27, AssignedIPs: 25, CooldownIPs: 2}, Config{WarmIPTarget: 5, MaxPods: 29}, Decision{Unit: UnitIP, Short: 2}, 2},
		{"at max pods: no growth, a suspected leak", Stats{TotalIPs: 29, AssignedIPs: 27, CooldownIPs: 2}, Config{WarmIPTarget: 1, MaxPods: 29}, Decision{Unit: UnitIP, AtMaxPods: true, LeakSuspected: true}, 0},
		{"PD at max pods", Stats{TotalIPs: 32, AssignedIPs: 30, CooldownIPs: 2, TotalPrefixes: 2}, Config{PrefixDelegation: true, MinimumIPTarget: 32, MaxPods: 32}, Decision{Unit: UnitPrefix, AtMaxPods: true, LeakSuspected: true}, 0},
		{"at capacity", Stats{TotalIPs: 27, AssignedIPs: 26, CooldownIPs: 1}, Config{WarmIPTarget: 1, MaxPods: 29, MaxAddresses: 27}, Decision{Unit: UnitIP, AtCapacity: true, LeakSuspected: true}, 0},

		// Not about to wait, or nothing cooling: upstream's answer.
		{"two assignable: cooling still counts", Stats{TotalIPs: 14, AssignedIPs: 10, CooldownIPs: 2}, Config{WarmIPTarget: 3, MaxPods: 29}, Decision{Unit: UnitIP}, 0},
		{"new addresses pending: no second growth", Stats{TotalIPs: 18, AssignedIPs: 10, PendingIPs: 8}, Config{WarmIPTarget: 8, MaxPods: 29}, Decision{Unit: UnitIP}, 0},
		{"pending and cooling: only the cooling ones are unavailable", Stats{TotalIPs: 18, AssignedIPs: 9, CooldownIPs: 4, PendingIPs: 5}, Config{WarmIPTarget: 6, MaxPods: 29}, Decision{Unit: UnitIP, Short: 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.s, tt.c); got != tt.want {
				t.Errorf("Decide = {%v}, want {%v}", got, tt.want)
			}
			// What upstream's math gives for the same pool (cooling counted
			// as available, no max-pods early return here: clamped alike).
			asUpstream := decideUnclamped(normStats(tt.s), normConfig(tt.c))
			clampToLimit(&asUpstream, nonNeg(tt.s.TotalIPs), nonNeg(tt.c.MaxPods))
			clampToLimit(&asUpstream, nonNeg(tt.s.TotalIPs), nonNeg(tt.c.MaxAddresses))
			if asUpstream.Short != tt.upstream {
				t.Errorf("upstream's Short = %d, want %d", asUpstream.Short, tt.upstream)
			}
		})
	}
}

// A release never counts cooling addresses as spare: they cannot be
// released, and counting them would release the addresses a pod about to
// wait just made the pool grow by. Over is at most upstream's.
func TestCoolingNeverMakesAFreeAddressSpare(t *testing.T) {
	tests := []struct {
		name     string
		s        Stats
		c        Config
		want     Decision
		upstream int // Over with cooling counted as available
	}{
		{"warm-ip 5, 15 available of which 8 cooling", Stats{TotalIPs: 20, AssignedIPs: 5, CooldownIPs: 8}, Config{WarmIPTarget: 5, MaxPods: 29}, Decision{Unit: UnitIP, Over: 2}, 10},
		{"max pods == total, all free cooling, over target", Stats{TotalIPs: 29, AssignedIPs: 3, CooldownIPs: 26}, Config{WarmIPTarget: 5, MaxPods: 29}, Decision{Unit: UnitIP, AtMaxPods: true, LeakSuspected: true}, 21},
		{"PD minimum-ip 32 after growing for a pod (3685)", Stats{TotalIPs: 48, AssignedIPs: 30, CooldownIPs: 2, TotalPrefixes: 3, FreePrefixes: 1}, Config{PrefixDelegation: true, MinimumIPTarget: 32, MaxPods: 110}, Decision{Unit: UnitPrefix}, 1},
		{"PD minimum-ip 32 once the cooldown ended", Stats{TotalIPs: 48, AssignedIPs: 30, TotalPrefixes: 3, FreePrefixes: 1}, Config{PrefixDelegation: true, MinimumIPTarget: 32, MaxPods: 110}, Decision{Unit: UnitPrefix, Over: 1}, 1},
		{"nothing cooling: upstream's answer", Stats{TotalIPs: 20, AssignedIPs: 5}, Config{WarmIPTarget: 5, MaxPods: 29}, Decision{Unit: UnitIP, Over: 10}, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.s, tt.c); got != tt.want {
				t.Errorf("Decide = {%v}, want {%v}", got, tt.want)
			}
			if up := decideUnclamped(normStats(tt.s), normConfig(tt.c)).Over; up != tt.upstream {
				t.Errorf("upstream's Over = %d, want %d", up, tt.upstream)
			}
		})
	}
}

// Only spares wait for the start's spread (WARM_POOL_START_SPREAD): never
// growth pods are about to wait on, counting the pods that arrived since
// the last decision, never below MINIMUM_IP_TARGET.
func TestOnlySparesWaitForTheStartSpread(t *testing.T) {
	spare := Stats{TotalIPs: 9, AssignedIPs: 1} // 8 assignable: WARM_ENI_TARGET=1 wants a spare ENI
	tests := []struct {
		name          string
		s             Stats
		c             Config
		inStartSpread bool
		want          bool
	}{
		{"a spare at start: held", spare, eniMode(1, 29, 9), true, true},
		{"a spare after the start's spread: grows", spare, eniMode(1, 29, 9), false, false},
		{"fleet start: the burst's ENI is in, one pod since: a spare, held", Stats{TotalIPs: 18, AssignedIPs: 10, RecentAssigns: 1}, eniMode(1, 29, 9), true, true},
		{"churn: 5 pods since the last step, 4 assignable: grows", Stats{TotalIPs: 9, AssignedIPs: 5, RecentAssigns: 5}, eniMode(1, 29, 9), true, false},
		{"churn: 5 pods since the last step, 7 assignable: a spare, held", Stats{TotalIPs: 9, AssignedIPs: 2, RecentAssigns: 5}, eniMode(1, 29, 9), true, true},
		{"pods about to wait, the free ones cooling: grows", Stats{TotalIPs: 9, AssignedIPs: 6, CooldownIPs: 3}, eniMode(1, 29, 9), true, false},
		{"pods about to wait, one assignable: grows", Stats{TotalIPs: 9, AssignedIPs: 8}, eniMode(1, 29, 9), true, false},
		{"a fresh node: grows", Stats{}, eniMode(1, 29, 9), true, false},
		{"pods about to wait, the new addresses pending: grows", Stats{TotalIPs: 18, AssignedIPs: 9, PendingIPs: 9}, eniMode(1, 29, 9), true, false},
		{"two assignable, no pod since: a spare, held", Stats{TotalIPs: 9, AssignedIPs: 7}, eniMode(1, 29, 9), true, true},
		{"below MINIMUM_IP_TARGET: grows", Stats{TotalIPs: 10, AssignedIPs: 1}, Config{WarmIPTarget: 1, MinimumIPTarget: 20, MaxPods: 29}, true, false},
		{"at MINIMUM_IP_TARGET, a spare: held", Stats{TotalIPs: 20, AssignedIPs: 17}, Config{WarmIPTarget: 5, MinimumIPTarget: 20, MaxPods: 29}, true, true},
		{"PD, a spare prefix: held", Stats{TotalIPs: 16, AssignedIPs: 2, TotalPrefixes: 1}, Config{PrefixDelegation: true, WarmPrefixTarget: 1, MaxPods: 110}, true, true},
		{"negative stats are a fresh node: grows", Stats{TotalIPs: -3, AssignedIPs: -1}, eniMode(1, 29, 9), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HoldSpareBack(tt.s, tt.c, tt.inStartSpread); got != tt.want {
				t.Errorf("HoldSpareBack = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestPodsAboutToWait(t *testing.T) {
	tests := []struct {
		name string
		s    Stats
		want bool
	}{
		{"empty pool", Stats{}, true},
		{"one assignable", Stats{TotalIPs: 9, AssignedIPs: 8}, true},
		{"two assignable", Stats{TotalIPs: 9, AssignedIPs: 7}, false},
		{"two free, both cooling", Stats{TotalIPs: 9, AssignedIPs: 7, CooldownIPs: 2}, true},
		{"two free, one pending", Stats{TotalIPs: 9, AssignedIPs: 7, PendingIPs: 1}, true},
		{"MaxInt cooling and pending", Stats{TotalIPs: 9, CooldownIPs: math.MaxInt, PendingIPs: math.MaxInt}, true},
		{"assigned above total", Stats{TotalIPs: 5, AssignedIPs: 9}, true},
		{"4 assignable, 3 pods since the last decision", Stats{TotalIPs: 9, AssignedIPs: 5, RecentAssigns: 3}, true},
		{"5 assignable, 3 pods since the last decision", Stats{TotalIPs: 9, AssignedIPs: 4, RecentAssigns: 3}, false},
		{"MaxInt pods since the last decision", Stats{TotalIPs: 9, RecentAssigns: math.MaxInt}, true},
	}
	for _, tt := range tests {
		if got := PodsAboutToWait(tt.s); got != tt.want {
			t.Errorf("%s: PodsAboutToWait = %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestStateFunctionsIgnorePrefixDelegation(t *testing.T) {
	s := Stats{TotalIPs: 48, AssignedIPs: 3, TotalPrefixes: 3, FreePrefixes: 2}
	for _, c := range []Config{{WarmIPTarget: 5}, {WarmPrefixTarget: 1}, {MinimumIPTarget: 40}, {}} {
		on := c
		on.PrefixDelegation = true
		s1, o1, e1 := SecondaryIPTargetState(s, c)
		s2, o2, e2 := SecondaryIPTargetState(s, on)
		if s1 != s2 || o1 != o2 || e1 != e2 {
			t.Errorf("SecondaryIPTargetState depends on PrefixDelegation for %+v", c)
		}
		s1, o1, e1 = PrefixTargetState(s, c)
		s2, o2, e2 = PrefixTargetState(s, on)
		if s1 != s2 || o1 != o2 || e1 != e2 {
			t.Errorf("PrefixTargetState depends on PrefixDelegation for %+v", c)
		}
	}
}

func TestDecisionString(t *testing.T) {
	d := Decision{Unit: UnitPrefix, Short: 0, Over: 2, AtMaxPods: true, AtCapacity: true}
	want := "unit=prefix short=0 over=2 atMaxPods=true atCapacity=true leakSuspected=false"
	if got := d.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestArithmeticHelpers(t *testing.T) {
	const big = math.MaxInt
	tests := []struct {
		name      string
		got, want int
	}{
		{"satAdd small", satAdd(2, 3), 5},
		{"satAdd saturates", satAdd(big, 1), big},
		{"satAdd at edge", satAdd(big-1, 1), big},
		{"satMul small", satMul(16, 3), 48},
		{"satMul zero", satMul(0, big), 0},
		{"satMul saturates", satMul(16, big/8), big},
		{"satMul at edge", satMul(1, big), big},
		{"ceilDiv exact", ceilDiv(32, 16), 2},
		{"ceilDiv round up", ceilDiv(33, 16), 3},
		{"ceilDiv zero", ceilDiv(0, 16), 0},
		{"ceilDiv MaxInt", ceilDiv(big, 16), big/16 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %d, want %d", tt.got, tt.want)
			}
		})
	}
}

package warmpool

import (
	"math"
	"testing"
)

// FuzzDecide feeds arbitrary ints to Decide and both state functions and
// checks they never panic, never return negative counts, never ask to
// grow and shrink at once and never grow past a known limit.
func FuzzDecide(f *testing.F) {
	seeds := []struct {
		s Stats
		c Config
	}{
		{Stats{9, 5, 0, 0, 0, 0, 0}, Config{1, 0, 0, 0, 29, 0, 9, false}},
		{Stats{27, 26, 0, 0, 0, 0, 0}, Config{0, 5, 0, 0, 29, 0, 9, false}},
		{Stats{64, 64, 0, 4, 0, 0, 0}, Config{0, 0, 0, 1, 62, 0, 0, true}},
		{Stats{16, 2, 0, 1, 0, 0, 0}, Config{0, 2, 40, 0, 110, 0, 0, true}},
		{Stats{32, 32, 0, 2, 2, 0, 0}, Config{0, 0, 0, 1, 0, 0, 0, true}},
		{Stats{27, 27, 0, 0, 0, 0, 0}, Config{1, 0, 0, 0, 29, 27, 9, false}},
		{Stats{25, 23, 0, 0, 0, 0, 0}, Config{0, 5, 0, 0, 29, 27, 9, false}},
		{Stats{32, 32, 0, 2, 0, 0, 0}, Config{0, 0, 0, 1, 110, 32, 0, true}},
		{Stats{27, 24, 3, 0, 0, 0, 0}, Config{1, 0, 0, 0, 29, 27, 9, false}}, // at capacity, every free address cooling
		{Stats{32, 30, 2, 2, 0, 0, 0}, Config{0, 0, 32, 0, 110, 0, 0, true}}, // pods about to wait, the free ones cooling
		{Stats{18, 10, 0, 0, 0, 8, 0}, Config{1, 0, 0, 0, 29, 27, 9, false}}, // a new ENI's addresses pending
		{Stats{math.MaxInt, math.MinInt, -1, math.MaxInt, math.MaxInt, 0, 0}, Config{math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, true}},
		{Stats{math.MaxInt - 1, 3, 0, 0, 0, 0, 0}, Config{0, math.MaxInt, 0, 0, 0, math.MaxInt, 0, false}},
	}
	for _, sd := range seeds {
		s, c := sd.s, sd.c
		f.Add(s.TotalIPs, s.AssignedIPs, s.CooldownIPs, s.TotalPrefixes, s.FreePrefixes, s.PendingIPs, s.RecentAssigns,
			c.WarmENITarget, c.WarmIPTarget, c.MinimumIPTarget, c.WarmPrefixTarget, c.MaxPods, c.MaxAddresses,
			c.SlotsPerENI, c.PrefixDelegation)
	}
	f.Fuzz(func(t *testing.T, total, assigned, cooldown, totalPfx, freePfx, pending, recent,
		warmENI, warmIP, minIP, warmPfx, maxPods, maxAddrs, ipsPerENI int, pd bool) {
		s := Stats{total, assigned, cooldown, totalPfx, freePfx, pending, recent}
		c := Config{warmENI, warmIP, minIP, warmPfx, maxPods, maxAddrs, ipsPerENI, pd}
		checkInvariants(t, s, c, Decide(s, c))
	})
}

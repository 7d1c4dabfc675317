package warmpool

import "testing"

// TestACardAboveZeroKeepsOneWarmAddressAndNoPrefixes: whatever the node's
// targets, a card above 0 runs with W = M = 1, secondary IPs, no WARM_ENI
// or WARM_PREFIX target and its capacity left to the caller; card 0 keeps
// the node's targets as they are.
func TestACardAboveZeroKeepsOneWarmAddressAndNoPrefixes(t *testing.T) {
	sip := Config{WarmENITarget: 1, MaxPods: 110, MaxAddresses: 27, SlotsPerENI: 9}
	pd := Config{WarmPrefixTarget: 1, WarmIPTarget: 5, MinimumIPTarget: 20, MaxPods: 250, MaxAddresses: 432,
		SlotsPerENI: 9, PrefixDelegation: true}
	card := Config{WarmIPTarget: 1, MinimumIPTarget: 1, SlotsPerENI: 9}
	withMaxPods := func(c Config, n int) Config { c.MaxPods = n; return c }
	for _, tc := range []struct {
		name string
		base Config
		card int
		want Config
	}{
		{"card 0, secondary IPs", sip, 0, sip},
		{"card 0, prefix delegation", pd, 0, pd},
		{"card 1, WARM_ENI_TARGET", sip, 1, withMaxPods(card, 110)},
		{"card 3, prefix delegation and IP targets", pd, 3, withMaxPods(card, 250)},
		{"card 1, nothing set", Config{}, 1, Config{WarmIPTarget: 1, MinimumIPTarget: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CardTargets(tc.base, tc.card); got != tc.want {
				t.Errorf("CardTargets(%+v, %d) = %+v, want %+v", tc.base, tc.card, got, tc.want)
			}
		})
	}
}

// TestACardAboveZeroGrowsOneAddressAtATime: an empty card asks for one
// address, one with its spare asks for nothing, and one whose spare was
// taken asks for one more; none of it in prefixes.
func TestACardAboveZeroGrowsOneAddressAtATime(t *testing.T) {
	cfg := CardTargets(Config{WarmPrefixTarget: 1, SlotsPerENI: 49, PrefixDelegation: true, MaxAddresses: 1000}, 1)
	cfg.MaxAddresses = 14 * 49
	for _, tc := range []struct {
		name        string
		s           Stats
		short, over int
	}{
		{"empty", Stats{}, 1, 0},
		{"one spare", Stats{TotalIPs: 1}, 0, 0},
		{"spare taken", Stats{TotalIPs: 1, AssignedIPs: 1}, 1, 0},
		{"two spares", Stats{TotalIPs: 3, AssignedIPs: 1}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.s, cfg)
			if d.Unit != UnitIP || d.Short != tc.short || d.Over != tc.over {
				t.Errorf("Decide(%+v) = %s, want unit=ip short=%d over=%d", tc.s, d, tc.short, tc.over)
			}
		})
	}
}

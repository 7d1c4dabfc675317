package warmpool

import "testing"

func BenchmarkDecide(b *testing.B) {
	cases := []struct {
		s Stats
		c Config
	}{
		{Stats{TotalIPs: 9, AssignedIPs: 5}, Config{WarmENITarget: 1, MaxPods: 29, SlotsPerENI: 9}},
		{Stats{TotalIPs: 27, AssignedIPs: 26}, Config{WarmIPTarget: 5, MaxPods: 29, SlotsPerENI: 9}},
		{Stats{TotalIPs: 64, AssignedIPs: 10, TotalPrefixes: 4, FreePrefixes: 3}, Config{WarmPrefixTarget: 1, MaxPods: 110, PrefixDelegation: true}},
		{Stats{TotalIPs: 16, AssignedIPs: 2, TotalPrefixes: 1}, Config{WarmIPTarget: 2, MinimumIPTarget: 40, MaxPods: 110, PrefixDelegation: true}},
	}
	var sink Decision
	i := 0
	for b.Loop() {
		tc := cases[i%len(cases)]
		sink = Decide(tc.s, tc.c)
		i++
	}
	_ = sink
}

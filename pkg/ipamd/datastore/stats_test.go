package datastore

import "testing"

// The two counts the code base means by "free": available (upstream's,
// what the warm targets measure) and assignable (what an ADD can get now).
func TestStatsAvailableAndAssignable(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		s                     Stats
		available, assignable int
	}{
		{"empty pool", Stats{}, 0, 0},
		{"all free", Stats{TotalIPs: 10}, 10, 10},
		{"some assigned", Stats{TotalIPs: 10, AssignedIPs: 4}, 6, 6},
		{"cooling is available, not assignable", Stats{TotalIPs: 10, AssignedIPs: 4, CooldownIPs: 2}, 6, 4},
		{"pending is available, not assignable", Stats{TotalIPs: 10, AssignedIPs: 4, CooldownIPs: 2, PendingIPs: 3}, 6, 1},
		{"all unassigned are cooling", Stats{TotalIPs: 3, AssignedIPs: 1, CooldownIPs: 2}, 2, 0},
		{"inconsistent counters never go negative", Stats{TotalIPs: 2, AssignedIPs: 3, CooldownIPs: 1}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.AvailableIPs(); got != tc.available {
				t.Errorf("AvailableIPs() = %d, want %d", got, tc.available)
			}
			if got := tc.s.AssignableIPs(); got != tc.assignable {
				t.Errorf("AssignableIPs() = %d, want %d", got, tc.assignable)
			}
		})
	}
}

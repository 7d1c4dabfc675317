package networkutils

import "testing"

// TestEveryENIsRouteTableIsNumberedAsAmazonEC2NetUtilsDoes: card 0's
// primary ENI uses main, card 0's others device+1, and every ENI of a
// card n > 0 (device 0 too) 10000 + device + 100*n.
func TestEveryENIsRouteTableIsNumberedAsAmazonEC2NetUtilsDoes(t *testing.T) {
	for _, tc := range []struct{ card, device, want int }{
		{0, 0, 254},
		{0, 1, 2},
		{0, 2, 3},
		{0, 14, 15},
		{0, 15, 16},
		{1, 0, 10100},
		{1, 1, 10101},
		{1, 7, 10107},
		{2, 0, 10200},
		{3, 14, 10314},
		{31, 1, 13101},
	} {
		if got := RouteTableFor(tc.card, tc.device); got != tc.want {
			t.Errorf("RouteTableFor(card %d, device %d) = %d, want %d", tc.card, tc.device, got, tc.want)
		}
	}
}

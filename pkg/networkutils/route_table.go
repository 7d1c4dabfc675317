package networkutils

// Route table numbering, as upstream and as amazon-ec2-net-utils number
// them: RouteTableFor is the only place the number of an ENI's table is
// worked out (the datastore's RouteTableID, the host's routes and rules,
// the plugin's per-card tables all come from it).

// cardTableBase and cardTableStride place the tables of network cards
// above 0 where amazon-ec2-net-utils puts them: 10000 + device + 100*card.
const (
	cardTableBase   = 10000
	cardTableStride = 100
)

// RouteTableFor is the host route table of the ENI at device index device
// of network card card: on card 0 the main table (254) for the primary ENI
// (device 0) and device+1 for the others; on card n > 0,
// 10000 + device + 100*n (device 0 included: device indexes are per card).
func RouteTableFor(card, device int) int {
	if card > 0 {
		return cardTableBase + device + cardTableStride*card
	}
	if device == 0 {
		return mainTable
	}
	return device + 1
}

package nodeinit

import (
	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

// ManagedCards decides which network cards ipamd manages, in card order,
// from the instance's number of cards and the ENIs attached at start (as
// upstream): with ENABLE_MULTI_NIC off only card 0; with it on every card
// of the instance type, except a card with an EFA-only ENI and no other
// ENI ipamd manages (the card is the EFA device's). Card 0 is always
// managed: it holds the primary ENI.
func ManagedCards(multiNIC bool, cards int, enis []awsutils.ENI, id awsutils.Identity, rules pool.ENIRules) []int {
	out := []int{0}
	if !multiNIC {
		return out
	}
	efaOnly := map[int]bool{}
	managed := map[int]bool{}
	for _, e := range enis {
		if !e.Attached {
			continue
		}
		if pool.IsEFAOnly(e) {
			efaOnly[e.NetworkCard] = true
		} else if pool.IsManaged(e, id, rules) {
			managed[e.NetworkCard] = true
		}
	}
	for card := 1; card < cards; card++ {
		if efaOnly[card] && !managed[card] {
			continue
		}
		out = append(out, card)
	}
	return out
}

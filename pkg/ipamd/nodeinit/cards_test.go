package nodeinit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

// TestManagedCardsAreCardZeroOrEveryCardButAnEFAOnlyOne: multi-NIC off
// manages card 0 alone; on, every card of the instance type, but a card
// whose only ENIs are EFA-only (or ones ipamd leaves alone) beside one.
func TestManagedCardsAreCardZeroOrEveryCardButAnEFAOnlyOne(t *testing.T) {
	id := awsutils.Identity{InstanceID: "i-self", PrimaryENIID: "eni-p"}
	on := func(card int, typ string, tags ...string) awsutils.ENI {
		e := awsutils.ENI{ID: "eni-" + typ, Attached: true, NetworkCard: card, InterfaceType: typ, Tags: map[string]string{}}
		for i := 0; i+1 < len(tags); i += 2 {
			e.Tags[tags[i]] = tags[i+1]
		}
		return e
	}
	primary := awsutils.ENI{ID: "eni-p", Attached: true}
	detachedEFAOnly := on(2, "efa-only")
	detachedEFAOnly.Attached = false
	for _, tc := range []struct {
		name     string
		multiNIC bool
		cards    int
		enis     []awsutils.ENI
		want     []int
	}{
		{"off, one card", false, 1, []awsutils.ENI{primary}, []int{0}},
		{"off, four cards", false, 4, []awsutils.ENI{primary, on(1, "interface")}, []int{0}},
		{"on, one card", true, 1, []awsutils.ENI{primary}, []int{0}},
		{"on, two empty cards", true, 2, []awsutils.ENI{primary}, []int{0, 1}},
		{"on, four cards", true, 4, []awsutils.ENI{primary, on(2, "interface")}, []int{0, 1, 2, 3}},
		{"on, an EFA-only ENI alone on card 1", true, 4, []awsutils.ENI{primary, on(1, "efa-only")}, []int{0, 2, 3}},
		{"on, EFA-only ENIs on every card above 0", true, 4,
			[]awsutils.ENI{primary, on(1, "efa-only"), on(2, "efa-only"), on(3, "efa-only")}, []int{0}},
		{"on, an EFA-only ENI beside a managed ENI", true, 2, []awsutils.ENI{primary, on(1, "efa-only"), on(1, "interface")}, []int{0, 1}},
		{"on, an EFA-only ENI beside an EFA ENI", true, 2, []awsutils.ENI{primary, on(1, "efa-only"), on(1, "efa")}, []int{0, 1}},
		{"on, an EFA-only ENI beside an ENI left alone", true, 2,
			[]awsutils.ENI{primary, on(1, "efa-only"), on(1, "interface", awsutils.TagNoManage, "true")}, []int{0}},
		{"on, an EFA-only ENI not attached", true, 3, []awsutils.ENI{primary, detachedEFAOnly}, []int{0, 1, 2}},
		{"on, an EFA-only ENI on card 0", true, 2, []awsutils.ENI{primary, on(0, "efa-only")}, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ManagedCards(tc.multiNIC, tc.cards, tc.enis, id, pool.ENIRules{}))
		})
	}
}

// MAX_ENI caps every card's ENIs, as upstream applies it to each card; a
// card's own limit stands when MAX_ENI is unset or above it.
func TestMaxENICapsEveryCardsENIs(t *testing.T) {
	for _, tc := range []struct {
		name         string
		card, maxENI int
		want         int
	}{
		{"unset (-1)", 15, -1, 15},
		{"zero is unset", 15, 0, 15},
		{"below the card's limit", 15, 4, 4},
		{"equal", 2, 2, 2},
		{"above the card's limit", 2, 10, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, cardMaxENIs(tc.card, tc.maxENI))
		})
	}
}

package cards

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// A single-IP assign moves to the next card only when a card has no free
// address, and never past the last card.
func TestASingleIPAssignFallsThroughOnlyOnExhaustion(t *testing.T) {
	exhausted := fmt.Errorf("assign: %w", datastore.ErrNoAvailableIP)
	for _, tc := range []struct {
		name     string
		i, n     int
		err      error
		next     int
		fallThru bool
	}{
		{"success on card 0 ends", 0, 2, nil, 0, false},
		{"card 0 exhausted: card 1", 0, 2, datastore.ErrNoAvailableIP, 1, true},
		{"wrapped exhaustion counts", 1, 4, exhausted, 2, true},
		{"last card exhausted ends", 1, 2, datastore.ErrNoAvailableIP, 0, false},
		{"one card exhausted ends", 0, 1, datastore.ErrNoAvailableIP, 0, false},
		{"a checkpoint failure ends", 0, 2, errors.New("disk full"), 0, false},
		{"a closed store ends", 0, 2, datastore.ErrClosed, 0, false},
	} {
		next, ok := nextCard(tc.i, tc.n, tc.err)
		assert.Equal(t, tc.fallThru, ok, tc.name)
		assert.Equal(t, tc.next, next, tc.name)
	}
}

// A failed multi-NIC assign gives back only what it assigned itself.
func TestAFailedMultiNICAssignGivesBackOnlyItsOwnAddresses(t *testing.T) {
	a := func(card int) datastore.Allocation {
		return datastore.Allocation{NetworkCard: card, IP: cardAddr(card, 0)}
	}
	for _, tc := range []struct {
		name     string
		assigned []datastore.Allocation
		before   []bool
		want     []datastore.Allocation
	}{
		{"failed on card 0: nothing", nil, nil, nil},
		{"failed on card 1: card 0's", []datastore.Allocation{a(0)}, []bool{false}, []datastore.Allocation{a(0)}},
		{"failed on card 3: cards 0-2", []datastore.Allocation{a(0), a(1), a(2)}, []bool{false, false, false},
			[]datastore.Allocation{a(0), a(1), a(2)}},
		{"held before the call: kept", []datastore.Allocation{a(0), a(1)}, []bool{true, false}, []datastore.Allocation{a(1)}},
		{"all held before: nothing", []datastore.Allocation{a(0), a(1)}, []bool{true, true}, nil},
	} {
		assert.Equal(t, tc.want, toGiveBack(tc.assigned, tc.before), tc.name)
	}
}

// A release reports every address released in card order and every
// failure; a card that held nothing is no failure; nothing held anywhere
// is ErrUnknownPod.
func TestAReleaseReportsEveryCard(t *testing.T) {
	a := func(card int) datastore.Allocation {
		return datastore.Allocation{NetworkCard: card, IP: netip.AddrFrom4([4]byte{10, byte(card), 0, 1})}
	}
	unknown := func(card int) error { return &CardError{Card: card, Err: datastore.ErrUnknownPod} }
	failed := &CardError{Card: 1, Err: errors.New("disk full")}
	for _, tc := range []struct {
		name         string
		answers      []cardRelease
		want         []datastore.Allocation
		wantUnknown  bool
		wantFailures []error
	}{
		{"every card held it", []cardRelease{{alloc: a(0)}, {alloc: a(1)}}, []datastore.Allocation{a(0), a(1)}, false, nil},
		{"only card 1 held it", []cardRelease{{err: unknown(0)}, {alloc: a(1)}}, []datastore.Allocation{a(1)}, false, nil},
		{"no card held it", []cardRelease{{err: unknown(0)}, {err: unknown(1)}}, nil, true, nil},
		{"card 1 failed, card 0 and 2 released", []cardRelease{{alloc: a(0)}, {err: failed}, {alloc: a(2)}},
			[]datastore.Allocation{a(0), a(2)}, false, []error{failed}},
		{"card 1 failed, others held nothing", []cardRelease{{err: unknown(0)}, {err: failed}}, nil, false, []error{failed}},
	} {
		got, err := releaseOutcome(tc.answers)
		assert.Equal(t, tc.want, got, tc.name)
		assert.Equal(t, tc.wantUnknown, errors.Is(err, datastore.ErrUnknownPod), tc.name)
		for _, f := range tc.wantFailures {
			assert.ErrorIs(t, err, f, tc.name)
		}
		if !tc.wantUnknown && tc.wantFailures == nil {
			assert.NoError(t, err, tc.name)
		}
	}
}

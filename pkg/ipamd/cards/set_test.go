package cards

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// A set starts at card 0, lists each managed card once in increasing
// order (unmanaged cards are simply absent) and each store is its card's.
func TestASetIsTheManagedCardsInOrderFromCardZero(t *testing.T) {
	st := func(card int) *datastore.DataStore { return datastore.New(datastore.Config{NetworkCard: card}) }
	for _, tc := range []struct {
		name  string
		cards []Card
		ok    bool
	}{
		{"card 0 alone", []Card{{0, st(0)}}, true},
		{"cards 0 and 1", []Card{{0, st(0)}, {1, st(1)}}, true},
		{"card 1 unmanaged", []Card{{0, st(0)}, {2, st(2)}, {3, st(3)}}, true},
		{"empty", nil, false},
		{"card 0 missing", []Card{{1, st(1)}}, false},
		{"out of order", []Card{{0, st(0)}, {2, st(2)}, {1, st(1)}}, false},
		{"twice", []Card{{0, st(0)}, {1, st(1)}, {1, st(1)}}, false},
		{"no store", []Card{{0, st(0)}, {1, nil}}, false},
		{"store of another card", []Card{{0, st(0)}, {1, st(0)}}, false},
	} {
		s, err := New(tc.cards...)
		if !tc.ok {
			assert.ErrorIs(t, err, ErrBadSet, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.cards, s.Cards(), tc.name)
		assert.Equal(t, len(tc.cards), s.Len(), tc.name)
		assert.Same(t, tc.cards[0].Store, s.Primary(), tc.name)
		for _, c := range tc.cards {
			got, ok := s.Store(c.Index)
			assert.True(t, ok, tc.name)
			assert.Same(t, c.Store, got, tc.name)
		}
	}
	s, err := New(Card{0, st(0)}, Card{2, st(2)})
	require.NoError(t, err)
	_, ok := s.Store(1)
	assert.False(t, ok, "an unmanaged card has no store")
}

// STATUS sees the node's whole pool: the figures of every card added up;
// each card's own figures stay available.
func TestStatsAreSummedOverCards(t *testing.T) {
	s, _ := newSet(t, 3, 2, 3, 4)
	_, err := s.AssignEach(podKey("multi"), podMeta("m"))
	require.NoError(t, err)
	sum := s.Stats()
	assert.Equal(t, datastore.Stats{ENIs: 3, TotalIPs: 9, AssignedIPs: 3}, sum)
	for card, total := range []int{2, 3, 4} {
		st, ok := s.CardStats(card)
		require.True(t, ok)
		assert.Equal(t, datastore.Stats{ENIs: 1, TotalIPs: total, AssignedIPs: 1}, st, "card %d", card)
	}
	_, ok := s.CardStats(7)
	assert.False(t, ok)
}

// Without ENABLE_MULTI_NIC the set is card 0's store: same answers, same
// errors (no card in them).
func TestWithOneCardTheSetIsCardZerosStore(t *testing.T) {
	cp := &failable{}
	d := cardStore(t, 0, 1, cp)
	s := Single(d)
	a, err := s.Assign(podKey("a"), podMeta("a"))
	require.NoError(t, err)
	again, ok := d.Find(podKey("a"))
	require.True(t, ok)
	assert.Equal(t, again, a)

	_, err = s.Assign(podKey("b"), podMeta("b"))
	assert.Same(t, datastore.ErrNoAvailableIP, err, "the store's own error")
	_, err = s.Release(podKey("b"))
	assert.Same(t, datastore.ErrUnknownPod, err)

	cp.setFail(true)
	_, err = s.Release(podKey("a"))
	require.Error(t, err)
	var ce *CardError
	assert.False(t, errorsAs(err, &ce), "no card named with one card: %v", err)
	cp.setFail(false)
	rel, err := s.Release(podKey("a"))
	require.NoError(t, err)
	require.Len(t, rel, 1)
	assert.Equal(t, a.IP, rel[0].IP)
}

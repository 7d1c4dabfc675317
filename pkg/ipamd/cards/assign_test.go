package cards

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// A multi-NIC pod gets one address on every card, in card order, each
// from its card's ENI, under the same key, each knowing how many
// interfaces the pod has.
func TestAMultiNICPodGetsOneAddressPerCard(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d cards", n), func(t *testing.T) {
			s, _ := newSet(t, n)
			got, err := s.AssignEach(podKey("multi"), podMeta("m"))
			require.NoError(t, err)
			require.Len(t, got, n)
			for card, a := range got {
				assert.Equal(t, card, a.NetworkCard)
				assert.True(t, netip.PrefixFrom(cardAddr(card, 0), 24).Masked().Contains(a.IP), "card %d: %s", card, a.IP)
				assert.Equal(t, fmt.Sprintf("eni-card%d", card), a.ENIID)
				assert.Equal(t, routeTable(card), a.RouteTableID)
				assert.Equal(t, podKey("multi"), a.Key)
				assert.Equal(t, n, a.Metadata.InterfacesCount)
				onCard, ok := s.FindOnCard(card, podKey("multi"))
				require.True(t, ok)
				assert.Equal(t, a, onCard)
			}
		})
	}
}

// A retried multi-NIC ADD gets the addresses it already holds.
func TestAMultiNICRetryGetsTheSameAddresses(t *testing.T) {
	s, _ := newSet(t, 4)
	first, err := s.AssignEach(podKey("multi"), podMeta("m"))
	require.NoError(t, err)
	again, err := s.AssignEach(podKey("multi"), podMeta("m"))
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, []int{1, 1, 1, 1}, held(s))
}

// All or nothing: when card k has no free address the ADD fails, the
// error names card k and is still ErrNoAvailableIP, and the cards before
// k hold nothing for the pod and have their address free at once.
func TestAMultiNICAssignIsAllOrNothing(t *testing.T) {
	for _, n := range []int{2, 4} {
		for k := range n {
			t.Run(fmt.Sprintf("%d cards, card %d empty", n, k), func(t *testing.T) {
				free := make([]int, n)
				for i := range free {
					free[i] = 1
				}
				free[k] = 0
				s, _ := newSet(t, n, free...)
				_, err := s.AssignEach(podKey("multi"), podMeta("m"))
				require.ErrorIs(t, err, datastore.ErrNoAvailableIP)
				var ce *CardError
				require.True(t, errors.As(err, &ce))
				assert.Equal(t, k, ce.Card)
				assert.Contains(t, err.Error(), fmt.Sprintf("network card %d", k))
				assert.Equal(t, make([]int, n), held(s), "nothing stays assigned")
				for i, c := range s.Cards() {
					st := c.Store.Stats()
					assert.Equal(t, free[i], st.AssignableIPs(), "card %d: given back without cooldown", i)
				}
			})
		}
	}
}

// A checkpoint failure on card k fails the ADD the same way: the cards
// before k give their address back.
func TestAMultiNICAssignGivesBackOnAnyFailure(t *testing.T) {
	s, cps := newSet(t, 3)
	cps[2].setFail(true)
	_, err := s.AssignEach(podKey("multi"), podMeta("m"))
	require.ErrorIs(t, err, errDisk)
	var ce *CardError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, 2, ce.Card)
	assert.Equal(t, []int{0, 0, 0}, held(s))
	cps[2].setFail(false)
	got, err := s.AssignEach(podKey("multi"), podMeta("m"))
	require.NoError(t, err)
	assert.Len(t, got, 3)
}

// A single-IP pod gets card 0's address; only when card 0 has none free
// does it get the next card's; a retry finds it where it is.
func TestASingleIPPodFallsThroughToTheNextCardOnlyWhenExhausted(t *testing.T) {
	s, _ := newSet(t, 3, 1, 0, 1)
	a, err := s.Assign(podKey("first"), podMeta("first"))
	require.NoError(t, err)
	assert.Equal(t, 0, a.NetworkCard, "card 0 first")

	b, err := s.Assign(podKey("second"), podMeta("second"))
	require.NoError(t, err)
	assert.Equal(t, 2, b.NetworkCard, "card 0 and 1 have none: card 2")

	_, err = s.Assign(podKey("third"), podMeta("third"))
	require.ErrorIs(t, err, datastore.ErrNoAvailableIP, "the last card exhausted fails the ADD")
	var ce *CardError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, 2, ce.Card)
	assert.Equal(t, []int{1, 0, 1}, held(s))

	// Card 0 has a free address again; the retry of "second" still gets its own.
	_, err = s.Release(podKey("first"))
	require.NoError(t, err)
	again, err := s.Assign(podKey("second"), podMeta("second"))
	require.NoError(t, err)
	assert.Equal(t, b, again)
	assert.Equal(t, []int{0, 0, 1}, held(s))

	// A failure other than exhaustion does not fall through.
	s2, cps2 := newSet(t, 2, 1, 1)
	cps2[0].setFail(true)
	_, err = s2.Assign(podKey("x"), podMeta("x"))
	require.ErrorIs(t, err, errDisk)
	assert.Equal(t, []int{0, 0}, held(s2))
}

package cards

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// A DEL frees the key on every card that holds it and reports each
// address in card order; a key no card holds is ErrUnknownPod.
func TestADELFreesTheKeyOnEveryCard(t *testing.T) {
	s, _ := newSet(t, 4)
	assigned, err := s.AssignEach(podKey("multi"), podMeta("m"))
	require.NoError(t, err)
	single, err := s.Assign(podKey("single"), podMeta("s"))
	require.NoError(t, err)

	targets := s.FindDELTargets(podKey("multi"))
	assert.Equal(t, assigned, targets, "the DEL's targets are what it releases")

	released, err := s.Release(podKey("multi"))
	require.NoError(t, err)
	require.Len(t, released, 4)
	for i, r := range released {
		assert.Equal(t, i, r.NetworkCard)
		assert.Equal(t, assigned[i].IP, r.IP)
	}
	assert.Equal(t, []int{1, 0, 0, 0}, held(s), "the single-IP pod keeps its address")

	_, err = s.Release(podKey("multi"))
	assert.ErrorIs(t, err, datastore.ErrUnknownPod, "a repeated DEL finds nothing")
	assert.Equal(t, datastore.ErrUnknownPod.Error(), err.Error(), "the text the plugin matches")
	assert.Empty(t, s.FindDELTargets(podKey("multi")))

	released, err = s.Release(podKey("single"))
	require.NoError(t, err)
	require.Len(t, released, 1)
	assert.Equal(t, single.IP, released[0].IP)
}

// A DEL for a single-IP pod that fell through to card 1 finds it there.
func TestADELFindsAFallenThroughAddress(t *testing.T) {
	s, _ := newSet(t, 2, 0, 1)
	a, err := s.Assign(podKey("p"), podMeta("p"))
	require.NoError(t, err)
	require.Equal(t, 1, a.NetworkCard)
	released, err := s.Release(podKey("p"))
	require.NoError(t, err)
	require.Len(t, released, 1)
	assert.Equal(t, a.IP, released[0].IP)
	assert.Equal(t, 1, released[0].NetworkCard)
}

// A card that cannot record the release does not stop the others: their
// addresses are released and reported with the error naming the card,
// and a retried DEL finishes the job.
func TestADELFailingOnOneCardReleasesTheOthers(t *testing.T) {
	s, cps := newSet(t, 3)
	assigned, err := s.AssignEach(podKey("multi"), podMeta("m"))
	require.NoError(t, err)
	cps[1].setFail(true)
	released, err := s.Release(podKey("multi"))
	require.Error(t, err)
	assert.ErrorIs(t, err, errDisk)
	assert.False(t, errors.Is(err, datastore.ErrUnknownPod))
	var ce *CardError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, 1, ce.Card)
	require.Len(t, released, 2)
	assert.Equal(t, assigned[0].IP, released[0].IP)
	assert.Equal(t, assigned[2].IP, released[1].IP)
	assert.Equal(t, []int{0, 1, 0}, held(s), "card 1 keeps the address it could not release")

	cps[1].setFail(false)
	released, err = s.Release(podKey("multi"))
	require.NoError(t, err, "the retried DEL releases what is left")
	require.Len(t, released, 1)
	assert.Equal(t, assigned[1].IP, released[0].IP)
	assert.Equal(t, []int{0, 0, 0}, held(s))
}

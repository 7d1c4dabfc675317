package nodeinit

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// cardStores are one datastore per card, made on first use.
type cardStores map[int]*datastore.DataStore

func (s cardStores) get(t *testing.T) func(int) Store {
	return func(card int) Store {
		if s[card] == nil {
			s[card] = datastore.New(datastore.Config{})
			t.Cleanup(func() { _ = s[card].Close() })
		}
		return s[card]
	}
}

func storeIDs(s *datastore.DataStore) []string {
	var ids []string
	for _, e := range s.ENISummaries() {
		ids = append(ids, e.Info.ID)
	}
	return ids
}

// TestEachManagedCardStartsWithItsENIsOrOneAttached: on a 4-card instance
// with multi-NIC on, a card's managed ENIs join its own datastore (tagged
// as ipamd's), a card with none gets one ENI attached on it with one
// address, and each card reports its own ENI limit and unmanaged ENIs.
// Card 0 is left to IPv4.
func TestEachManagedCardStartsWithItsENIsOrOneAttached(t *testing.T) {
	n := newNode(t, ec2sim.Config{InstanceType: "p4d.24xlarge"}, false)
	ctx := context.Background()
	untagged, err := n.sim.CreateAttachedENIOnCard(2, nil, 3)
	require.NoError(t, err)
	leftAlone, err := n.sim.CreateAttachedENIOnCard(3, map[string]string{awsutils.TagNoManage: "true"}, 0)
	require.NoError(t, err)

	stores := cardStores{}
	var setUp []awsutils.ENI
	deps := CardDeps{AWS: n.aws, Store: stores.get(t), SetupENI: func(_ context.Context, e awsutils.ENI) error {
		setUp = append(setUp, e)
		return nil
	}}
	cards, err := Cards(ctx, n.config(), true, deps, n.limits(t))
	require.NoError(t, err)
	require.Len(t, cards, 3)
	assert.Nil(t, stores[0], "card 0 is IPv4's")

	byCard := map[int]Card{}
	for _, c := range cards {
		byCard[c.Index] = c
		assert.Equal(t, 15, c.MaxENIs, "card %d's own limit", c.Index)
		assert.Equal(t, 49, c.SlotsPerENI)
	}
	assert.Equal(t, []int{1, 2, 3}, []int{cards[0].Index, cards[1].Index, cards[2].Index})

	// Card 1, empty: one ENI attached there, with one address.
	c1 := byCard[1]
	require.NotEmpty(t, c1.Attached)
	assert.Equal(t, []string{c1.Attached}, storeIDs(stores[1]))
	s1 := stores[1].ENISummaries()[0]
	assert.Len(t, s1.SecondaryIPs, 1)
	assert.False(t, s1.Info.Primary)
	assert.Equal(t, 10100, s1.Info.RouteTableID)
	sim1, ok := simENI(n.sim, c1.Attached)
	require.True(t, ok)
	assert.Equal(t, 1, sim1.NetworkCardIndex)

	// Card 2: its managed ENI joins, tagged; nothing attached.
	assert.Empty(t, byCard[2].Attached)
	assert.Equal(t, []string{untagged}, storeIDs(stores[2]))
	assert.Len(t, stores[2].ENISummaries()[0].SecondaryIPs, 3)
	sim2, _ := simENI(n.sim, untagged)
	assert.Equal(t, n.sim.InstanceID(), sim2.Tags[awsutils.TagInstanceID], "tagged as ipamd's")

	// Card 3: the ENI left alone counts against the card and does not
	// join; the card has no managed ENI, so one is attached.
	c3 := byCard[3]
	assert.Equal(t, 1, c3.UnmanagedENIs)
	assert.Equal(t, 14*49, c3.MaxAddresses)
	require.NotEmpty(t, c3.Attached)
	assert.Equal(t, []string{c3.Attached}, storeIDs(stores[3]))
	assert.NotContains(t, storeIDs(stores[3]), leftAlone)

	for _, e := range setUp {
		assert.NotZero(t, e.NetworkCard, "only cards above 0 are set up here")
	}
	assert.Len(t, setUp, 3)
}

// TestCardsWithoutProvisioningOrMultiNICAttachNothing: multi-NIC off does
// nothing at all; without provisioning an empty card stays empty.
func TestCardsWithoutProvisioningOrMultiNICAttachNothing(t *testing.T) {
	n := newNode(t, ec2sim.Config{InstanceType: "c6in.32xlarge"}, false)
	ctx := context.Background()
	stores := cardStores{}
	deps := CardDeps{AWS: n.aws, Store: stores.get(t), SetupENI: func(context.Context, awsutils.ENI) error { return nil }}
	before := len(n.sim.ENIs())

	n.sim.ResetCalls()
	cards, err := Cards(ctx, n.config(), false, deps, n.limits(t))
	require.NoError(t, err)
	assert.Nil(t, cards)
	assert.Empty(t, n.sim.Calls(), "multi-NIC off: no call")

	cfg := n.config()
	cfg.Provisioning = false
	cards, err = Cards(ctx, cfg, true, deps, n.limits(t))
	require.NoError(t, err)
	require.Len(t, cards, 1)
	assert.Equal(t, Card{Index: 1, MaxENIs: 8, SlotsPerENI: 49, MaxAddresses: 8 * 49}, cards[0])
	assert.Empty(t, stores[1].ENISummaries())
	assert.Len(t, n.sim.ENIs(), before, "nothing attached")
}

func simENI(sim *ec2sim.Sim, id string) (ec2sim.ENIState, bool) {
	for _, e := range sim.ENIs() {
		if e.ID == id {
			return e, true
		}
	}
	return ec2sim.ENIState{}, false
}

// TestACardsPoolConfigIsCardZerosWithTheCardsFigures: the card's index,
// ENI limit, unmanaged ENIs and slots replace card 0's; the rest (timers,
// provisioning, rules) carries over.
func TestACardsPoolConfigIsCardZerosWithTheCardsFigures(t *testing.T) {
	base := pool.Config{MaxENIs: 8, UnmanagedENIs: 2, SlotsPerENI: 49, Provisioning: true, PodENI: true,
		Targets: warmpool.Config{WarmENITarget: 1, SlotsPerENI: 49, MaxAddresses: 6 * 49 * 16, PrefixDelegation: true}}
	got := Card{Index: 1, MaxENIs: 15, UnmanagedENIs: 1, SlotsPerENI: 49, MaxAddresses: 14 * 49}.PoolConfig(base)
	want := base
	want.NetworkCard, want.MaxENIs, want.UnmanagedENIs = 1, 15, 1
	want.Targets.MaxAddresses = 14 * 49
	assert.Equal(t, want, got)
}

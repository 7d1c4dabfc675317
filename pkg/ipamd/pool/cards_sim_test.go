package pool

// One pool manager per network card (ENABLE_MULTI_NIC), through the real
// SDK against the simulator's multi-card instance types: each manager
// attaches, grows and syncs its own card's ENIs only.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/vpc"
)

// cardNode is a simulated multi-card instance with one manager and one
// datastore per card, each wired as the agent wires them.
type cardNode struct {
	sim    *ec2sim.Sim
	aws    *awsutils.Client
	stores []*datastore.DataStore
	mgrs   []*Manager
	// tables is the route table each ENI was set up with, by ENI ID.
	tables map[string]int
}

func newCardNode(t *testing.T, instanceType string) *cardNode {
	t.Helper()
	sim, c := testsupport.SimClient(t, ec2sim.Config{InstanceType: instanceType}, awsutils.Options{})
	lim, ok := vpc.Lookup(instanceType)
	require.True(t, ok)
	n := &cardNode{sim: sim, aws: c, tables: map[string]int{}}
	slots := lim.IPv4PerENI - 1
	// Card 0 runs with upstream's defaults (WARM_ENI_TARGET=1); the
	// others take CardTargets from the same base.
	base := warmpool.Config{WarmENITarget: 1, SlotsPerENI: slots, MaxAddresses: lim.ENIs * slots, MaxPods: 250}
	errs := testsupport.ErrorCount()
	for _, card := range lim.NetworkCards {
		store := datastore.New(datastore.Config{})
		t.Cleanup(func() { _ = store.Close() })
		// EC2VerifyInterval: the first sync reads EC2 whatever IMDS says.
		m := New(Config{NetworkCard: card.Index, Targets: base, MaxENIs: card.MaxENIs, SlotsPerENI: slots, Provisioning: true,
			EC2VerifyInterval: time.Hour},
			Deps{AWS: c, Store: store, Errors: errs, SetupENI: func(_ context.Context, e awsutils.ENI) error {
				n.tables[e.ID] = networkutils.RouteTableFor(e.NetworkCard, e.DeviceNumber)
				return nil
			}})
		n.stores = append(n.stores, store)
		n.mgrs = append(n.mgrs, m)
	}
	// Node init's part for card 0: the primary ENI is in its store.
	enis, err := c.InstanceENIs(context.Background())
	require.NoError(t, err)
	for _, e := range enis {
		if e.ID == sim.PrimaryENI() {
			require.NoError(t, AddENI(n.stores[0], e))
		}
	}
	return n
}

// simENIsOn are the simulator's ENIs attached on card, by ID.
func (n *cardNode) simENIsOn(card int) map[string]ec2sim.ENIState {
	out := map[string]ec2sim.ENIState{}
	for _, e := range n.sim.ENIs() {
		if e.Attached && e.NetworkCardIndex == card {
			out[e.ID] = e
		}
	}
	return out
}

func storeENIs(s *datastore.DataStore) []string {
	var ids []string
	for _, e := range s.ENISummaries() {
		ids = append(ids, e.Info.ID)
	}
	slices.Sort(ids)
	return ids
}

func keys[V any](m map[string]V) []string {
	var ids []string
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func assign(t *testing.T, s *datastore.DataStore, pod string) {
	t.Helper()
	_, err := s.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: pod, IfName: "eth0"}, datastore.IPAMMetadata{})
	require.NoError(t, err)
}

// TestEachCardsManagerKeepsOneWarmAddressOnItsOwnCard: on a 2-card and a
// 4-card instance, the manager of each card above 0 attaches one ENI on
// its card (at that card's first device index, set up with the card's
// route table, never the primary) carrying one address, then grows one
// address at a time as pods take them (W = M = 1, no prefixes); card 0's
// manager keeps today's pool on card 0. When the pods go, the card gives
// back all but its one warm address. No manager adds, grows or syncs
// another card's ENIs, and an ENI of another card is not "unknown" to a
// card's ENI sync (it does not make the sync read EC2).
func TestEachCardsManagerKeepsOneWarmAddressOnItsOwnCard(t *testing.T) {
	for _, it := range []string{"c6in.32xlarge", "p4d.24xlarge"} {
		t.Run(it, func(t *testing.T) {
			n := newCardNode(t, it)
			ctx := context.Background()
			cards := len(n.mgrs)

			// Every card steps; card 0 grows onto the primary, the others
			// attach one ENI each on their own card.
			for _, m := range n.mgrs {
				m.Step(ctx)
			}
			for card := 1; card < cards; card++ {
				onCard := n.simENIsOn(card)
				require.Len(t, onCard, 1, "card %d has one ENI", card)
				require.Equal(t, keys(onCard), storeENIs(n.stores[card]), "card %d's store holds its card's ENI", card)
				id := keys(onCard)[0]
				sim := onCard[id]
				assert.Equal(t, 0, sim.DeviceIndex, "the card's first device index")
				assert.Equal(t, 10000+100*card, n.tables[id], "set up with the card's table")
				sum := n.stores[card].ENISummaries()[0]
				assert.False(t, sum.Info.Primary)
				assert.Equal(t, 10000+100*card, sum.Info.RouteTableID)
				assert.Len(t, sum.SecondaryIPs, 1, "one warm address")
				assert.Empty(t, sum.Prefixes)
				assert.Equal(t, 1, n.stores[card].Stats().TotalIPs)
			}
			assert.Equal(t, []string{n.sim.PrimaryENI()}, storeENIs(n.stores[0]), "card 0's store has card 0's ENIs only")
			assert.Len(t, n.simENIsOn(0), 1, "card 0 attached nothing new: the primary has room")

			// Card 1 grows one address at a time as pods take them.
			for pod := range 3 {
				assign(t, n.stores[1], fmt.Sprintf("pod-%d", pod))
				n.mgrs[1].Step(ctx)
				st := n.stores[1].Stats()
				assert.Equal(t, pod+2, st.TotalIPs, "after pod %d: one spare beside the assigned", pod)
				assert.Equal(t, pod+1, st.AssignedIPs)
			}
			card1 := storeENIs(n.stores[1])
			require.Len(t, card1, 1, "grown on its ENI, no second ENI")
			assert.Len(t, n.simENIsOn(1)[card1[0]].SecondaryIPs, 4)

			// A settled pool does nothing more.
			before := n.sim.Calls()
			n.mgrs[1].Step(ctx)
			assert.Equal(t, before["AssignPrivateIpAddresses"], n.sim.Calls()["AssignPrivateIpAddresses"])

			// ENI sync: each card's manager reads EC2 (its first forced
			// read), keeps its own ENIs and takes none of another card's.
			primaryIPs := len(n.simENIsOn(0)[n.sim.PrimaryENI()].SecondaryIPs)
			for _, m := range n.mgrs {
				m.SyncENIs(ctx)
			}
			assert.Equal(t, []string{n.sim.PrimaryENI()}, storeENIs(n.stores[0]))
			for card := 1; card < cards; card++ {
				assert.Equal(t, keys(n.simENIsOn(card)), storeENIs(n.stores[card]), "card %d after the sync", card)
			}
			assert.Equal(t, 4, n.stores[1].Stats().TotalIPs, "card 1 keeps its addresses")
			assert.Len(t, n.simENIsOn(0)[n.sim.PrimaryENI()].SecondaryIPs, primaryIPs, "nobody touched the primary")

			// Now every store agrees with IMDS on its own card: a sync of
			// any card reads no EC2, though IMDS lists every card's ENIs.
			n.sim.ResetCalls()
			for _, m := range n.mgrs {
				m.SyncENIs(ctx)
			}
			assert.Zero(t, n.sim.Calls()["DescribeNetworkInterfaces"], "no card's ENI is unknown to another card's sync")

			// The pods go: card 1 gives back all but its one warm address
			// and keeps its ENI, which holds it.
			for pod := range 3 {
				_, err := n.stores[1].Release(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("pod-%d", pod), IfName: "eth0"})
				require.NoError(t, err)
			}
			n.mgrs[1].Step(ctx)
			assert.Equal(t, 1, n.stores[1].Stats().TotalIPs, "one warm address left")
			assert.Len(t, n.simENIsOn(1)[card1[0]].SecondaryIPs, 1, "given back to EC2")
			assert.Equal(t, card1, storeENIs(n.stores[1]), "the ENI holding it stays")
			assert.Len(t, n.simENIsOn(0)[n.sim.PrimaryENI()].SecondaryIPs, primaryIPs, "card 0 untouched")
		})
	}
}

// TestACardsManagerNeverFreesAnotherCardsENI: card 0's manager, stepping
// and syncing with an idle ENI of card 1 attached, neither frees it nor
// takes it into its store.
func TestACardsManagerNeverFreesAnotherCardsENI(t *testing.T) {
	n := newCardNode(t, "c6in.32xlarge")
	ctx := context.Background()
	n.mgrs[1].Step(ctx)
	card1 := keys(n.simENIsOn(1))
	require.Len(t, card1, 1)
	for range 3 {
		n.mgrs[0].Step(ctx)
		n.mgrs[0].SyncENIs(ctx)
	}
	assert.Equal(t, card1, keys(n.simENIsOn(1)), "card 1's ENI is still attached")
	assert.Equal(t, card1, storeENIs(n.stores[1]))
	assert.NotContains(t, storeENIs(n.stores[0]), card1[0])
}

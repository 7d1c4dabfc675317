package datastore

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each network card's store has its own checkpoint file, named as
// upstream names it, so either image finds the other's files.
func TestCheckpointPathForCardIsUpstreamsName(t *testing.T) {
	for _, tc := range []struct {
		base string
		card int
		want string
	}{
		{DefaultCheckpointPath, 0, "/var/run/aws-node/ipam.json"},
		{DefaultCheckpointPath, 1, "/var/run/aws-node/ipam-nic-1.json"},
		{DefaultCheckpointPath, 31, "/var/run/aws-node/ipam-nic-31.json"},
		{"/data/store.json", 2, "/data/store-nic-2.json"},
		// AWS_VPC_K8S_CNI_BACKING_STORE without ".json": only the suffix is added.
		{"/data/ipam", 0, "/data/ipam"},
		{"/data/ipam", 1, "/data/ipam-nic-1.json"},
		// Only one trailing ".json" is removed.
		{"/data/ipam.json.json", 1, "/data/ipam.json-nic-1.json"},
		{"/data.json/ipam", 1, "/data.json/ipam-nic-1.json"},
	} {
		assert.Equal(t, tc.want, CheckpointPathForCard(tc.base, tc.card), "%s card %d", tc.base, tc.card)
	}
}

// Every allocation a store returns names the store's card; card 0 is the
// default, so a store configured as before is card 0's.
func TestAllocationsCarryTheStoresNetworkCard(t *testing.T) {
	for _, card := range []int{0, 1, 3} {
		d := New(Config{NetworkCard: card})
		assert.Equal(t, card, d.NetworkCard())
		require.NoError(t, d.AddENI(ENIInfo{ID: "eni-a", DeviceNumber: 1, RouteTableID: 10001}))
		require.NoError(t, d.AddCIDR("eni-a", netip.MustParsePrefix("10.1.0.5/32")))
		require.NoError(t, d.AddCIDR("eni-a", netip.MustParsePrefix("10.1.0.6/32")))
		key := IPAMKey{NetworkName: "aws-cni", ContainerID: "c", IfName: "eth0"}

		got, err := d.Assign(key, IPAMMetadata{InterfacesCount: 1})
		require.NoError(t, err)
		assert.Equal(t, card, got.NetworkCard, "Assign")
		found, ok := d.Find(key)
		require.True(t, ok)
		assert.Equal(t, card, found.NetworkCard, "Find")
		target, ok := d.FindDELTarget(key)
		require.True(t, ok)
		assert.Equal(t, card, target.NetworkCard, "FindDELTarget")
		all := d.Allocations()
		require.Len(t, all, 1)
		assert.Equal(t, card, all[0].NetworkCard, "Allocations")
		rel, err := d.Release(key)
		require.NoError(t, err)
		assert.Equal(t, card, rel.NetworkCard, "Release")

		_, err = d.Assign(key, IPAMMetadata{})
		require.NoError(t, err)
		forced, err := d.RemoveENI("eni-a", true)
		require.NoError(t, err)
		require.Len(t, forced, 1)
		assert.Equal(t, card, forced[0].NetworkCard, "RemoveENI")
		require.NoError(t, d.Close())
	}
}

// Two pools' figures counted together are each figure's sum.
func TestStatsPlusAddsEveryFigure(t *testing.T) {
	a := Stats{ENIs: 1, TotalIPs: 2, AssignedIPs: 3, CooldownIPs: 4, PendingIPs: 5, TotalPrefixes: 6, FreePrefixes: 7}
	b := Stats{ENIs: 10, TotalIPs: 20, AssignedIPs: 30, CooldownIPs: 40, PendingIPs: 50, TotalPrefixes: 60, FreePrefixes: 70}
	assert.Equal(t, Stats{ENIs: 11, TotalIPs: 22, AssignedIPs: 33, CooldownIPs: 44, PendingIPs: 55, TotalPrefixes: 66, FreePrefixes: 77}, a.Plus(b))
	assert.Equal(t, a, a.Plus(Stats{}))
}

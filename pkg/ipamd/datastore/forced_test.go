package datastore

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

// Without verification, a CIDR removed by force that comes back gives each
// address back to the key that held it, with its assignment time and in
// the checkpoint; a key whose pod was deleted meanwhile does not get it
// back, nor does anyone after ForcedMemory.
func TestForcedRemovalIsRememberedUntilTheCIDRComesBack(t *testing.T) {
	cp := &MemoryCheckpointer{}
	clk := clocktest.New()
	d := New(Config{PrefixDelegation: true, Now: clk.Now, Checkpointer: cp})
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-a", Primary: true, RouteTableID: 254}))
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-b", DeviceNumber: 1, RouteTableID: 2}))
	p := pfx("10.0.0.16/28")
	require.NoError(t, d.AddCIDR("eni-a", p))
	var held []Allocation
	for i := range 3 {
		a, err := d.Assign(key(podName(i)), meta(podName(i)))
		require.NoError(t, err)
		held = append(held, a)
	}

	released, err := d.RemoveCIDR("eni-a", p, true)
	require.NoError(t, err)
	require.Len(t, released, 3)
	assert.Equal(t, 3, d.RemovedByForce())
	entries, err := cp.Read()
	require.NoError(t, err)
	assert.Empty(t, entries, "a confirmed removal leaves the checkpoint")

	_, err = d.Release(key(podName(2))) // its DEL arrives while the CIDR is away
	require.ErrorIs(t, err, ErrUnknownPod)
	assert.Equal(t, 2, d.RemovedByForce())

	clk.Advance(time.Minute)
	require.NoError(t, d.AddCIDR("eni-b", p)) // back, on whichever ENI
	for _, a := range held[:2] {
		got, ok := d.Find(a.Key)
		require.True(t, ok, "%s holds its address again", a.Key)
		assert.Equal(t, a.IP, got.IP)
		assert.True(t, a.AssignedAt.Equal(got.AssignedAt), "the allocation goes on: the reconciler's grace is not restarted")
	}
	_, ok := d.Find(key(podName(2)))
	assert.False(t, ok, "a deleted pod's address does not come back to it")
	entries, err = cp.Read()
	require.NoError(t, err)
	assert.Len(t, entries, 2, "given back durably")
	assert.Zero(t, d.RemovedByForce())
	assert.Equal(t, 2, d.Stats().AssignedIPs)

	// Too late: nothing comes back.
	_, err = d.RemoveENI("eni-b", true)
	require.NoError(t, err)
	assert.Equal(t, 2, d.RemovedByForce(), "an ENI removed by force is remembered too")
	clk.Advance(ForcedMemory + time.Second)
	assert.Zero(t, d.RemovedByForce())
	require.NoError(t, d.AddCIDR("eni-a", p))
	assert.Zero(t, d.Stats().AssignedIPs)
}

// Where new addresses are checked against the runtime, the memory gives
// nothing back: the address joins pending and the runtime decides.
func TestForcedMemoryDefersToVerification(t *testing.T) {
	d := New(Config{VerifyNewAddresses: true})
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-a", Primary: true, RouteTableID: 254}))
	c := pfx("10.0.0.10/32")
	require.NoError(t, d.AddCIDR("eni-a", c))
	require.Equal(t, 1, d.Verify(d.PendingAddresses()))
	_, err := d.Assign(key("a"), meta("a"))
	require.NoError(t, err)
	_, err = d.RemoveCIDR("eni-a", c, true)
	require.NoError(t, err)
	require.NoError(t, d.AddCIDR("eni-a", c))
	_, ok := d.Find(key("a"))
	assert.False(t, ok)
	assert.Equal(t, 1, d.Stats().PendingIPs, "pending until the runtime is asked")
	pending := d.PendingAddresses()
	require.Len(t, pending, 1)
	assert.Equal(t, []Holder{{IP: c.Addr(), Key: key("a")}}, pending[0].LastHolders,
		"the key that held it is its last known holder: its sandbox is asked first")
	require.Equal(t, 1, d.Verify(pending))
	assert.Zero(t, d.RemovedByForce(), "settled: the memory goes")
}

// A key whose address was removed by force, that then got a second address
// (a retried ADD) and was deleted (its DEL released that one), does not get
// the first address back when it joins again: its pod is gone.
func TestDeletedKeyDoesNotGetItsForcedAddressBack(t *testing.T) {
	d, _ := newStoreOnClock(t, nil, 3)
	a, err := d.Assign(key("k"), meta("k"))
	require.NoError(t, err)
	_, err = d.RemoveCIDR("eni-a", a.CIDR, true)
	require.NoError(t, err)
	_, err = d.Assign(key("k"), meta("k"))
	require.NoError(t, err)
	_, err = d.Release(key("k"))
	require.NoError(t, err)
	require.NoError(t, d.AddCIDR("eni-a", a.CIDR))
	_, ok := d.Find(key("k"))
	assert.False(t, ok, "a deleted key got %s back", a.IP)
	_, free := d.Holds(a.IP)
	assert.True(t, free)
}

// A key that holds another address by the time its CIDR comes back keeps
// that one; the remembered address stays free.
func TestForcedRestoreSkipsAKeyThatMovedOn(t *testing.T) {
	d, _ := newStoreOnClock(t, nil, 2)
	a, err := d.Assign(key("a"), meta("a"))
	require.NoError(t, err)
	_, err = d.RemoveCIDR("eni-a", a.CIDR, true)
	require.NoError(t, err)
	other, err := d.Assign(key("a"), meta("a")) // the same key got a new ADD
	require.NoError(t, err)
	require.NoError(t, d.AddCIDR("eni-a", a.CIDR))
	got, ok := d.Find(key("a"))
	require.True(t, ok)
	assert.Equal(t, other.IP, got.IP)
	inPool, free := d.Holds(a.IP)
	assert.True(t, inPool)
	assert.True(t, free)
}

// A checkpoint entry whose address is on none of the ENIs at start (one
// EC2 answer may have left it out) is dropped but remembered: when the
// address joins, on any ENI, its key holds it again.
func TestRestoreRemembersEntriesNotInPool(t *testing.T) {
	d, cp, a := restoredWithoutItsAddress(t, key("a"))
	assert.Equal(t, 1, d.RemovedByForce())
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-b", DeviceNumber: 1, RouteTableID: 2}))
	require.NoError(t, d.AddCIDR("eni-b", a.CIDR))
	got, ok := d.Find(key("a"))
	require.True(t, ok, "the entry's key holds its address again")
	assert.Equal(t, a.IP, got.IP)
	assert.Equal(t, a.AssignedAt.UnixNano(), got.AssignedAt.UnixNano())
	entries, err := cp.Read()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, a.IP, entries[0].IP)
}

// A DEL for a key whose allocation the restore dropped (on one answer)
// ends the memory under either form of the key, the one the DEL names and
// the one very old versions wrote when they migrated pods from the CRI:
// the pod is gone, so the address does not go back to it when it joins.
func TestReleaseOfUnknownKeyForgetsItsMemoryUnderEitherForm(t *testing.T) {
	for _, held := range []IPAMKey{key("c"), migratedKey(key("c"))} {
		t.Run(held.NetworkName, func(t *testing.T) {
			d, _, a := restoredWithoutItsAddress(t, held)
			_, err := d.Release(key("c"))
			assert.ErrorIs(t, err, ErrUnknownPod)
			assert.Zero(t, d.RemovedByForce(), "the DEL ended the memory")
			require.NoError(t, d.AddCIDR("eni-a", a.CIDR))
			_, ok := d.Find(held)
			assert.False(t, ok, "a deleted pod's key got %s back", a.IP)
			inPool, free := d.Holds(a.IP)
			assert.True(t, inPool && free)
		})
	}
}

// restoredWithoutItsAddress is a store restored from a checkpoint in which
// held holds 10.0.0.10 on eni-a, with eni-a but none of its addresses yet
// (one EC2 answer left them out): the entry was dropped and remembered.
func restoredWithoutItsAddress(t *testing.T, held IPAMKey) (*DataStore, *MemoryCheckpointer, Allocation) {
	t.Helper()
	cp := &MemoryCheckpointer{}
	first := New(Config{Checkpointer: cp})
	addSecondaryENI(t, first, "eni-a", 0, "10.0.0.10", 2)
	a, err := first.Adopt(netip.MustParseAddr("10.0.0.10"), held, meta(held.ContainerID))
	require.NoError(t, err)
	require.NoError(t, first.Close())

	d := New(Config{Checkpointer: cp})
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-a", Primary: true, RouteTableID: 254}))
	rep, err := d.Restore()
	require.NoError(t, err)
	require.Len(t, rep.NotInPool, 1)
	return d, cp, a
}

package datastore

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTransferMovesAnAddressWithoutFreeingIt(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d, clk := newStoreOnClock(t, cp, 2)
	stale, err := d.Assign(key("stale"), meta("gone"))
	require.NoError(t, err)
	clk.Advance(time.Minute)

	_, err = d.Transfer(key("nobody"), stale.AssignedAt, key("live"), meta("web"))
	require.ErrorIs(t, err, ErrUnknownPod)
	_, err = d.Transfer(key("stale"), stale.AssignedAt.Add(time.Nanosecond), key("live"), meta("web"))
	require.ErrorIs(t, err, ErrAllocationChanged)
	other, err := d.Assign(key("other"), meta("other"))
	require.NoError(t, err)
	_, err = d.Transfer(key("stale"), stale.AssignedAt, key("other"), meta("web"))
	require.ErrorIs(t, err, ErrKeyExists)

	before := d.Stats()
	got, err := d.Transfer(key("stale"), stale.AssignedAt, key("live"), meta("web"))
	require.NoError(t, err)
	assert.Equal(t, stale.IP, got.IP)
	assert.Equal(t, key("live"), got.Key)
	assert.Equal(t, clk.Now(), got.AssignedAt)
	_, ok := d.Find(key("stale"))
	assert.False(t, ok)
	assert.Equal(t, before, d.Stats(), "no address freed, cooled or added")
	entries, err := cp.Read()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"live", "other"}, []string{entries[0].Key.ContainerID, entries[1].Key.ContainerID}, "durable on return")

	// The address never became available: the pool is still full.
	_, err = d.Assign(key("new"), meta("new"))
	require.ErrorIs(t, err, ErrNoAvailableIP)
	assert.NotEqual(t, other.IP, got.IP)
}

func TestTransferUndoneWhenTheCheckpointFails(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d := New(Config{Checkpointer: cp})
	defer d.Close()
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 1)
	stale, err := d.Assign(key("stale"), meta("gone"))
	require.NoError(t, err)
	cp.SetFail(errors.New("disk full"))
	_, err = d.Transfer(key("stale"), stale.AssignedAt, key("live"), meta("web"))
	require.Error(t, err)
	cp.SetFail(nil)
	back, ok := d.Find(key("stale"))
	require.True(t, ok, "the old allocation is put back")
	assert.Equal(t, stale, back)
	_, ok = d.Find(key("live"))
	assert.False(t, ok)
	inPool, free := d.Holds(netip.MustParseAddr("10.0.0.10"))
	assert.True(t, inPool)
	assert.False(t, free)
}

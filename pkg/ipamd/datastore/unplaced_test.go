package datastore

import (
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

// A checkpoint entry whose address no ENI has at restore stays in the
// checkpoint until evidence ends it: its key's DEL, a second EC2 read the
// dispute period later, or its address joining and being settled. Nothing
// else (a restart, time passing, a read too soon) does.
func TestAnUnplacedEntryLeavesTheCheckpointOnlyOnEvidence(t *testing.T) {
	const period = 30 * time.Second
	lost := entry("lost", "10.0.9.1", 1_700_000_000_000_000_001, "lost")
	tests := []struct {
		name   string
		verify bool
		act    func(t *testing.T, d *DataStore, clk *clocktest.Clock, cp *MemoryCheckpointer) *DataStore
		// inFile: the entry is still in the checkpoint; held: its key
		// holds its address.
		inFile, held bool
	}{
		{name: "a restart keeps it", inFile: true, act: func(t *testing.T, d *DataStore, clk *clocktest.Clock, cp *MemoryCheckpointer) *DataStore {
			require.NoError(t, d.Close())
			d2 := New(Config{Now: clk.Now, Checkpointer: cp})
			addSecondaryENI(t, d2, "eni-a", 0, "10.0.0.10", 2)
			rep, err := d2.Restore()
			require.NoError(t, err)
			require.Len(t, rep.NotInPool, 1)
			return d2
		}},
		{name: "time passing keeps it", inFile: true, act: func(t *testing.T, d *DataStore, clk *clocktest.Clock, _ *MemoryCheckpointer) *DataStore {
			clk.Advance(ForcedMemory + time.Hour)
			assert.Equal(t, 1, d.RemovedByForce(), "still remembered")
			_, err := d.Assign(key("other"), meta("other")) // another write
			require.NoError(t, err)
			return d
		}},
		{name: "its key's DEL ends it before the DEL returns", act: func(t *testing.T, d *DataStore, _ *clocktest.Clock, _ *MemoryCheckpointer) *DataStore {
			_, err := d.Release(lost.Key)
			require.ErrorIs(t, err, ErrUnknownPod)
			return d
		}},
		{name: "its key's DEL whose write fails ends nothing; the retried DEL does", act: func(t *testing.T, d *DataStore, _ *clocktest.Clock, cp *MemoryCheckpointer) *DataStore {
			cp.SetFail(io.ErrShortWrite)
			_, err := d.Release(lost.Key)
			require.ErrorIs(t, err, io.ErrShortWrite, "the DEL fails: the runtime retries it")
			assert.Equal(t, 1, d.Unplaced(), "still remembered, as it is still on disk")
			cp.SetFail(nil)
			_, err = d.Release(lost.Key)
			require.ErrorIs(t, err, ErrUnknownPod)
			assert.Zero(t, d.Unplaced())
			return d
		}},
		{name: "a read inside the dispute period ends nothing", inFile: true, act: func(t *testing.T, d *DataStore, clk *clocktest.Clock, _ *MemoryCheckpointer) *DataStore {
			gone, err := d.ConfirmUnplaced(clk.Now().Add(period-time.Second), period, nil)
			require.NoError(t, err)
			assert.Empty(t, gone)
			return d
		}},
		{name: "a second read the dispute period later ends it", act: func(t *testing.T, d *DataStore, clk *clocktest.Clock, _ *MemoryCheckpointer) *DataStore {
			gone, err := d.ConfirmUnplaced(clk.Now().Add(period), period, nil)
			require.NoError(t, err)
			assert.Len(t, gone, 1)
			assert.Equal(t, 1, d.RemovedByForce(), "remembered in process, as a confirmed removal")
			return d
		}},
		{name: "a read that lists its address ends nothing, though the store could not take it", inFile: true, act: func(t *testing.T, d *DataStore, clk *clocktest.Clock, _ *MemoryCheckpointer) *DataStore {
			gone, err := d.ConfirmUnplaced(clk.Now().Add(period), period, []netip.Prefix{netip.PrefixFrom(lost.IP, 32)})
			require.NoError(t, err)
			assert.Empty(t, gone)
			return d
		}},
		{name: "its address joining gives it back to its key", inFile: true, held: true, act: func(t *testing.T, d *DataStore, _ *clocktest.Clock, _ *MemoryCheckpointer) *DataStore {
			require.NoError(t, d.AddCIDR("eni-a", netip.PrefixFrom(lost.IP, 32)))
			return d
		}},
		{name: "with verification, a joined address keeps it until settled", verify: true, inFile: true, act: func(t *testing.T, d *DataStore, clk *clocktest.Clock, _ *MemoryCheckpointer) *DataStore {
			require.NoError(t, d.AddCIDR("eni-a", netip.PrefixFrom(lost.IP, 32)))
			gone, err := d.ConfirmUnplaced(clk.Now().Add(period), period, nil)
			require.NoError(t, err)
			assert.Empty(t, gone, "its address is on an ENI: the runtime check decides")
			return d
		}},
		{name: "with verification, the address verified free ends it", verify: true, act: func(t *testing.T, d *DataStore, _ *clocktest.Clock, _ *MemoryCheckpointer) *DataStore {
			require.NoError(t, d.AddCIDR("eni-a", netip.PrefixFrom(lost.IP, 32)))
			pending := d.PendingAddresses()
			require.Len(t, pending, 1)
			assert.Equal(t, []Holder{{IP: lost.IP, Key: lost.Key}}, pending[0].LastHolders)
			require.Equal(t, 1, d.Verify(pending))
			return d
		}},
		{name: "with verification, adoption by its pod settles it", verify: true, inFile: true, held: true, act: func(t *testing.T, d *DataStore, _ *clocktest.Clock, _ *MemoryCheckpointer) *DataStore {
			require.NoError(t, d.AddCIDR("eni-a", netip.PrefixFrom(lost.IP, 32)))
			_, err := d.Adopt(lost.IP, lost.Key, lost.Metadata)
			require.NoError(t, err)
			return d
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New()
			cp := seeded(t, []CheckpointEntry{lost})
			d := New(Config{Now: clk.Now, Checkpointer: cp, VerifyNewAddresses: tc.verify})
			addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
			if tc.verify {
				require.Equal(t, 2, d.Verify(d.PendingAddresses()))
			}
			rep, err := d.Restore()
			require.NoError(t, err)
			require.Len(t, rep.NotInPool, 1)
			require.Equal(t, 1, d.Unplaced())

			d = tc.act(t, d, clk, cp)
			require.NoError(t, d.Close()) // every write done
			entries, err := cp.Read()
			require.NoError(t, err)
			var found []CheckpointEntry
			for _, e := range entries {
				if e.Key == lost.Key {
					found = append(found, e)
				}
			}
			if !tc.inFile {
				assert.Empty(t, found, "the entry left the checkpoint")
				return
			}
			require.Len(t, found, 1, "the entry is in the checkpoint once")
			assert.Equal(t, lost.IP, found[0].IP)
			if !tc.verify || !tc.held { // an adoption is assigned when it is made
				assert.True(t, lost.AssignedAt.Equal(found[0].AssignedAt), "with its assignment time")
			}
			got, ok := d.Find(lost.Key)
			assert.Equal(t, tc.held, ok && got.IP == lost.IP, "its key holds its address")
		})
	}
}

package datastore

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func entry(id, ip string, ns int64, name string) CheckpointEntry {
	return CheckpointEntry{Key: key(id), IP: netip.MustParseAddr(ip), AssignedAt: time.Unix(0, ns), Metadata: meta(name)}
}

// seeded returns a MemoryCheckpointer that already holds entries, as if a
// previous ipamd had written them.
func seeded(t testing.TB, entries []CheckpointEntry) *MemoryCheckpointer {
	t.Helper()
	cp := &MemoryCheckpointer{}
	require.NoError(t, cp.Write(entries))
	return cp
}

func TestRestoreKeepsWhatFits(t *testing.T) {
	c1 := entry("c1", "10.0.0.10", 1_700_000_000_000_000_001, "p1")
	c2 := entry("c2", "10.0.0.11", 1_700_000_000_000_000_002, "p2")
	c3 := entry("c3", "10.0.0.12", 1_700_000_000_000_000_003, "p3")
	gone := entry("gone", "10.0.99.1", 1_700_000_000_000_000_004, "gone")
	sameIP := entry("c9", "10.0.0.10", 1_700_000_000_000_000_005, "p9")
	sameKey := entry("c1", "10.0.0.12", 1_700_000_000_000_000_006, "p1-again")
	onB := entry("b1", "10.0.1.20", 1_700_000_000_000_000_007, "b1")

	tests := []struct {
		name      string
		entries   []CheckpointEntry
		kept      []CheckpointEntry
		notInPool []CheckpointEntry
		conflicts []CheckpointEntry
	}{
		{name: "empty checkpoint"},
		{name: "all fit", entries: []CheckpointEntry{c1, c2, onB}, kept: []CheckpointEntry{c1, c2, onB}},
		{
			name:      "address on no ENI is not assigned but stays in the checkpoint",
			entries:   []CheckpointEntry{c1, gone, c2},
			kept:      []CheckpointEntry{c1, c2},
			notInPool: []CheckpointEntry{gone},
		},
		{
			name:      "second holder of an address loses",
			entries:   []CheckpointEntry{c1, sameIP},
			kept:      []CheckpointEntry{c1},
			conflicts: []CheckpointEntry{sameIP},
		},
		{
			name:      "second entry of a key loses",
			entries:   []CheckpointEntry{c1, sameKey, c2},
			kept:      []CheckpointEntry{c1, c2},
			conflicts: []CheckpointEntry{sameKey},
		},
		{
			name:      "the first wins whatever the order",
			entries:   []CheckpointEntry{sameIP, c1, c3, sameKey},
			kept:      []CheckpointEntry{sameIP, c3},
			conflicts: []CheckpointEntry{c1, sameKey},
		},
		{
			name:      "everything at once",
			entries:   []CheckpointEntry{gone, c1, sameIP, onB, sameKey, c3, gone},
			kept:      []CheckpointEntry{c1, onB, c3},
			notInPool: []CheckpointEntry{gone, gone},
			conflicts: []CheckpointEntry{sameIP, sameKey},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New()
			cp := seeded(t, tc.entries)
			d := New(Config{Cooldown: 30 * time.Second, Now: clk.Now, Checkpointer: cp})
			defer d.Close()
			addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 3)
			addSecondaryENI(t, d, "eni-b", 1, "10.0.1.20", 2)

			rep, err := d.Restore()
			require.NoError(t, err)
			assert.Equal(t, len(tc.kept), rep.Restored)
			assert.Equal(t, viewsOf(tc.notInPool), viewsOf(rep.NotInPool), "not-in-pool entries, in checkpoint order")
			assert.Equal(t, viewsOf(tc.conflicts), viewsOf(rep.Conflicts), "conflicting entries, in checkpoint order")

			// The store holds exactly the kept entries, as they were.
			var held []CheckpointEntry
			for _, a := range d.Allocations() {
				held = append(held, CheckpointEntry{Key: a.Key, IP: a.IP, AssignedAt: a.AssignedAt, Metadata: a.Metadata})
				assert.Equal(t, a.IP.As4()[2] == 1, a.ENIID == "eni-b", "%s on the ENI that has it", a.IP)
			}
			assert.Equal(t, sortedViews(tc.kept), sortedViews(held))
			s := d.Stats()
			assert.Equal(t, len(tc.kept), s.AssignedIPs)
			assert.Zero(t, s.CooldownIPs)

			// The checkpoint now says exactly what was kept, and still
			// holds the entries no ENI has (once each): one answer at start
			// is no evidence that their pods are gone.
			got, err := cp.Read()
			require.NoError(t, err)
			want := slices.Clone(tc.kept)
			if len(tc.notInPool) > 0 {
				want = append(want, tc.notInPool[0])
			}
			assert.Equal(t, sortedViews(want), sortedViews(got))
			assert.Equal(t, 2, cp.Writes(), "the seed plus one rewrite")

			// A dropped key is unknown; a kept one can be released.
			for _, e := range append(tc.notInPool, tc.conflicts...) {
				if !containsKey(tc.kept, e.Key) {
					_, err := d.Release(e.Key)
					assert.ErrorIs(t, err, ErrUnknownPod)
				}
			}
			for _, e := range tc.kept {
				rel, err := d.Release(e.Key)
				require.NoError(t, err)
				assert.Equal(t, e.IP, rel.IP)
			}
		})
	}
}

func containsKey(entries []CheckpointEntry, k IPAMKey) bool {
	for _, e := range entries {
		if e.Key == k {
			return true
		}
	}
	return false
}

func TestRestorePrefixMode(t *testing.T) {
	entries := []CheckpointEntry{
		entry("a1", "10.0.16.3", 11, "a1"),
		entry("a2", "10.0.16.0", 12, "a2"),
		entry("a3", "10.0.16.15", 13, "a3"),
		entry("b1", "10.0.32.25", 14, "b1"), // second prefix of eni-b
		// A /32 left over from secondary-IP mode: the pod still has it.
		entry("old", "10.0.99.5", 15, "old"),
		// In no /28 of the node.
		entry("gone", "10.0.16.16", 16, "gone"),
	}
	cp := seeded(t, entries)
	clk := clocktest.New()
	d := New(Config{PrefixDelegation: true, Cooldown: 30 * time.Second, Now: clk.Now, Checkpointer: cp})
	defer d.Close()
	addPrefixENI(t, d, "eni-a", 0, "10.0.16.0", 1)
	addPrefixENI(t, d, "eni-b", 1, "10.0.32.0", 2)
	require.NoError(t, d.AddCIDR("eni-a", pfx("10.0.99.5/32")))

	rep, err := d.Restore()
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Restored)
	assert.Equal(t, viewsOf(entries[5:]), viewsOf(rep.NotInPool))
	assert.Empty(t, rep.Conflicts)

	want := map[string]struct {
		cidr     string
		eni      string
		isPrefix bool
	}{
		"a1":  {"10.0.16.0/28", "eni-a", true},
		"a2":  {"10.0.16.0/28", "eni-a", true},
		"a3":  {"10.0.16.0/28", "eni-a", true},
		"b1":  {"10.0.32.16/28", "eni-b", true},
		"old": {"10.0.99.5/32", "eni-a", false},
	}
	for id, w := range want {
		a, ok := d.Find(key(id))
		require.True(t, ok, id)
		assert.Equal(t, pfx(w.cidr), a.CIDR, id)
		assert.Equal(t, w.eni, a.ENIID, id)
		assert.Equal(t, w.isPrefix, a.IsPrefix, id)
	}
	assert.Equal(t, Stats{ENIs: 2, TotalIPs: 48, AssignedIPs: 4, TotalPrefixes: 3, FreePrefixes: 1}, d.Stats())

	// New pods pack into the busiest restored prefix, next to a1..a3, and
	// never get a restored address.
	taken := map[netip.Addr]bool{}
	for _, e := range entries[:5] {
		taken[e.IP] = true
	}
	for i := range 13 {
		a, err := d.Assign(key(podName(i)), meta(podName(i)))
		require.NoError(t, err)
		assert.Equal(t, pfx("10.0.16.0/28"), a.CIDR, "pod %d", i)
		assert.False(t, taken[a.IP], "%s handed out twice", a.IP)
		taken[a.IP] = true
	}
	a, err := d.Assign(key("next"), meta("next"))
	require.NoError(t, err)
	assert.Equal(t, pfx("10.0.32.16/28"), a.CIDR, "then into the other busy prefix")
	assert.Equal(t, 1, d.Stats().FreePrefixes)
}

// TestRestoreNothingCooling: cooldown is not persisted. Addresses that were
// resting when the old ipamd stopped are free after a restart, and restored
// ones are assigned, not cooling.
func TestRestoreNothingCooling(t *testing.T) {
	clk := clocktest.New()
	cp := &MemoryCheckpointer{}
	d1 := New(Config{Cooldown: 30 * time.Second, Now: clk.Now, Checkpointer: cp})
	addSecondaryENI(t, d1, "eni-a", 0, "10.0.0.10", 4)
	for _, id := range []string{"keep", "r1", "r2"} {
		_, err := d1.Assign(key(id), meta(id))
		require.NoError(t, err)
	}
	for _, id := range []string{"r1", "r2"} {
		_, err := d1.Release(key(id))
		require.NoError(t, err)
	}
	require.Equal(t, 2, d1.Stats().CooldownIPs)
	require.NoError(t, d1.Close())

	d2 := New(Config{Cooldown: 30 * time.Second, Now: clk.Now, Checkpointer: cp})
	defer d2.Close()
	addSecondaryENI(t, d2, "eni-a", 0, "10.0.0.10", 4)
	rep, err := d2.Restore()
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Restored)
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 4, AssignedIPs: 1}, d2.Stats())
	for _, e := range d2.ENIInfos().ENIs["eni-a"].AvailableIPv4Cidrs {
		for _, av := range e.IPAddresses {
			assert.Equal(t, key("keep"), av.IPAMKey)
			assert.True(t, av.UnassignedTime.IsZero())
		}
	}
	// No clock advance: every other address is usable at once.
	for i := range 3 {
		_, err := d2.Assign(key(podName(i)), meta(podName(i)))
		require.NoError(t, err)
	}
}

func TestRestoreFixture(t *testing.T) {
	fc, err := NewFileCheckpointer(filepath.Join(t.TempDir(), "ipam.json"))
	require.NoError(t, err)
	fixture, err := os.ReadFile(fixturePath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(fc.Path(), fixture, 0o644))

	d := New(Config{Checkpointer: fc})
	defer d.Close()
	addSecondaryENI(t, d, "eni-0123456789abcdef0", 0, "192.168.12.30", 30)
	addSecondaryENI(t, d, "eni-0fedcba9876543210", 1, "192.168.12.60", 10)
	rep, err := d.Restore()
	require.NoError(t, err)
	assert.Equal(t, 4, rep.Restored)

	for _, e := range fixtureEntries() {
		a, ok := d.Find(e.Key)
		require.True(t, ok, e.Key.String())
		assert.Equal(t, e.IP, a.IP)
		assert.Equal(t, e.AssignedAt.UnixNano(), a.AssignedAt.UnixNano())
		assert.Equal(t, e.Metadata, a.Metadata)
	}
	got, err := fc.Read()
	require.NoError(t, err)
	assert.Equal(t, sortedViews(fixtureEntries()), sortedViews(got))

	// The CRI-migrated entry is released by its real key.
	migrated := fixtureEntries()[1]
	rel, err := d.Release(key(migrated.Key.ContainerID))
	require.NoError(t, err)
	assert.Equal(t, migrated.IP, rel.IP)
}

func TestRestoreBadCheckpointAssignsNothing(t *testing.T) {
	tests := []struct {
		name string
		data string
		want error
		// kept: the file is left as it was (else it is moved aside).
		kept bool
	}{
		{"unknown version", `{"version":"vpc-cni-ipam/2","allocations":[{"networkName":"aws-cni","containerID":"c1","ifName":"eth0","ipv4":"10.0.0.10","allocationTimestamp":1,"metadata":{}}]}` + "\n", ErrCheckpointVersion, true},
		{"corrupt", `{"version":"vpc-cni-ipam/1","allocations":[{"networkName":"aws-cni","containerID":"c1","ifName":"eth0","ipv4":"10.0.0.10"`, ErrCheckpointCorrupt, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ipam.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o600))
			fc, err := NewFileCheckpointer(path)
			require.NoError(t, err)
			d := New(Config{Checkpointer: fc})
			addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)

			rep, err := d.Restore()
			require.ErrorIs(t, err, tc.want)
			assert.Zero(t, rep.Restored)
			assert.Empty(t, d.Allocations())
			assert.Zero(t, d.Stats().AssignedIPs)
			_, ok := d.Find(key("c1"))
			assert.False(t, ok)
			require.NoError(t, d.Close())

			data, err := os.ReadFile(path)
			if tc.kept {
				require.NoError(t, err)
				assert.Equal(t, tc.data, string(data), "not rewritten")
			} else {
				assert.ErrorIs(t, err, os.ErrNotExist)
			}
		})
	}
}

func TestRestoreMissingCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	fc, err := NewFileCheckpointer(path)
	require.NoError(t, err)
	d := New(Config{Checkpointer: fc})
	defer d.Close()
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	rep, err := d.Restore()
	require.NoError(t, err)
	assert.Equal(t, RestoreReport{}, rep)
	data, err := os.ReadFile(path)
	require.NoError(t, err, "the checkpoint is written: it now matches the (empty) store")
	assert.Equal(t, "{\"version\":\"vpc-cni-ipam/1\",\"allocations\":[]}\n", string(data))
}

func TestRestoreWithoutCheckpointer(t *testing.T) {
	d := New(Config{})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	rep, err := d.Restore()
	require.NoError(t, err)
	assert.Equal(t, RestoreReport{}, rep)
	assert.Empty(t, d.Allocations())
}

// TestRestoreReportsAFailedRewrite: a restore whose rewrite of the
// checkpoint fails says so, with what it restored.
func TestRestoreReportsAFailedRewrite(t *testing.T) {
	cp := seeded(t, []CheckpointEntry{entry("c1", "10.0.0.10", 1_700_000_000_000_000_001, "p1")})
	d := New(Config{Checkpointer: cp})
	t.Cleanup(func() { _ = d.Close() })
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	cp.SetFail(errors.New("disk full"))
	rep, err := d.Restore()
	require.ErrorContains(t, err, "restore: rewrite checkpoint: disk full")
	assert.Equal(t, 1, rep.Restored)
}

// Issue 36, case 4. A checkpoint written while the wall clock was ahead
// holds assignment times in the future. Restored, such an allocation
// counts as assigned at the restore, so its grace period runs from then
// rather than until the clock catches up; a past time keeps its age. The
// same holds for an entry the restore let go of and gave back later.
func TestRestoreCountsAFutureAssignmentTimeAsTheRestore(t *testing.T) {
	cp := &MemoryCheckpointer{}
	ahead := clocktest.New()
	ahead.Advance(time.Hour)
	first := New(Config{Now: ahead.Now, Checkpointer: cp})
	addSecondaryENI(t, first, "eni-a", 0, "10.0.0.10", 2)
	addSecondaryENI(t, first, "eni-b", 1, "10.0.1.10", 1)
	dropped, err := first.Adopt(netip.MustParseAddr("10.0.1.10"), key("dropped"), meta("dropped"))
	require.NoError(t, err)
	future, err := first.Assign(key("future"), meta("future"))
	require.NoError(t, err)
	ahead.Set(clocktest.Start.Add(-time.Minute))
	past, err := first.Assign(key("past"), meta("past"))
	require.NoError(t, err)
	require.NoError(t, first.Close())

	clk := clocktest.New() // the clock stepped back an hour
	d := New(Config{Now: clk.Now, Checkpointer: cp})
	t.Cleanup(func() { _ = d.Close() })
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-b", DeviceNumber: 1, RouteTableID: 2}))
	rep, err := d.Restore()
	require.NoError(t, err)
	require.Equal(t, 2, rep.Restored)
	require.Len(t, rep.NotInPool, 1)
	restoredAt := clk.Now()

	got, ok := d.Find(key("future"))
	require.True(t, ok)
	assert.True(t, got.AssignedAt.Equal(restoredAt), "assigned at %s, restored at %s (written at %s)", got.AssignedAt, restoredAt, future.AssignedAt)
	got, ok = d.Find(key("past"))
	require.True(t, ok)
	assert.True(t, got.AssignedAt.Equal(past.AssignedAt), "a past assignment keeps its time")

	clk.Advance(time.Minute)
	require.NoError(t, d.AddCIDR("eni-b", dropped.CIDR))
	got, ok = d.Find(key("dropped"))
	require.True(t, ok)
	assert.True(t, got.AssignedAt.Equal(restoredAt), "given back: assigned at %s, restored at %s", got.AssignedAt, restoredAt)
}

// A restored allocation's age is measured on the process's monotonic clock
// from the restore on: its assignment time keeps the checkpoint's wall
// time and carries a monotonic reading, so a wall-clock step after the
// restore moves no grace period (time.Time compares and subtracts on the
// monotonic readings when both times have one).
func TestARestoredAllocationAgesOnTheMonotonicClock(t *testing.T) {
	written := time.Now().Add(-time.Minute).Round(0) // as read from a file: wall time only
	d := New(Config{Checkpointer: seeded(t, []CheckpointEntry{{Key: key("c1"), IP: netip.MustParseAddr("10.0.0.10"), AssignedAt: written}})})
	t.Cleanup(func() { _ = d.Close() })
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 1)
	_, err := d.Restore()
	require.NoError(t, err)
	got, ok := d.Find(key("c1"))
	require.True(t, ok)
	assert.Equal(t, written.UnixNano(), got.AssignedAt.UnixNano(), "the checkpoint's wall time is kept")
	assert.Contains(t, got.AssignedAt.String(), " m=", "anchored on the monotonic clock")
	assert.InDelta(t, time.Minute.Seconds(), time.Since(got.AssignedAt).Seconds(), 5, "its age is what the checkpoint says")
}

package datastore

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// restartOnFile opens a new store on the checkpoint at path, with one ENI
// of n addresses from 10.0.0.10 and a 30 s cooldown, on clk, and restores:
// what a restarted ipamd does before serving its first ADD.
func restartOnFile(t *testing.T, path string, clk *clocktest.Clock, n int, verify bool) (*DataStore, RestoreReport) {
	t.Helper()
	cp, err := NewFileCheckpointer(path)
	require.NoError(t, err)
	d := New(Config{Now: clk.Now, Cooldown: 30 * time.Second, Checkpointer: cp, VerifyNewAddresses: verify})
	t.Cleanup(func() { _ = d.Close() })
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", n)
	rep, err := d.Restore()
	require.NoError(t, err)
	return d, rep
}

// releasedOnFile opens a store on path as restartOnFile does, gives one
// address to a pod and takes it back: it cools.
func releasedOnFile(t *testing.T, path string, clk *clocktest.Clock, n int) Allocation {
	t.Helper()
	d, _ := restartOnFile(t, path, clk, n, false)
	a, err := d.Assign(key("old"), meta("old"))
	require.NoError(t, err)
	_, err = d.Release(key("old"))
	require.NoError(t, err)
	return a
}

// unassignedTime is ip's UnassignedTime as /v1/enis shows it.
func unassignedTime(t *testing.T, d *DataStore, ip netip.Addr) time.Time {
	t.Helper()
	for _, e := range d.ENIInfos().ENIs {
		for _, c := range e.AvailableIPv4Cidrs {
			if ai, ok := c.IPAddresses[ip.String()]; ok {
				return ai.UnassignedTime
			}
		}
	}
	t.Fatalf("%s not in /v1/enis", ip)
	return time.Time{}
}

// The address released just before a restart is still cooling after it,
// with its release time, and goes to no pod before its cooldown ends.
func TestCoolingSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	clk := clocktest.New()
	a := releasedOnFile(t, path, clk, 2)
	releasedAt := clk.Now()
	clk.Advance(13 * time.Millisecond)
	// SIGKILL: no Close, the files are what the release left.
	d2, rep := restartOnFile(t, path, clk, 2, false)
	assert.Zero(t, rep.Restored)
	assert.Equal(t, 1, rep.Cooling, "one cooling address restored")

	s := d2.Stats()
	assert.Equal(t, 1, s.CooldownIPs)
	assert.Equal(t, 1, s.AssignableIPs())
	assert.Equal(t, releasedAt.UnixNano(), unassignedTime(t, d2, a.IP).UnixNano(), "release time kept")
	assert.Equal(t, releasedAt.Add(30*time.Second).UnixNano(), d2.NextCooldownEnd().UnixNano())

	b, err := d2.Assign(key("new1"), meta("new1"))
	require.NoError(t, err)
	assert.NotEqual(t, a.IP, b.IP, "the other address first")
	_, err = d2.Assign(key("new2"), meta("new2"))
	require.ErrorIs(t, err, ErrNoAvailableIP, "the released address still rests")

	clk.Advance(30 * time.Second)
	c, err := d2.Assign(key("new2"), meta("new2"))
	require.NoError(t, err)
	assert.Equal(t, a.IP, c.IP, "free once the cooldown, counted from the release, is over")
}

// Wall time is what crosses a restart: an address released at T rests
// until min(T+cooldown, now+cooldown).
func TestCoolingRestoreClampsToWallClock(t *testing.T) {
	tests := []struct {
		name string
		// step moves the wall clock between the release and the restart.
		step time.Duration
		// rests is how long the address still rests after the restart (0:
		// free at once).
		rests time.Duration
	}{
		{"restart at once", 0, 30 * time.Second},
		{"restart 10 s later", 10 * time.Second, 20 * time.Second},
		{"restart after the cooldown", 31 * time.Second, 0},
		{"clock stepped back an hour: one full cooldown, not an hour", -time.Hour, 30 * time.Second},
		{"clock stepped back 5 s: still a full cooldown from now", -5 * time.Second, 30 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ipam.json")
			clk := clocktest.New()
			a := releasedOnFile(t, path, clk, 1)
			clk.Set(clk.Now().Add(tc.step))
			d2, _ := restartOnFile(t, path, clk, 1, false)
			if tc.rests == 0 {
				assert.Zero(t, d2.Stats().CooldownIPs)
				_, err := d2.Assign(key("new"), meta("new"))
				require.NoError(t, err)
				return
			}
			assert.Equal(t, 1, d2.Stats().CooldownIPs)
			assert.Equal(t, clk.Now().Add(tc.rests).UnixNano(), d2.NextCooldownEnd().UnixNano())
			clk.Advance(tc.rests - time.Millisecond)
			_, err := d2.Assign(key("new"), meta("new"))
			require.ErrorIs(t, err, ErrNoAvailableIP, "still resting")
			clk.Advance(2 * time.Millisecond)
			b, err := d2.Assign(key("new"), meta("new"))
			require.NoError(t, err)
			assert.Equal(t, a.IP, b.IP)
		})
	}
}

// With VerifyNewAddresses an address that joins at start is pending; a
// restored cooldown resumes once it is verified, counted from the release.
func TestCoolingRestoredUnderVerification(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	clk := clocktest.New()
	a := releasedOnFile(t, path, clk, 1)
	clk.Advance(5 * time.Second)
	d2, _ := restartOnFile(t, path, clk, 1, true)
	assert.Equal(t, 1, d2.Stats().PendingIPs)
	assert.Equal(t, 1, d2.Verify(d2.PendingAddresses()))
	s := d2.Stats()
	assert.Equal(t, 0, s.PendingIPs)
	assert.Equal(t, 1, s.CooldownIPs, "verified, it rests for what remains of its cooldown")
	clk.Advance(25*time.Second + time.Millisecond)
	b, err := d2.Assign(key("new"), meta("new"))
	require.NoError(t, err)
	assert.Equal(t, a.IP, b.IP)
}

// A release whose address is assigned again before the restart is not
// cooling after it; nor is an address that rested without a cooldown.
func TestCoolingRestoreSkipsAssignedAndRested(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	clk := clocktest.New()
	d1, _ := restartOnFile(t, path, clk, 2, false)
	a, err := d1.Assign(key("a"), meta("a"))
	require.NoError(t, err)
	b, err := d1.Assign(key("b"), meta("b"))
	require.NoError(t, err)
	_, err = d1.Release(key("a"))
	require.NoError(t, err)
	_, err = d1.ReleaseRestedIfUnchanged(key("b"), b.AssignedAt)
	require.NoError(t, err)
	clk.Advance(31 * time.Second)
	a2, err := d1.Assign(key("a2"), meta("a2"))
	require.NoError(t, err)
	require.Contains(t, []netip.Addr{a.IP, b.IP}, a2.IP)

	d2, rep := restartOnFile(t, path, clk, 2, false)
	assert.Equal(t, 1, rep.Restored)
	s := d2.Stats()
	assert.Equal(t, 0, s.CooldownIPs)
	assert.Equal(t, 1, s.AssignedIPs)
}

// The cooling addresses live beside the checkpoint, never in it: ipam.json
// stays the document upstream writes, and a sidecar that does not parse
// costs the cooldowns, never the start.
func TestCoolingSidecarKeepsCheckpointUpstreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	clk := clocktest.New()
	d1, _ := restartOnFile(t, path, clk, 2, false)
	_, err := d1.Assign(key("gone"), meta("gone"))
	require.NoError(t, err)
	kept, err := d1.Assign(key("kept"), meta("kept"))
	require.NoError(t, err)
	_, err = d1.Release(key("gone"))
	require.NoError(t, err)

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc, err := upstreamStrictDecode(raw)
	require.NoError(t, err, "upstream's reader accepts the checkpoint:\n%s", raw)
	require.Len(t, doc.Allocations, 1)
	assert.Equal(t, kept.IP.String(), doc.Allocations[0].IPv4)
	_, err = os.Stat(path + CoolingSuffix)
	require.NoError(t, err, "the sidecar is written with the release")

	require.NoError(t, os.WriteFile(path+CoolingSuffix, []byte("{not json"), 0o644))
	d2, rep := restartOnFile(t, path, clk, 2, false)
	assert.Equal(t, 1, rep.Restored)
	assert.Zero(t, rep.Cooling)
	assert.Zero(t, d2.Stats().CooldownIPs)
}

// In IPv6 mode a released address is reused before any unused one: after
// a restart the restored cooldown keeps it back, and the next pods get
// unused addresses until it has rested.
func TestCoolingSurvivesRestartIPv6(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	clk := clocktest.New()
	open := func() *DataStore {
		cp, err := NewFileCheckpointer(path)
		require.NoError(t, err)
		return newV6Store(t, Config{Now: clk.Now, Cooldown: 30 * time.Second, Checkpointer: cp})
	}
	d1 := open()
	pods := assignN(t, d1, "p", 2)
	_, err := d1.Release(pods[0].Key)
	require.NoError(t, err)
	clk.Advance(time.Second)

	d2 := open()
	rep, err := d2.Restore()
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Restored)
	assert.Equal(t, 1, rep.Cooling)
	assert.Equal(t, 1, d2.Stats().CooldownIPs)
	b, err := d2.Assign(key("new"), meta("new"))
	require.NoError(t, err)
	assert.NotEqual(t, pods[0].IP, b.IP, "still resting")
	assert.NotEqual(t, pods[1].IP, b.IP)
	clk.Advance(30 * time.Second)
	c, err := d2.Assign(key("next"), meta("next"))
	require.NoError(t, err)
	assert.Equal(t, pods[0].IP, c.IP, "rested, it is reused first")
}

// A sidecar that cannot be written fails the release like a checkpoint
// that cannot be: the address goes back to its pod, and ipam.json still
// names it.
func TestCoolingSidecarWriteFailureFailsTheRelease(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ipam.json")
	// A non-empty directory where the sidecar goes: no rename replaces it.
	require.NoError(t, os.MkdirAll(filepath.Join(path+CoolingSuffix, "x"), 0o755))
	clk := clocktest.New()
	d, _ := restartOnFile(t, path, clk, 1, false)
	a, err := d.Assign(key("p"), meta("p"))
	require.NoError(t, err)
	_, err = d.Release(key("p"))
	require.Error(t, err)
	got, ok := d.Find(key("p"))
	require.True(t, ok, "the release is undone")
	assert.Equal(t, a.IP, got.IP)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc, err := upstreamStrictDecode(raw)
	require.NoError(t, err)
	require.Len(t, doc.Allocations, 1, "the checkpoint still holds the allocation")
}

// A cooling address the ENIs read at start leave out keeps its cooldown:
// when it joins a moment later it rests for what remains of it, and the
// sidecar keeps it meanwhile (another restart keeps it too).
func TestCoolingOfAnAddressTheStartLeftOutSurvives(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	clk := clocktest.New()
	d1, _ := restartOnFile(t, path, clk, 1, false)
	a, err := d1.Assign(key("old"), meta("old"))
	require.NoError(t, err)
	_, err = d1.Release(key("old"))
	require.NoError(t, err)
	require.NoError(t, d1.Close())

	leftOut := func() *DataStore {
		clk.Advance(time.Second)
		cp, err := NewFileCheckpointer(path)
		require.NoError(t, err)
		d := New(Config{Now: clk.Now, Cooldown: 30 * time.Second, Checkpointer: cp})
		t.Cleanup(func() { _ = d.Close() })
		require.NoError(t, d.AddENI(ENIInfo{ID: "eni-a", Primary: true})) // the answer left the address out
		_, err = d.Restore()
		require.NoError(t, err)
		return d
	}
	d2 := leftOut()
	// Another pod's release rewrites the sidecar.
	require.NoError(t, d2.AddENI(ENIInfo{ID: "eni-b", DeviceNumber: 1, RouteTableID: 2}))
	require.NoError(t, d2.AddCIDR("eni-b", pfx("10.0.5.1/32")))
	_, err = d2.Assign(key("other"), meta("other"))
	require.NoError(t, err)
	_, err = d2.Release(key("other"))
	require.NoError(t, err)
	require.NoError(t, d2.Close())

	d3 := leftOut()
	clk.Advance(time.Second)
	require.NoError(t, d3.AddCIDR("eni-a", netip.PrefixFrom(a.IP, 32)))
	assert.Equal(t, 1, d3.Stats().CooldownIPs)
	_, err = d3.Assign(key("new"), meta("new"))
	require.ErrorIs(t, err, ErrNoAvailableIP, "%s was released 3 s ago; the cooldown is 30 s", a.IP)
	clk.Advance(28 * time.Second)
	got, err := d3.Assign(key("new"), meta("new"))
	require.NoError(t, err, "rested")
	assert.Equal(t, a.IP, got.IP)
}

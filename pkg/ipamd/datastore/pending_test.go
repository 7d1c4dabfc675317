package datastore

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/require"
)

func newVerifyingStore(t *testing.T, prefixes bool) *DataStore {
	t.Helper()
	d := New(Config{PrefixDelegation: prefixes, VerifyNewAddresses: true, Now: clocktest.New().Now})
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestPendingAddressesAreNeverAssigned(t *testing.T) {
	d := newVerifyingStore(t, false)
	addSecondaryENI(t, d, "eni-1", 0, "10.0.0.10", 3)

	_, err := d.Assign(key("a"), meta("a"))
	require.ErrorIs(t, err, ErrNoAvailableIP, "a pending address must not be handed out")
	s := d.Stats()
	require.Equal(t, 3, s.TotalIPs)
	require.Equal(t, 3, s.PendingIPs)
	require.Equal(t, 3, s.AvailableIPs(), "pending addresses count as available, like cooling ones")
	inPool, free := d.Holds(netip.MustParseAddr("10.0.0.10"))
	require.True(t, inPool)
	require.False(t, free)

	ps := d.PendingAddresses()
	require.Len(t, ps, 3)
	require.Equal(t, 1, d.Verify(ps[:1]))
	a, err := d.Assign(key("a"), meta("a"))
	require.NoError(t, err)
	require.Equal(t, ps[0].IP, a.IP, "only the verified address may be assigned")
	_, err = d.Assign(key("b"), meta("b"))
	require.ErrorIs(t, err, ErrNoAvailableIP)
	require.Equal(t, 2, d.Stats().PendingIPs)
}

func TestPendingAddressIsAdoptedNotHandedOut(t *testing.T) {
	d := newVerifyingStore(t, false)
	addSecondaryENI(t, d, "eni-1", 0, "10.0.0.10", 2)
	ip := netip.MustParseAddr("10.0.0.11")

	a, err := d.Adopt(ip, key("live"), meta("live"))
	require.NoError(t, err)
	require.Equal(t, ip, a.IP)
	s := d.Stats()
	require.Equal(t, 1, s.PendingIPs)
	require.Equal(t, 1, s.AssignedIPs)
	got, ok := d.Find(key("live"))
	require.True(t, ok)
	require.Equal(t, ip, got.IP)
	require.Equal(t, 1, d.Verify(d.PendingAddresses()))
	b, err := d.Assign(key("new"), meta("new"))
	require.NoError(t, err)
	require.NotEqual(t, ip, b.IP)
}

func TestVerifyIgnoresAStaleListing(t *testing.T) {
	d := newVerifyingStore(t, false)
	addSecondaryENI(t, d, "eni-1", 0, "10.0.0.10", 1)
	old := d.PendingAddresses()
	p := netip.MustParsePrefix("10.0.0.10/32")
	_, err := d.RemoveCIDR("eni-1", p, true)
	require.NoError(t, err)
	require.NoError(t, d.AddCIDR("eni-1", p))
	require.Equal(t, 0, d.Verify(old), "a listing from before the address left and joined again must not verify it")
	require.Equal(t, 1, d.Stats().PendingIPs)
}

func TestPendingPrefixIsNotFreeAndCountsReturn(t *testing.T) {
	d := newVerifyingStore(t, true)
	addPrefixENI(t, d, "eni-1", 0, "10.0.16.0", 2)
	s := d.Stats()
	require.Equal(t, 32, s.PendingIPs)
	require.Equal(t, 0, s.FreePrefixes, "a prefix with pending addresses is not free to release")
	require.Empty(t, d.FreeCIDRs(true, 10))

	require.Equal(t, 32, d.Verify(d.PendingAddresses()))
	s = d.Stats()
	require.Equal(t, 0, s.PendingIPs)
	require.Equal(t, 2, s.FreePrefixes)
	require.Len(t, d.FreeCIDRs(true, 10), 2)
}

func TestForcedRemovalOfPendingCIDRKeepsCounters(t *testing.T) {
	d := newVerifyingStore(t, true)
	addPrefixENI(t, d, "eni-1", 0, "10.0.16.0", 1)
	_, err := d.RemoveCIDR("eni-1", netip.MustParsePrefix("10.0.16.0/28"), true)
	require.NoError(t, err)
	s := d.Stats()
	require.Zero(t, s.TotalIPs)
	require.Zero(t, s.PendingIPs)
	require.Zero(t, s.TotalPrefixes)
	require.Zero(t, s.FreePrefixes)
}

func TestRestoreAssignsPendingAddresses(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d := New(Config{VerifyNewAddresses: true, Checkpointer: cp})
	addSecondaryENI(t, d, "eni-1", 0, "10.0.0.10", 2)
	_, err := d.Adopt(netip.MustParseAddr("10.0.0.10"), key("a"), meta("a"))
	require.NoError(t, err)
	require.NoError(t, d.Close())

	d2 := New(Config{VerifyNewAddresses: true, Checkpointer: cp})
	defer d2.Close()
	addSecondaryENI(t, d2, "eni-1", 0, "10.0.0.10", 2)
	rep, err := d2.Restore()
	require.NoError(t, err)
	require.Equal(t, 1, rep.Restored)
	s := d2.Stats()
	require.Equal(t, 1, s.AssignedIPs)
	require.Equal(t, 1, s.PendingIPs, "the address the checkpoint does not hold still awaits verification")
}

func TestTurningVerificationOffFreesPending(t *testing.T) {
	d := newVerifyingStore(t, false)
	addSecondaryENI(t, d, "eni-1", 0, "10.0.0.10", 2)
	d.SetVerifyNewAddresses(false)
	require.Zero(t, d.Stats().PendingIPs)
	require.NoError(t, d.AddCIDR("eni-1", netip.MustParsePrefix("10.0.0.20/32")))
	require.Zero(t, d.Stats().PendingIPs)
	_, err := d.Assign(key("a"), meta("a"))
	require.NoError(t, err)
}

func TestReleaseRestedIfUnchangedSkipsCooldown(t *testing.T) {
	clk := clocktest.New()
	d := New(Config{Cooldown: DefaultCooldown, Now: clk.Now})
	defer d.Close()
	addSecondaryENI(t, d, "eni-1", 0, "10.0.0.10", 1)
	a, err := d.Assign(key("dead"), meta("dead"))
	require.NoError(t, err)
	_, err = d.ReleaseRestedIfUnchanged(key("dead"), a.AssignedAt.Add(1))
	require.ErrorIs(t, err, ErrAllocationChanged)
	_, err = d.ReleaseRestedIfUnchanged(key("dead"), a.AssignedAt)
	require.NoError(t, err)
	b, err := d.Assign(key("new"), meta("new"))
	require.NoError(t, err, "a reclaimed leak is reusable at once")
	require.Equal(t, a.IP, b.IP)
}

// TestUndoneAdoptionOfAPendingAddressKeepsItPending: a pending address
// whose adoption could not be written is pending again, in the same
// pending period: never handed out, and the earlier listing verifies it.
func TestUndoneAdoptionOfAPendingAddressKeepsItPending(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d := New(Config{VerifyNewAddresses: true, Checkpointer: cp})
	t.Cleanup(func() { _ = d.Close() })
	addSecondaryENI(t, d, "eni-1", 0, "10.0.0.10", 1)
	listed := d.PendingAddresses()
	require.Len(t, listed, 1)

	cp.SetFail(errors.New("disk full"))
	_, err := d.Adopt(listed[0].IP, key("live"), meta("live"))
	require.ErrorContains(t, err, "disk full")
	cp.SetFail(nil)
	_, held := d.Find(key("live"))
	require.False(t, held, "the adoption is undone")
	require.Equal(t, listed, d.PendingAddresses(), "pending again, in the same period")
	s := d.Stats()
	require.Equal(t, 1, s.PendingIPs)
	require.Zero(t, s.AssignedIPs)
	_, err = d.Assign(key("new"), meta("new"))
	require.ErrorIs(t, err, ErrNoAvailableIP, "the address is not free: it was never verified")

	require.Equal(t, 1, d.Verify(listed))
	a, err := d.Assign(key("new"), meta("new"))
	require.NoError(t, err)
	require.Equal(t, listed[0].IP, a.IP)
}

package datastore

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAssignAndRelease(t *testing.T) {
	clk := clocktest.New()
	d := New(Config{Cooldown: 30 * time.Second, Now: clk.Now})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)

	a1, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	a2, err := d.Assign(key("c2"), meta("p2"))
	require.NoError(t, err)
	assert.NotEqual(t, a1.IP, a2.IP)
	assert.Equal(t, "eni-a", a1.ENIID)
	assert.Equal(t, 254, a1.RouteTableID)
	assert.Equal(t, clk.Now(), a1.AssignedAt, "assignment time is recorded")

	_, err = d.Assign(key("c3"), meta("p3"))
	require.ErrorIs(t, err, ErrNoAvailableIP)
	assert.Equal(t, "AssignPodIPAddress: no available IP/Prefix addresses", err.Error())

	rel, err := d.Release(key("c1"))
	require.NoError(t, err)
	assert.Equal(t, a1.IP, rel.IP)
	assert.Equal(t, meta("p1"), rel.Metadata)
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 2, AssignedIPs: 1, CooldownIPs: 1}, d.Stats())
	_, ok := d.Find(key("c1"))
	assert.False(t, ok)
}

func TestCooldown(t *testing.T) {
	tests := []struct {
		name     string
		cooldown time.Duration
		advance  time.Duration
		wantOK   bool
	}{
		{"within cooldown", 30 * time.Second, 10 * time.Second, false},
		{"exactly at cooldown end", 30 * time.Second, 30 * time.Second, false},
		{"after cooldown", 30 * time.Second, 31 * time.Second, true},
		{"no cooldown", 0, 0, true},
		{"short configured cooldown", time.Second, 2 * time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New()
			d := New(Config{Cooldown: tc.cooldown, Now: clk.Now})
			addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 1)
			a, err := d.Assign(key("old"), meta("old"))
			require.NoError(t, err)
			_, err = d.Release(key("old"))
			require.NoError(t, err)
			releasedAt := clk.Now()
			clk.Advance(tc.advance)
			b, err := d.Assign(key("new"), meta("new"))
			if !tc.wantOK {
				require.ErrorIs(t, err, ErrNoAvailableIP, "a cooling address must not be reused")
				assert.Equal(t, 1, d.Stats().CooldownIPs)
				assert.Equal(t, releasedAt.Add(tc.cooldown), d.NextCooldownEnd(), "when it is free again")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, a.IP, b.IP)
			assert.Equal(t, 0, d.Stats().CooldownIPs)
			assert.True(t, d.NextCooldownEnd().IsZero(), "nothing cooling")
		})
	}
}

func TestCooldownPrefersRestedAddresses(t *testing.T) {
	clk := clocktest.New()
	d := New(Config{Cooldown: 30 * time.Second, Now: clk.Now})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 3)
	a, _ := d.Assign(key("c1"), meta("p1"))
	_, err := d.Release(key("c1"))
	require.NoError(t, err)
	seen := map[netip.Addr]bool{}
	for i := range 2 {
		b, err := d.Assign(key(fmt.Sprint("n", i)), meta("n"))
		require.NoError(t, err)
		assert.NotEqual(t, a.IP, b.IP, "the just-released address is cooling")
		seen[b.IP] = true
	}
	assert.Len(t, seen, 2)
}

func TestAssignIsIdempotent(t *testing.T) {
	d := New(Config{})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 3)
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	b, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.Equal(t, 1, d.Stats().AssignedIPs)
}

func TestKeyCollisions(t *testing.T) {
	d := New(Config{})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 4)
	keys := []IPAMKey{
		{NetworkName: "aws-cni", ContainerID: "c1", IfName: "eth0"},
		{NetworkName: "aws-cni", ContainerID: "c1", IfName: "eth1"},
		{NetworkName: "other", ContainerID: "c1", IfName: "eth0"},
		{NetworkName: "aws-cni", ContainerID: "c2", IfName: "eth0"},
	}
	ips := map[netip.Addr]IPAMKey{}
	for _, k := range keys {
		a, err := d.Assign(k, meta("p"))
		require.NoError(t, err)
		_, dup := ips[a.IP]
		require.False(t, dup, "keys that differ in any field get different addresses")
		ips[a.IP] = k
	}
	_, err := d.Release(keys[1])
	require.NoError(t, err)
	for _, k := range []IPAMKey{keys[0], keys[2], keys[3]} {
		_, ok := d.Find(k)
		assert.True(t, ok, "release of one key leaves the others")
	}
}

func TestReleaseUnknownKey(t *testing.T) {
	d := New(Config{})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	before := d.Stats()

	_, err = d.Release(key("nope"))
	require.ErrorIs(t, err, ErrUnknownPod)
	assert.Contains(t, err.Error(), "datastore: unknown pod", "the CNI plugin matches this text")
	assert.True(t, IsUnknownPod(err))
	assert.Equal(t, before, d.Stats())
	got, ok := d.Find(key("c1"))
	require.True(t, ok)
	assert.Equal(t, a.IP, got.IP)

	// A repeated DEL of a released key is unknown too, and harmless.
	_, err = d.Release(key("c1"))
	require.NoError(t, err)
	_, err = d.Release(key("c1"))
	require.ErrorIs(t, err, ErrUnknownPod)
}

func TestReleaseFindsMigratedKey(t *testing.T) {
	cp := &MemoryCheckpointer{}
	require.NoError(t, cp.Write([]CheckpointEntry{{
		Key: IPAMKey{NetworkName: "_migrated-from-cri", ContainerID: "c1", IfName: "unknown"},
		IP:  netip.MustParseAddr("10.0.0.10"), AssignedAt: time.Unix(1, 0),
	}}))
	d := New(Config{Checkpointer: cp})
	defer d.Close()
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 1)
	rep, err := d.Restore()
	require.NoError(t, err)
	require.Equal(t, 1, rep.Restored)
	rel, err := d.Release(key("c1"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.10", rel.IP.String())
}

func TestPrefixModeAccounting(t *testing.T) {
	clk := clocktest.New()
	d := New(Config{PrefixDelegation: true, Cooldown: 30 * time.Second, Now: clk.Now})
	addPrefixENI(t, d, "eni-a", 0, "10.0.1.0", 2)
	// A secondary IP left over from secondary-IP mode is not used in PD mode.
	require.NoError(t, d.AddCIDR("eni-a", pfx("10.0.9.9/32")))

	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 32, TotalPrefixes: 2, FreePrefixes: 2}, d.Stats())

	var first netip.Prefix
	for i := range 16 {
		a, err := d.Assign(key(fmt.Sprint("c", i)), meta(podName(i)))
		require.NoError(t, err)
		require.True(t, a.IsPrefix)
		if i == 0 {
			first = a.CIDR
		}
		assert.Equal(t, first, a.CIDR, "allocations pack into one prefix before opening another")
	}
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 32, AssignedIPs: 16, TotalPrefixes: 2, FreePrefixes: 1}, d.Stats())

	a, err := d.Assign(key("c16"), meta("p16"))
	require.NoError(t, err)
	assert.NotEqual(t, first, a.CIDR)
	assert.Equal(t, 0, d.Stats().FreePrefixes)

	// A prefix whose only address is cooling is not free.
	_, err = d.Release(key("c16"))
	require.NoError(t, err)
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 32, AssignedIPs: 16, CooldownIPs: 1, TotalPrefixes: 2, FreePrefixes: 0}, d.Stats())
	clk.Advance(31 * time.Second)
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 32, AssignedIPs: 16, TotalPrefixes: 2, FreePrefixes: 1}, d.Stats())
}

func TestSecondaryModeIgnoresPrefixes(t *testing.T) {
	d := New(Config{})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 1)
	require.NoError(t, d.AddCIDR("eni-a", pfx("10.0.1.0/28")))
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 1, TotalPrefixes: 1, FreePrefixes: 1}, d.Stats())
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	assert.False(t, a.IsPrefix)
	_, err = d.Assign(key("c2"), meta("p2"))
	require.ErrorIs(t, err, ErrNoAvailableIP)
}

func TestAddCIDRErrors(t *testing.T) {
	d := New(Config{})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 1)
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-b", DeviceNumber: 1}))
	tests := []struct {
		name string
		eni  string
		cidr string
		want error
	}{
		{"duplicate /32", "eni-a", "10.0.0.10/32", ErrIPAlreadyInStore},
		{"same /32 on another ENI", "eni-b", "10.0.0.10/32", ErrIPAlreadyInStore},
		{"prefix overlapping a /32", "eni-b", "10.0.0.0/28", ErrIPAlreadyInStore},
		{"unsupported size", "eni-a", "10.0.5.0/24", ErrUnsupportedCIDR},
		{"ipv6", "eni-a", "2001:db8::1/128", ErrUnsupportedCIDR},
		{"unknown ENI", "eni-x", "10.0.7.1/32", ErrUnknownENI},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := d.Stats()
			require.ErrorIs(t, d.AddCIDR(tc.eni, pfx(tc.cidr)), tc.want)
			assert.Equal(t, before, d.Stats(), "a failed add changes nothing")
		})
	}
	require.ErrorIs(t, d.AddENI(ENIInfo{ID: "eni-a"}), ErrDuplicateENI)
}

func TestRemoveCIDR(t *testing.T) {
	clk := clocktest.New()
	d := New(Config{Cooldown: 30 * time.Second, Now: clk.Now})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 3)
	a, _ := d.Assign(key("c1"), meta("p1"))
	b, _ := d.Assign(key("c2"), meta("p2"))
	_, err := d.Release(key("c2"))
	require.NoError(t, err)

	_, err = d.RemoveCIDR("eni-a", netip.PrefixFrom(a.IP, 32), false)
	require.ErrorIs(t, err, ErrIPInUse)
	_, err = d.RemoveCIDR("eni-a", netip.PrefixFrom(b.IP, 32), false)
	require.ErrorIs(t, err, ErrIPInCooldown)
	_, err = d.RemoveCIDR("eni-a", pfx("10.9.9.9/32"), false)
	require.ErrorIs(t, err, ErrUnknownCIDR)

	free := netip.MustParseAddr("10.0.0.10")
	for _, ip := range []netip.Addr{free, free.Next(), free.Next().Next()} {
		if ip != a.IP && ip != b.IP {
			rel, err := d.RemoveCIDR("eni-a", netip.PrefixFrom(ip, 32), false)
			require.NoError(t, err)
			assert.Empty(t, rel)
		}
	}
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 2, AssignedIPs: 1, CooldownIPs: 1}, d.Stats())

	rel, err := d.RemoveCIDR("eni-a", netip.PrefixFrom(a.IP, 32), true)
	require.NoError(t, err)
	require.Len(t, rel, 1)
	assert.Equal(t, key("c1"), rel[0].Key)
	_, err = d.RemoveCIDR("eni-a", netip.PrefixFrom(b.IP, 32), true)
	require.NoError(t, err)
	assert.Equal(t, Stats{ENIs: 1}, d.Stats())
	_, ok := d.Find(key("c1"))
	assert.False(t, ok)
}

func TestRemoveENI(t *testing.T) {
	d := New(Config{PrefixDelegation: true})
	addPrefixENI(t, d, "eni-a", 0, "10.0.1.0", 1)
	addPrefixENI(t, d, "eni-b", 1, "10.0.2.0", 2)
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	// Pack into eni-a's prefix first? Either way find which ENI holds it.
	holder, other := a.ENIID, "eni-a"
	if holder == "eni-a" {
		other = "eni-b"
	}
	_, err = d.RemoveENI(holder, false)
	require.ErrorIs(t, err, ErrENIInUse)
	_, err = d.RemoveENI(other, false)
	require.NoError(t, err)
	_, err = d.RemoveENI(other, false)
	require.ErrorIs(t, err, ErrUnknownENI)

	rel, err := d.RemoveENI(holder, true)
	require.NoError(t, err)
	require.Len(t, rel, 1)
	assert.Equal(t, a.IP, rel[0].IP)
	assert.Equal(t, Stats{}, d.Stats())
}

func TestAllocationsAndUsage(t *testing.T) {
	d := New(Config{})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	addSecondaryENI(t, d, "eni-b", 1, "10.0.0.20", 2)
	for i := range 3 {
		_, err := d.Assign(key(fmt.Sprint("c", i)), meta(podName(i)))
		require.NoError(t, err)
	}
	allocs := d.Allocations()
	require.Len(t, allocs, 3)
	total := 0
	for _, u := range d.Usage() {
		total += u.Assigned
		sum := 0
		for _, c := range u.CIDRs {
			sum += c.Assigned
		}
		assert.Equal(t, u.Assigned, sum)
	}
	assert.Equal(t, 3, total)
}

func TestCheckpointFailureUndoesAssign(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d := New(Config{Checkpointer: cp})
	defer d.Close()
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	cp.SetFail(errors.New("disk full"))
	_, err := d.Assign(key("c1"), meta("p1"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk full")
	assert.Equal(t, 0, d.Stats().AssignedIPs, "an assignment that is not durable is undone")
	_, ok := d.Find(key("c1"))
	assert.False(t, ok)

	cp.SetFail(nil)
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)

	cp.SetFail(errors.New("disk full"))
	_, err = d.Release(key("c1"))
	require.Error(t, err)
	got, ok := d.Find(key("c1"))
	require.True(t, ok, "a release that is not durable is undone")
	assert.Equal(t, a.IP, got.IP)
	assert.Equal(t, a.AssignedAt, got.AssignedAt)

	cp.SetFail(nil)
	_, err = d.Release(key("c1"))
	require.NoError(t, err)
}

func TestAcknowledgedMeansDurable(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d := New(Config{Checkpointer: cp})
	defer d.Close()
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 20)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := d.Assign(key(fmt.Sprint("c", i)), meta(podName(i)))
			if !assert.NoError(t, err) {
				return
			}
			entries, err := cp.Read()
			require.NoError(t, err)
			found := false
			for _, e := range entries {
				if e.Key == a.Key && e.IP == a.IP {
					found = true
				}
			}
			assert.True(t, found, "an acknowledged assignment is already in the checkpoint")
		}()
	}
	wg.Wait()
}

// slowCheckpointer models a disk where each write takes a while.
type slowCheckpointer struct {
	MemoryCheckpointer
	delay time.Duration
}

func (s *slowCheckpointer) Write(e []CheckpointEntry) error {
	time.Sleep(s.delay)
	return s.MemoryCheckpointer.Write(e)
}

func TestGroupCommitSharesWrites(t *testing.T) {
	cp := &slowCheckpointer{delay: 20 * time.Millisecond}
	d := New(Config{Checkpointer: cp})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 32)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := d.Assign(key(fmt.Sprint("c", i)), meta(podName(i)))
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	require.NoError(t, d.Close())
	assert.Equal(t, 32, d.Stats().AssignedIPs)
	assert.LessOrEqual(t, cp.Writes(), 8, "32 concurrent ADDs must share writes")
	entries, err := cp.Read()
	require.NoError(t, err)
	assert.Len(t, entries, 32)
}

func TestClosedStoreRefusesMutations(t *testing.T) {
	d := New(Config{Checkpointer: &MemoryCheckpointer{}})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 1)
	require.NoError(t, d.Close())
	_, err := d.Assign(key("c1"), meta("p1"))
	require.ErrorIs(t, err, ErrClosed)
	_, err = d.Release(key("c1"))
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, d.Close(), "Close is idempotent")
}

// TestClosedStoreRefusesAdoptAndTransfer: like Assign and Release, the
// other mutations that wait for a write refuse a closed store.
func TestClosedStoreRefusesAdoptAndTransfer(t *testing.T) {
	d := New(Config{Checkpointer: &MemoryCheckpointer{}})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	require.NoError(t, d.Close())
	_, err = d.Adopt(netip.MustParseAddr("10.0.0.11"), key("c2"), meta("p2"))
	require.ErrorIs(t, err, ErrClosed)
	_, err = d.Transfer(key("c1"), a.AssignedAt, key("c2"), meta("p2"))
	require.ErrorIs(t, err, ErrClosed)
	got, ok := d.Find(key("c1"))
	require.True(t, ok, "nothing changed")
	assert.Equal(t, a, got)
}

// TestRepeatedAdoptRacingRelease: an Adopt of an address its key already
// holds, racing the key's release, answers with the allocation as it was
// under the lock (run under -race; it was read after the unlock).
func TestRepeatedAdoptRacingRelease(t *testing.T) {
	d := New(Config{Checkpointer: &MemoryCheckpointer{}})
	t.Cleanup(func() { _ = d.Close() })
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 1)
	ip := netip.MustParseAddr("10.0.0.10")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range 5000 {
			if a, err := d.Adopt(ip, key("live"), meta("web")); err == nil {
				assert.Equal(t, key("live"), a.Key)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 5000 {
			_, _ = d.Release(key("live"))
		}
	}()
	wg.Wait()
}

// TestConcurrentChurn runs many ADD/DEL loops at once (run under -race) and
// checks the store's invariants throughout.
func TestConcurrentChurn(t *testing.T) {
	clk := clocktest.New()
	cp := &MemoryCheckpointer{}
	d := New(Config{PrefixDelegation: true, Cooldown: time.Second, Now: clk.Now, Checkpointer: cp})
	addPrefixENI(t, d, "eni-a", 0, "10.0.1.0", 4)
	addPrefixENI(t, d, "eni-b", 1, "10.0.2.0", 4)

	stop := make(chan struct{})
	var checker sync.WaitGroup
	checker.Add(1)
	go func() {
		defer checker.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			clk.Advance(100 * time.Millisecond)
			allocs := d.Allocations()
			seen := map[netip.Addr]IPAMKey{}
			for _, a := range allocs {
				if prev, dup := seen[a.IP]; dup {
					t.Errorf("%s held by %s and %s", a.IP, prev, a.Key)
				}
				seen[a.IP] = a.Key
			}
			s := d.Stats()
			if s.AssignedIPs != len(allocs) && s.AssignedIPs > s.TotalIPs {
				t.Errorf("bad stats %+v", s)
			}
		}
	}()

	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := key(fmt.Sprintf("w%d-%d", w, i))
				a, err := d.Assign(k, meta("p"))
				if errors.Is(err, ErrNoAvailableIP) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				again, err := d.Assign(k, meta("p"))
				assert.NoError(t, err)
				assert.Equal(t, a.IP, again.IP)
				_, err = d.Release(k)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	checker.Wait()
	require.NoError(t, d.Close())
	s := d.Stats()
	assert.Equal(t, 0, s.AssignedIPs)
	assert.Equal(t, 128, s.TotalIPs)
	entries, err := cp.Read()
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestReleaseIfUnchanged(t *testing.T) {
	clk := clocktest.New()
	d := New(Config{Now: clk.Now})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)

	_, err = d.ReleaseIfUnchanged(key("c1"), a.AssignedAt.Add(-time.Second))
	require.ErrorIs(t, err, ErrAllocationChanged, "an older observation cannot free a newer assignment")
	_, ok := d.Find(key("c1"))
	require.True(t, ok)

	_, err = d.ReleaseIfUnchanged(key("nope"), a.AssignedAt)
	require.ErrorIs(t, err, ErrUnknownPod)

	rel, err := d.ReleaseIfUnchanged(key("c1"), a.AssignedAt)
	require.NoError(t, err)
	assert.Equal(t, a.IP, rel.IP)
	_, err = d.Release(key("c1"))
	require.ErrorIs(t, err, ErrUnknownPod, "a late real DEL finds nothing")
}

func TestAdopt(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d, _ := newStoreOnClock(t, cp, 3)
	ip := netip.MustParseAddr("10.0.0.11")

	inPool, free := d.Holds(ip)
	assert.True(t, inPool)
	assert.True(t, free)

	a, err := d.Adopt(ip, key("live"), meta("web-0"))
	require.NoError(t, err)
	assert.Equal(t, ip, a.IP)
	again, err := d.Adopt(ip, key("live"), meta("web-0"))
	require.NoError(t, err, "idempotent")
	assert.Equal(t, a.AssignedAt, again.AssignedAt)
	entries, err := cp.Read()
	require.NoError(t, err)
	require.Len(t, entries, 1, "durable on return")

	_, err = d.Adopt(ip, key("other"), meta("x"))
	require.ErrorIs(t, err, ErrIPBusy)
	_, err = d.Adopt(netip.MustParseAddr("10.9.9.9"), key("x"), meta("x"))
	require.ErrorIs(t, err, ErrNotInPool)
	_, err = d.Adopt(netip.MustParseAddr("10.0.0.12"), key("live"), meta("x"))
	require.ErrorIs(t, err, ErrKeyExists)

	// A cooling address is not adopted; the adopted one is never handed out.
	_, err = d.Release(key("live"))
	require.NoError(t, err)
	_, err = d.Adopt(ip, key("late"), meta("x"))
	require.ErrorIs(t, err, ErrIPBusy)
	for i := range 2 {
		b, err := d.Assign(key(fmt.Sprint("n", i)), meta("n"))
		require.NoError(t, err)
		assert.NotEqual(t, ip, b.IP)
	}
}

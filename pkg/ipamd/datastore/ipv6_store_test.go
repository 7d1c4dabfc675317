package datastore

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The /80 the primary ENI of the IPv6 fixtures holds.
const v6Prefix = "2600:1f14:e2a:8d02:6b1a::/80"

func v6(suffix string) netip.Addr { return netip.MustParseAddr("2600:1f14:e2a:8d02:6b1a::" + suffix) }

// newV6Store returns an IPv6 datastore whose primary ENI holds v6Prefix.
func newV6Store(t testing.TB, cfg Config) *DataStore {
	t.Helper()
	cfg.IPv6 = true
	d := New(cfg)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-0", DeviceNumber: 0, Primary: true, RouteTableID: 254, SubnetID: "subnet-v6"}))
	require.NoError(t, d.AddCIDR("eni-0", pfx(v6Prefix)))
	return d
}

func assignN(t testing.TB, d *DataStore, prefix string, n int) []Allocation {
	t.Helper()
	out := make([]Allocation, n)
	for i := range out {
		a, err := d.Assign(key(fmt.Sprint(prefix, i)), meta(fmt.Sprint(prefix, i)))
		require.NoError(t, err)
		out[i] = a
	}
	return out
}

func TestIPv6AssignFromTheNetworkAddressUp(t *testing.T) {
	clk := clocktest.New()
	d := newV6Store(t, Config{Now: clk.Now})
	assert.True(t, d.IPv6())
	assert.True(t, d.PrefixDelegation(), "IPv6 implies prefix delegation")
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 1 << 48, TotalPrefixes: 1, FreePrefixes: 1}, d.Stats())

	as := assignN(t, d, "c", 3)
	for i, a := range as {
		assert.Equal(t, v6(fmt.Sprint(i)), a.IP, "as upstream, the lowest unused address, starting with the prefix's own")
		assert.Equal(t, pfx(v6Prefix), a.CIDR)
		assert.True(t, a.IsPrefix)
		assert.Equal(t, "eni-0", a.ENIID)
		assert.Equal(t, 254, a.RouteTableID)
		assert.Equal(t, clk.Now(), a.AssignedAt)
	}
	assert.Equal(t, v6(""), as[0].IP)
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 1 << 48, AssignedIPs: 3, TotalPrefixes: 1}, d.Stats())
	assert.Equal(t, 1<<48-3, d.Stats().AvailableIPs())
}

func TestIPv6AssignIsIdempotent(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d := newV6Store(t, Config{Checkpointer: cp})
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	writes := cp.Writes()
	again, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	assert.Equal(t, a, again)
	assert.Equal(t, writes, cp.Writes(), "a retried ADD writes nothing")
	b, err := d.Assign(key("c2"), meta("p2"))
	require.NoError(t, err)
	assert.Equal(t, a.IP.Next(), b.IP, "the retry used up no address")
	got, ok := d.Find(key("c1"))
	require.True(t, ok)
	assert.Equal(t, a.IP, got.IP)
}

// A released address rests for the cooldown; once rested it is reused
// before any unused one, the longest-rested first.
func TestIPv6CooldownAndReuseOrder(t *testing.T) {
	clk := clocktest.New()
	d := newV6Store(t, Config{Now: clk.Now, Cooldown: 30 * time.Second})
	assignN(t, d, "c", 3) // ::, ::1, ::2

	_, err := d.Release(key("c1")) // ::1 at t0
	require.NoError(t, err)
	clk.Advance(5 * time.Second)
	_, err = d.Release(key("c0")) // :: at t0+5s
	require.NoError(t, err)
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 1 << 48, AssignedIPs: 1, CooldownIPs: 2, TotalPrefixes: 1}, d.Stats())
	inPool, free := d.Holds(v6("1"))
	assert.True(t, inPool)
	assert.False(t, free, "cooling")

	clk.Advance(25 * time.Second) // t0+30s: ::1 exactly at the end, still resting
	a, err := d.Assign(key("n0"), meta("n0"))
	require.NoError(t, err)
	assert.Equal(t, v6("3"), a.IP, "cooling addresses are not reused")

	clk.Advance(1 * time.Second) // t0+31s: ::1 rested, :: not
	a, err = d.Assign(key("n1"), meta("n1"))
	require.NoError(t, err)
	assert.Equal(t, v6("1"), a.IP, "a rested address is reused before an unused one")
	a, err = d.Assign(key("n2"), meta("n2"))
	require.NoError(t, err)
	assert.Equal(t, v6("4"), a.IP)

	clk.Advance(10 * time.Second)
	a, err = d.Assign(key("n3"), meta("n3"))
	require.NoError(t, err)
	assert.Equal(t, v6(""), a.IP)
	a, err = d.Assign(key("n4"), meta("n4"))
	require.NoError(t, err)
	assert.Equal(t, v6("5"), a.IP)
	assert.Equal(t, 0, d.Stats().CooldownIPs)
}

// State grows with the addresses in use, not with the prefix nor with churn.
func TestIPv6StateStaysSmallUnderChurn(t *testing.T) {
	clk := clocktest.New()
	d := newV6Store(t, Config{Now: clk.Now, Cooldown: 30 * time.Second})
	for round := range 50 {
		assignN(t, d, fmt.Sprint("r", round, "-"), 20)
		for i := range 20 {
			_, err := d.Release(key(fmt.Sprint("r", round, "-", i)))
			require.NoError(t, err)
		}
		clk.Advance(31 * time.Second)
	}
	c := d.v6[0]
	assert.Equal(t, 20, len(c.v6.entries), "20 addresses were ever in use at once")
	assert.Equal(t, 20, len(d.byIP))
	assert.Equal(t, v6("14"), c.v6.cursor.next, "the cursor moved past 20 addresses only")
}

func TestIPv6AddCIDRRefusesOtherFamilies(t *testing.T) {
	d := newV6Store(t, Config{})
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-1", DeviceNumber: 1}))
	for _, tc := range []struct {
		name, eni, cidr string
		want            []error
	}{
		{"IPv4 /28", "eni-0", "10.0.0.16/28", []error{ErrUnsupportedIPv6CIDR, ErrWrongFamily}},
		{"IPv4 /32", "eni-0", "10.0.0.16/32", []error{ErrUnsupportedIPv6CIDR, ErrWrongFamily}},
		{"IPv6 /64", "eni-0", "2600:1f14:e2a:8d02::/64", []error{ErrUnsupportedIPv6CIDR}},
		{"same /80", "eni-0", v6Prefix, []error{ErrIPAlreadyInStore}},
		{"same /80 on another ENI", "eni-1", "2600:1f14:e2a:8d02:6b1a:0:1:0/80", []error{ErrIPAlreadyInStore}},
		{"unknown ENI", "eni-x", "2600:1f14:e2a:8d02:77c4::/80", []error{ErrUnknownENI}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := d.Stats()
			err := d.AddCIDR(tc.eni, pfx(tc.cidr))
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			assert.Equal(t, before, d.Stats(), "a failed add changes nothing")
		})
	}
	assert.Contains(t, errors.Unwrap(d.AddCIDR("eni-0", pfx("10.0.0.16/28"))).Error(), "IPv4 10.0.0.16/28 in an IPv6 datastore")

	v4 := New(Config{PrefixDelegation: true})
	require.NoError(t, v4.AddENI(ENIInfo{ID: "eni-0"}))
	err := v4.AddCIDR("eni-0", pfx(v6Prefix))
	require.ErrorIs(t, err, ErrWrongFamily)
	require.ErrorIs(t, err, ErrUnsupportedCIDR)
	assert.False(t, v4.IPv6())
}

func TestIPv6TwoPrefixes(t *testing.T) {
	d := newV6Store(t, Config{})
	require.NoError(t, d.AddENI(ENIInfo{ID: "eni-1", DeviceNumber: 1, RouteTableID: 2}))
	require.NoError(t, d.AddCIDR("eni-1", pfx("2600:1f14:e2a:8d02:1111::/80")))
	s := d.Stats()
	assert.Equal(t, 2<<48, s.TotalIPs)
	assert.Equal(t, 2, s.TotalPrefixes)
	a := assignN(t, d, "c", 2)
	assert.Equal(t, netip.MustParseAddr("2600:1f14:e2a:8d02:1111::"), a[0].IP, "the lower prefix first")
	assert.Equal(t, "eni-1", a[0].ENIID)
	assert.Equal(t, 1, d.Stats().FreePrefixes)

	// Excluding eni-1 moves assignments to eni-0 and takes it out of Stats.
	require.NoError(t, d.SetExcluded("eni-1", true))
	b, err := d.Assign(key("x"), meta("x"))
	require.NoError(t, err)
	assert.Equal(t, v6(""), b.IP)
	assert.Equal(t, Stats{ENIs: 2, TotalIPs: 1 << 48, AssignedIPs: 1, TotalPrefixes: 1}, d.Stats())
	assert.Empty(t, d.ExcludedFreeCIDRs(), "eni-1's prefix is in use")
	for i := range 2 {
		_, err := d.Release(key(fmt.Sprint("c", i)))
		require.NoError(t, err)
	}
	assert.Equal(t, []FreeCIDR{{ENIID: "eni-1", CIDR: pfx("2600:1f14:e2a:8d02:1111::/80")}}, d.ExcludedFreeCIDRs())
	assert.Empty(t, d.FreeCIDRs(true, 10), "IPv6 prefixes are never offered back")

	sums := d.ENISummaries()
	require.Len(t, sums, 2)
	assert.Equal(t, []netip.Prefix{pfx(v6Prefix)}, sums[0].IPv6Prefixes)
	assert.Equal(t, 0, sums[0].CIDRCount(), "the IPv4 limit is not touched")
	assert.Equal(t, 1, sums[0].Assigned)
}

func TestIPv6RemoveCIDRAndENI(t *testing.T) {
	clk := clocktest.New()
	d := newV6Store(t, Config{Now: clk.Now, Cooldown: 30 * time.Second})
	as := assignN(t, d, "c", 2)
	p := pfx(v6Prefix)

	_, err := d.RemoveCIDR("eni-0", p, false)
	require.ErrorIs(t, err, ErrIPInUse)
	for i := range 2 {
		_, err := d.Release(key(fmt.Sprint("c", i)))
		require.NoError(t, err)
	}
	_, err = d.RemoveCIDR("eni-0", p, false)
	require.ErrorIs(t, err, ErrIPInCooldown)
	clk.Advance(31 * time.Second)
	rel, err := d.RemoveCIDR("eni-0", p, false)
	require.NoError(t, err)
	assert.Empty(t, rel)
	assert.Equal(t, Stats{ENIs: 1}, d.Stats())
	inPool, _ := d.Holds(as[0].IP)
	assert.False(t, inPool)
	assert.Empty(t, d.byIP)

	// Added again, the prefix starts afresh; forced removal returns the pods.
	require.NoError(t, d.AddCIDR("eni-0", p))
	as = assignN(t, d, "d", 2)
	assert.Equal(t, v6(""), as[0].IP)
	_, err = d.RemoveENI("eni-0", false)
	require.ErrorIs(t, err, ErrENIInUse)
	rel, err = d.RemoveENI("eni-0", true)
	require.NoError(t, err)
	assert.ElementsMatch(t, []netip.Addr{as[0].IP, as[1].IP}, []netip.Addr{rel[0].IP, rel[1].IP})
	assert.Equal(t, Stats{}, d.Stats())
	_, ok := d.Find(key("d0"))
	assert.False(t, ok)
	assert.Empty(t, d.v6)
}

func TestIPv6AdoptAndHolds(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d := newV6Store(t, Config{Checkpointer: cp, Cooldown: 30 * time.Second})
	live := v6("2")
	inPool, free := d.Holds(live)
	assert.True(t, inPool)
	assert.True(t, free, "an address never handed out is free")
	inPool, _ = d.Holds(netip.MustParseAddr("2600:1f14:e2a:8d02:6b1b::"))
	assert.False(t, inPool)

	a, err := d.Adopt(live, key("live"), meta("live"))
	require.NoError(t, err)
	assert.Equal(t, live, a.IP)
	again, err := d.Adopt(live, key("live"), meta("live"))
	require.NoError(t, err)
	assert.Equal(t, a, again)
	_, err = d.Adopt(live, key("other"), meta("x"))
	require.ErrorIs(t, err, ErrIPBusy)
	_, err = d.Adopt(v6("9"), key("live"), meta("x"))
	require.ErrorIs(t, err, ErrKeyExists)
	_, err = d.Adopt(netip.MustParseAddr("2600:1f14:e2a:8d02:6b1b::1"), key("y"), meta("y"))
	require.ErrorIs(t, err, ErrNotInPool)
	_, err = d.Adopt(netip.MustParseAddr("10.0.0.1"), key("y"), meta("y"))
	require.ErrorIs(t, err, ErrNotInPool)
	entries, err := cp.Read()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, live, entries[0].IP)

	// Assignments go around the adopted address.
	got := assignN(t, d, "c", 3)
	assert.Equal(t, []netip.Addr{v6(""), v6("1"), v6("3")}, []netip.Addr{got[0].IP, got[1].IP, got[2].IP})
	assert.Len(t, d.v6[0].v6.entries, 4, "failed adoptions left no entry behind")
}

func TestIPv6CheckpointFailureLosesNoAddress(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d := newV6Store(t, Config{Checkpointer: cp})
	cp.SetFail(errors.New("disk full"))
	_, err := d.Assign(key("c1"), meta("p1"))
	require.Error(t, err)
	_, ok := d.Find(key("c1"))
	assert.False(t, ok)
	assert.Equal(t, 0, d.Stats().AssignedIPs)
	cp.SetFail(nil)
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	assert.Equal(t, v6(""), a.IP, "the undone address is handed out again")

	cp.SetFail(errors.New("disk full"))
	_, err = d.Adopt(v6("7"), key("c2"), meta("p2"))
	require.Error(t, err)
	cp.SetFail(nil)
	b := assignN(t, d, "n", 2)
	assert.Equal(t, v6("7"), b[0].IP, "an undone adoption frees its address")
	assert.Equal(t, v6("1"), b[1].IP)

	cp.SetFail(errors.New("disk full"))
	_, err = d.Release(key("c1"))
	require.Error(t, err)
	got, ok := d.Find(key("c1"))
	require.True(t, ok, "a release that could not be persisted is undone")
	assert.Equal(t, v6(""), got.IP)
}

// With a cooldown, an undone release puts back an address that was
// cooling: ending its cooldown must not leave it on the free list, or the
// next pod would get the same address.
func TestIPv6UndoneReleaseWithCooldownIsNotReused(t *testing.T) {
	clk := clocktest.New()
	cp := &MemoryCheckpointer{}
	d := newV6Store(t, Config{Checkpointer: cp, Cooldown: 30 * time.Second, Now: clk.Now})
	first, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	cp.SetFail(errors.New("disk full"))
	_, err = d.Release(key("c1"))
	require.Error(t, err)
	cp.SetFail(nil)
	got, ok := d.Find(key("c1"))
	require.True(t, ok)
	require.Equal(t, first.IP, got.IP)

	seen := map[netip.Addr]string{first.IP: "c1"}
	for _, a := range assignN(t, d, "n", 5) {
		require.NotContains(t, seen, a.IP, "%s handed out twice", a.IP)
		seen[a.IP] = a.Key.ContainerID
	}
	clk.Advance(time.Minute)
	for _, a := range assignN(t, d, "m", 3) {
		require.NotContains(t, seen, a.IP, "%s handed out twice after the cooldown", a.IP)
		seen[a.IP] = a.Key.ContainerID
	}
	assert.Equal(t, 9, d.Stats().AssignedIPs)
}

func TestIPv6CheckpointCarriesIPv6(t *testing.T) {
	cp := &MemoryCheckpointer{}
	d := newV6Store(t, Config{Checkpointer: cp})
	assignN(t, d, "c", 2)
	doc, err := upstreamStrictDecode(cp.Bytes())
	require.NoError(t, err)
	require.Len(t, doc.Allocations, 2)
	got := map[string]bool{}
	for _, e := range doc.Allocations {
		assert.Empty(t, e.IPv4)
		got[e.IPv6] = true
	}
	assert.Equal(t, map[string]bool{"2600:1f14:e2a:8d02:6b1a::": true, "2600:1f14:e2a:8d02:6b1a::1": true}, got)
	for _, keys := range jsonKeyOrder(t, cp.Bytes()) {
		if len(keys) > 3 && keys[0] == "networkName" {
			assert.Equal(t, []string{"networkName", "containerID", "ifName", "ipv6", "allocationTimestamp", "metadata"}, keys)
		}
	}
}

// A checkpoint an upstream ipamd in IPv6 mode left behind.
func TestIPv6RestoreUpstreamCheckpoint(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-ipam-v6.json")
	require.NoError(t, err)
	_, err = upstreamStrictDecode(data)
	require.NoError(t, err, "the fixture is in upstream's schema")
	entries, err := DecodeCheckpoint(data)
	require.NoError(t, err)
	assert.Equal(t, string(data), string(EncodeCheckpoint(nil, entries)), "we would write it byte for byte")

	d := newV6Store(t, Config{Checkpointer: seeded(t, entries)})
	rep, err := d.Restore()
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Restored)
	require.Len(t, rep.NotInPool, 1, "the address of a prefix no longer on the node is dropped")
	assert.Equal(t, netip.MustParseAddr("2600:1f14:e2a:8d02:77c4::9"), rep.NotInPool[0].IP)

	web, ok := d.Find(key("a41b7e2c9d3f8a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b"))
	require.True(t, ok)
	assert.Equal(t, v6("2"), web.IP)
	assert.Equal(t, int64(1718040000500000002), web.AssignedAt.UnixNano())
	assert.Equal(t, IPAMMetadata{K8SPodNamespace: "default", K8SPodName: "web-0", InterfacesCount: 1}, web.Metadata)
	assert.Equal(t, 2, d.Stats().AssignedIPs)

	// New pods fill the gaps from the bottom, as upstream's scan would.
	got := assignN(t, d, "new", 2)
	assert.Equal(t, []netip.Addr{v6("1"), v6("3")}, []netip.Addr{got[0].IP, got[1].IP})
}

func TestIPv6RestoreConflicts(t *testing.T) {
	e1 := entry("c1", "2600:1f14:e2a:8d02:6b1a::5", 1, "p1")
	sameIP := entry("c2", "2600:1f14:e2a:8d02:6b1a::5", 2, "p2")
	sameKey := entry("c1", "2600:1f14:e2a:8d02:6b1a::6", 3, "p1")
	v4 := entry("c3", "10.0.0.1", 4, "p3")
	d := newV6Store(t, Config{Checkpointer: seeded(t, []CheckpointEntry{e1, sameIP, sameKey, v4})})
	rep, err := d.Restore()
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Restored)
	assert.Len(t, rep.Conflicts, 2)
	assert.Len(t, rep.NotInPool, 1, "an IPv4 entry has no place in an IPv6 store")
	assert.Len(t, d.v6[0].v6.entries, 1, "conflicting entries left no state behind")
}

func TestIPv6PendingPrefix(t *testing.T) {
	clk := clocktest.New()
	d := newV6Store(t, Config{Now: clk.Now, VerifyNewAddresses: true, Cooldown: 30 * time.Second})
	_, err := d.Assign(key("a"), meta("a"))
	require.ErrorIs(t, err, ErrNoAvailableIP, "no address of a pending prefix is handed out")
	s := d.Stats()
	assert.Equal(t, 1<<48, s.PendingIPs)
	assert.Equal(t, 0, s.FreePrefixes, "a pending prefix is not free")
	assert.Equal(t, 0, s.AssignableIPs())
	assert.Equal(t, 1<<48, d.PendingCount())
	inPool, free := d.Holds(v6("2"))
	assert.True(t, inPool)
	assert.False(t, free)

	ps := d.PendingAddresses()
	require.Len(t, ps, 1, "the prefix is pending as one")
	assert.Equal(t, Pending{Prefix: pfx(v6Prefix), ENIID: "eni-0", Seq: ps[0].Seq, Since: clk.Now()}, ps[0])
	assert.False(t, ps[0].IP.IsValid())

	// A sandbox found using an address of the prefix adopts it.
	live, err := d.Adopt(v6("2"), key("live"), meta("live"))
	require.NoError(t, err)
	assert.Equal(t, v6("2"), live.IP)
	assert.Equal(t, 1<<48-1, d.Stats().PendingIPs)

	_, err = d.Release(key("live"))
	require.NoError(t, err)
	assert.Equal(t, 1<<48-1, d.Stats().PendingIPs, "the cooling address is not pending")
	clk.Advance(31 * time.Second)
	assert.Equal(t, 1<<48, d.Stats().PendingIPs, "once rested it is pending again, with its prefix")
	inPool, free = d.Holds(v6("2"))
	assert.True(t, inPool)
	assert.False(t, free)
	_, err = d.Adopt(v6("2"), key("live"), meta("live"))
	require.NoError(t, err, "a rested address of a pending prefix can be adopted again")

	assert.Equal(t, 1, d.Verify(ps))
	assert.Empty(t, d.PendingAddresses())
	assert.Equal(t, 0, d.Verify(ps), "verifying twice does nothing")
	s = d.Stats()
	assert.Equal(t, 0, s.PendingIPs)
	assert.Equal(t, 1<<48-1, s.AssignableIPs())
	a := assignN(t, d, "c", 3)
	assert.Equal(t, []netip.Addr{v6(""), v6("1"), v6("3")}, []netip.Addr{a[0].IP, a[1].IP, a[2].IP})
}

func TestIPv6PendingPrefixStaleListingAndSwitchOff(t *testing.T) {
	d := newV6Store(t, Config{VerifyNewAddresses: true})
	old := d.PendingAddresses()
	_, err := d.RemoveCIDR("eni-0", pfx(v6Prefix), false)
	require.NoError(t, err, "a pending prefix with nothing in it can go")
	assert.Equal(t, Stats{ENIs: 1}, d.Stats())
	require.NoError(t, d.AddCIDR("eni-0", pfx(v6Prefix)))
	assert.Equal(t, 0, d.Verify(old), "the prefix joined again since that listing")
	assert.Equal(t, 1<<48, d.PendingCount())

	d.SetVerifyNewAddresses(false)
	assert.Equal(t, 0, d.PendingCount())
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 1 << 48, TotalPrefixes: 1, FreePrefixes: 1}, d.Stats())
	_, err = d.Assign(key("a"), meta("a"))
	require.NoError(t, err)
}

func TestIPv6PendingForcedRemovalKeepsCounters(t *testing.T) {
	d := newV6Store(t, Config{VerifyNewAddresses: true})
	_, err := d.Adopt(v6("4"), key("live"), meta("live"))
	require.NoError(t, err)
	rel, err := d.RemoveENI("eni-0", true)
	require.NoError(t, err)
	require.Len(t, rel, 1)
	assert.Equal(t, Stats{}, d.Stats())
	assert.Equal(t, 0, d.PendingCount())
	assert.Empty(t, d.PendingAddresses())
}

// /v1/enis in IPv6 mode, as upstream shows it: the /80 under IPv6Cidrs,
// keyed "<addr>/80", with a 16-byte mask.
func TestIPv6ENIInfosJSON(t *testing.T) {
	clk := clocktest.New()
	d := newV6Store(t, Config{Now: clk.Now, Cooldown: 30 * time.Second})
	assignN(t, d, "c", 2)
	_, err := d.Release(key("c1"))
	require.NoError(t, err)
	raw, err := json.Marshal(d.ENIInfos())
	require.NoError(t, err)

	var got struct {
		TotalIPs, AssignedIPs int64
		ENIs                  map[string]struct {
			ID                 string
			IsPrimary          bool
			AvailableIPv4Cidrs map[string]json.RawMessage
			IPv6Cidrs          map[string]struct {
				Cidr          struct{ IP, Mask string }
				IPAddresses   map[string]struct{ Address string }
				IsPrefix      bool
				AddressFamily string
			}
			SubnetID string
		}
	}
	require.NoError(t, json.Unmarshal(raw, &got), string(raw))
	assert.Equal(t, int64(1)<<48, got.TotalIPs)
	assert.Equal(t, int64(1), got.AssignedIPs)
	e := got.ENIs["eni-0"]
	assert.True(t, e.IsPrimary)
	assert.Equal(t, "subnet-v6", e.SubnetID)
	assert.NotNil(t, e.AvailableIPv4Cidrs)
	assert.Empty(t, e.AvailableIPv4Cidrs)
	require.Contains(t, e.IPv6Cidrs, "2600:1f14:e2a:8d02:6b1a::/80")
	c := e.IPv6Cidrs["2600:1f14:e2a:8d02:6b1a::/80"]
	assert.Equal(t, "2600:1f14:e2a:8d02:6b1a::", c.Cidr.IP)
	assert.Equal(t, "/////////////wAAAAAAAA==", c.Cidr.Mask, "net.CIDRMask(80, 128)")
	assert.True(t, c.IsPrefix)
	assert.Equal(t, "", c.AddressFamily, "upstream's copy leaves it empty")
	assert.Len(t, c.IPAddresses, 2, "the assigned and the cooling address")
	assert.Equal(t, "2600:1f14:e2a:8d02:6b1a::1", c.IPAddresses["2600:1f14:e2a:8d02:6b1a::1"].Address)
	assert.Contains(t, string(raw), `"AvailableIPv4Cidrs":{}`)
}

func TestIPv6AllocationsAndUsage(t *testing.T) {
	d := newV6Store(t, Config{})
	assignN(t, d, "c", 3)
	assert.Len(t, d.Allocations(), 3)
	u := d.Usage()
	require.Len(t, u, 1)
	assert.Equal(t, 3, u[0].Assigned)
	assert.Equal(t, []CIDRUsage{{CIDR: pfx(v6Prefix), Assigned: 3}}, u[0].CIDRs)
}

func TestIPv6ConcurrentChurn(t *testing.T) {
	d := newV6Store(t, Config{Checkpointer: &MemoryCheckpointer{}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := map[netip.Addr]IPAMKey{}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				k := key(fmt.Sprint("w", w, "-", i))
				a, err := d.Assign(k, meta("x"))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				if other, dup := held[a.IP]; dup {
					t.Errorf("%s handed to %s and %s", a.IP, other, k)
				}
				held[a.IP] = k
				mu.Unlock()
				if i%2 == 0 {
					mu.Lock()
					delete(held, a.IP)
					mu.Unlock()
					_, err := d.Release(k)
					assert.NoError(t, err)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, len(held), d.Stats().AssignedIPs)
	assert.LessOrEqual(t, len(d.v6[0].v6.entries), 8*26, "entries bounded by peak use")
}

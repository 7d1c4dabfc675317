package datastore

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A disputed CIDR keeps what it holds but hands out none of its free
// addresses, in both IPv4 kinds and in IPv6; lifting the mark makes them
// assignable again.
func TestDisputedCIDRHandsOutNothing(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		add  func(t *testing.T, d *DataStore)
		cidr netip.Prefix // the first assignment's
		free int          // addresses of cidr left free after the first assignment
	}{
		{"secondary", Config{}, func(t *testing.T, d *DataStore) { addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2) }, netip.Prefix{}, 0},
		{"prefix", Config{PrefixDelegation: true}, func(t *testing.T, d *DataStore) { addPrefixENI(t, d, "eni-a", 0, "10.0.0.16", 1) }, netip.Prefix{}, 15},
		{"ipv6", Config{IPv6: true}, func(t *testing.T, d *DataStore) {
			require.NoError(t, d.AddENI(ENIInfo{ID: "eni-a", Primary: true, RouteTableID: 254}))
			require.NoError(t, d.AddCIDR("eni-a", pfx("2600:1f14::/80")))
		}, netip.Prefix{}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := New(tc.cfg)
			tc.add(t, d)
			first, err := d.Assign(key("a"), meta("a"))
			require.NoError(t, err)
			tc.cidr = first.CIDR
			require.NoError(t, d.SetDisputed("eni-a", tc.cidr, true))
			for i := range tc.free {
				got, err := d.Assign(key(podName(i)), meta(podName(i)))
				if err == nil {
					assert.NotEqual(t, tc.cidr, got.CIDR, "a disputed CIDR's free address was handed out")
				}
			}
			held, ok := d.Find(key("a"))
			require.True(t, ok, "what it holds stays")
			assert.Equal(t, first.IP, held.IP)
			_, err = d.Release(key("a"))
			require.NoError(t, err)

			require.NoError(t, d.SetDisputed("eni-a", tc.cidr, false))
			got, err := d.Assign(key("b"), meta("b"))
			require.NoError(t, err)
			assert.Equal(t, tc.cidr, got.CIDR, "assignable again once the mark is lifted")
		})
	}
	require.ErrorIs(t, New(Config{}).SetDisputed("eni-x", pfx("10.0.0.1/32"), true), ErrUnknownENI)
	d := New(Config{})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 1)
	require.ErrorIs(t, d.SetDisputed("eni-a", pfx("10.0.0.99/32"), true), ErrUnknownCIDR)
}

// RemoveCIDRIfUnheld and RemoveENIIfUnheld refuse what a pod holds or may
// hold (assigned or pending) and take what only cools.
func TestRemoveIfUnheld(t *testing.T) {
	d, clk := newStoreOnClock(t, nil, 3)
	_ = clk
	a, err := d.Assign(key("a"), meta("a"))
	require.NoError(t, err)
	require.ErrorIs(t, d.RemoveCIDRIfUnheld("eni-a", a.CIDR), ErrIPInUse)
	require.ErrorIs(t, d.RemoveENIIfUnheld("eni-a"), ErrENIInUse)
	_, err = d.Release(key("a")) // cooling for 30 s
	require.NoError(t, err)
	_, err = d.RemoveCIDR("eni-a", a.CIDR, false)
	require.ErrorIs(t, err, ErrIPInCooldown, "without force a cooling address keeps its CIDR")
	require.NoError(t, d.RemoveCIDRIfUnheld("eni-a", a.CIDR), "no pod holds a cooling address")
	assert.Equal(t, 2, d.Stats().TotalIPs)

	d.SetVerifyNewAddresses(true)
	require.NoError(t, d.AddCIDR("eni-a", pfx("10.0.0.50/32")))
	require.ErrorIs(t, d.RemoveCIDRIfUnheld("eni-a", pfx("10.0.0.50/32")), ErrIPInUse, "a pending address may be a pod's")
	require.ErrorIs(t, d.RemoveENIIfUnheld("eni-a"), ErrENIInUse)
	require.Equal(t, 1, d.Verify(d.PendingAddresses()))
	require.NoError(t, d.RemoveENIIfUnheld("eni-a"))
	assert.Empty(t, d.ENISummaries())
	require.ErrorIs(t, d.RemoveENIIfUnheld("eni-a"), ErrUnknownENI)
	require.ErrorIs(t, d.RemoveCIDRIfUnheld("eni-a", a.CIDR), ErrUnknownENI)
}

// A disputed CIDR's addresses that no pod holds are not counted as
// available, nor offered to shrink, so the pool grows elsewhere and never
// returns a usable address in their place; what its pods hold stays
// counted.
func TestDisputedCIDRLeavesTheFigures(t *testing.T) {
	d := New(Config{PrefixDelegation: true})
	addPrefixENI(t, d, "eni-a", 0, "10.0.0.16", 2)
	a, err := d.Assign(key("a"), meta("a"))
	require.NoError(t, err)
	other := pfx("10.0.0.32/28")
	if a.CIDR == other {
		other = pfx("10.0.0.16/28")
	}
	before := d.Stats()
	require.Equal(t, Stats{ENIs: 1, TotalIPs: 32, AssignedIPs: 1, TotalPrefixes: 2, FreePrefixes: 1}, before)
	require.NoError(t, d.SetDisputed("eni-a", a.CIDR, true))
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 17, AssignedIPs: 1, TotalPrefixes: 2, FreePrefixes: 1}, d.Stats(),
		"the held prefix's 15 free addresses leave the figures; its pod stays counted")
	require.NoError(t, d.SetDisputed("eni-a", other, true))
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 1, AssignedIPs: 1, TotalPrefixes: 1, FreePrefixes: 0}, d.Stats())
	assert.Empty(t, d.FreeCIDRs(true, 10), "a disputed prefix is never offered to shrink")
	require.NoError(t, d.SetDisputed("eni-a", other, false))
	assert.Equal(t, []FreeCIDR{{ENIID: "eni-a", CIDR: other}}, d.FreeCIDRs(true, 10))
	_, err = d.RemoveCIDR("eni-a", a.CIDR, true)
	require.NoError(t, err)
	assert.Equal(t, Stats{ENIs: 1, TotalIPs: 16, TotalPrefixes: 1, FreePrefixes: 1}, d.Stats(), "a removed CIDR leaves the disputed set")
}

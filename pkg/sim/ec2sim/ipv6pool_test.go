package ec2sim

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

var testV6Subnet = netip.MustParsePrefix("2600:1f14:abc:de01::/64")

func TestV6PoolAddressesAndPrefixesNeverOverlap(t *testing.T) {
	p := newV6Pool(testV6Subnet)
	rng := rand.New(rand.NewPCG(1, 2))
	addrs, err := p.allocAddrs(200, rng)
	require.NoError(t, err)
	pfxs, err := p.allocPrefixes(300, rng)
	require.NoError(t, err)
	more, err := p.allocAddrs(200, rng)
	require.NoError(t, err)
	addrs = append(addrs, more...)

	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		require.True(t, testV6Subnet.Contains(a), a)
		require.False(t, seen[a], "address %s handed out twice", a)
		seen[a] = true
		for _, pf := range pfxs {
			require.False(t, pf.Contains(a), "address %s inside delegated prefix %s", a, pf)
		}
	}
	seenPfx := map[netip.Prefix]bool{}
	for _, pf := range pfxs {
		require.Equal(t, ipv6PrefixLen, pf.Bits())
		require.Equal(t, pf.Masked(), pf)
		require.True(t, testV6Subnet.Contains(pf.Addr()), pf)
		require.False(t, seenPfx[pf], "prefix %s handed out twice", pf)
		seenPfx[pf] = true
	}
	nA, nP := p.inUse()
	require.Equal(t, 400, nA)
	require.Equal(t, 300, nP)

	// A specific address inside a delegated /80, or an address or /80
	// already out, is refused; so is the block of a single address.
	require.ErrorIs(t, p.allocAddr(pfxs[0].Addr().Next()), errInUse)
	require.ErrorIs(t, p.allocAddr(addrs[0]), errInUse)
	require.ErrorIs(t, p.allocPrefix(pfxs[0]), errInUse)
	require.ErrorIs(t, p.allocPrefix(netip.PrefixFrom(addrs[0], ipv6PrefixLen).Masked()), errInUse)

	// Released space is reusable.
	p.releasePrefix(pfxs[0])
	p.releasePrefix(pfxs[0]) // double release is harmless
	require.NoError(t, p.allocAddr(pfxs[0].Addr().Next()))
	p.releaseAddr(pfxs[0].Addr().Next())
	require.NoError(t, p.allocPrefix(pfxs[0]))
	p.releaseAddr(addrs[0])
	p.releaseAddr(addrs[0])
	require.NoError(t, p.allocAddr(addrs[0]))
	nA, nP = p.inUse()
	require.Equal(t, 400, nA)
	require.Equal(t, 300, nP)
}

func TestV6PoolReservedAndOutside(t *testing.T) {
	p := newV6Pool(testV6Subnet)
	base := testV6Subnet.Addr()
	for _, a := range []string{"2600:1f14:abc:de01::", "2600:1f14:abc:de01::3", "2600:1f14:abc:de01:ffff:ffff:ffff:ffff"} {
		require.ErrorIs(t, p.allocAddr(netip.MustParseAddr(a)), errReserved, a)
	}
	require.NoError(t, p.allocAddr(netip.MustParseAddr("2600:1f14:abc:de01::4")))
	require.ErrorIs(t, p.allocAddr(netip.MustParseAddr("2600:1f14:abc:de02::4")), errOutside)
	require.ErrorIs(t, p.allocAddr(netip.MustParseAddr("10.0.0.4")), errOutside)

	// The first and last /80 hold reserved addresses and are never delegated.
	require.ErrorIs(t, p.allocPrefix(netip.PrefixFrom(base, 80)), errReserved)
	require.ErrorIs(t, p.allocPrefix(netip.MustParsePrefix("2600:1f14:abc:de01:ffff::/80")), errReserved)
	require.ErrorIs(t, p.allocPrefix(netip.MustParsePrefix("2600:1f14:abc:de01:1::/96")), errOutside)
	require.ErrorIs(t, p.allocPrefix(netip.MustParsePrefix("2600:1f14:abc:de02:1::/80")), errOutside)
	require.NoError(t, p.allocPrefix(netip.MustParsePrefix("2600:1f14:abc:de01:1::/80")))
}

// Every delegable /80 can be handed out, and then there are none left;
// single addresses still fit in the two undelegable blocks.
func TestV6PoolRunsOutOfPrefixes(t *testing.T) {
	p := newV6Pool(testV6Subnet)
	rng := rand.New(rand.NewPCG(3, 4))
	pfxs, err := p.allocPrefixes(v6BlockCount-2, rng)
	require.NoError(t, err)
	require.Len(t, pfxs, v6BlockCount-2)
	_, err = p.allocPrefixes(1, rng)
	require.ErrorIs(t, err, errNoCidrBlocks)
	addrs, err := p.allocAddrs(3, rng)
	require.NoError(t, err)
	for _, a := range addrs {
		b := a.As16()
		blk := uint16(b[8])<<8 | uint16(b[9])
		require.Contains(t, []uint16{0, v6BlockCount - 1}, blk, a)
	}
}

func TestV6PoolReplaysFromSeed(t *testing.T) {
	run := func() ([]netip.Addr, []netip.Prefix) {
		p := newV6Pool(testV6Subnet)
		rng := rand.New(rand.NewPCG(7, 7))
		a, err := p.allocAddrs(3, rng)
		require.NoError(t, err)
		pf, err := p.allocPrefixes(2, rng)
		require.NoError(t, err)
		return a, pf
	}
	a1, p1 := run()
	a2, p2 := run()
	require.Equal(t, a1, a2)
	require.Equal(t, p1, p2)
}

func TestConfigIPv6Validation(t *testing.T) {
	good := func() Config {
		return Config{VPCIPv6CIDR: "2600:1f14:abc:de00::/56", Subnets: []SubnetConfig{
			{CIDR: "10.0.0.0/20", IPv6CIDR: "2600:1f14:abc:de00::/64"},
			{CIDR: "10.0.16.0/20", IPv6CIDR: "2600:1f14:abc:de01::/64"},
		}}
	}
	for name, tc := range map[string]struct {
		edit    func(*Config)
		wantErr string
	}{
		"dual stack":               {edit: func(*Config) {}},
		"primary IPv6":             {edit: func(c *Config) { c.PrimaryIPv6 = true }},
		"IPv4-only subnet":         {edit: func(c *Config) { c.Subnets[1].IPv6CIDR = "" }},
		"VPC block not /56":        {edit: func(c *Config) { c.VPCIPv6CIDR = "2600:1f14:abc::/48" }, wantErr: "not an IPv6 /56"},
		"VPC block not masked":     {edit: func(c *Config) { c.VPCIPv6CIDR = "2600:1f14:abc:de01::/56" }, wantErr: "not an IPv6 /56"},
		"VPC block IPv4":           {edit: func(c *Config) { c.VPCIPv6CIDR = "10.0.0.0/16" }, wantErr: "not an IPv6"},
		"VPC block ULA":            {edit: func(c *Config) { c.VPCIPv6CIDR = "fd00:1:2:300::/56" }, wantErr: "global unicast"},
		"VPC block garbage":        {edit: func(c *Config) { c.VPCIPv6CIDR = "nope" }, wantErr: "VPC IPv6 CIDR"},
		"subnet block without VPC": {edit: func(c *Config) { c.VPCIPv6CIDR = "" }, wantErr: "no IPv6 CIDR block"},
		"subnet block not /64":     {edit: func(c *Config) { c.Subnets[1].IPv6CIDR = "2600:1f14:abc:de01::/80" }, wantErr: "not an IPv6 /64"},
		"subnet block outside VPC": {edit: func(c *Config) { c.Subnets[1].IPv6CIDR = "2600:1f14:abc:df00::/64" }, wantErr: "not inside"},
		"subnet blocks overlap":    {edit: func(c *Config) { c.Subnets[1].IPv6CIDR = "2600:1f14:abc:de00::/64" }, wantErr: "overlaps"},
		"primary IPv6, v4 subnet":  {edit: func(c *Config) { c.PrimaryIPv6 = true; c.Subnets[0].IPv6CIDR = "" }, wantErr: "PrimaryIPv6"},
		"subnet block is IPv4":     {edit: func(c *Config) { c.Subnets[1].IPv6CIDR = "10.0.16.0/20" }, wantErr: "not an IPv6 /64"},
		"subnet block unparseable": {edit: func(c *Config) { c.Subnets[1].IPv6CIDR = "2600::zz/64" }, wantErr: "IPv6 CIDR"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good()
			tc.edit(&cfg)
			s, err := New(cfg)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, s)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

package ec2sim

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAddrPoolReservesAWSAddresses(t *testing.T) {
	p := newAddrPool(netip.MustParsePrefix("10.1.0.0/28"))
	require.Equal(t, 11, p.available())
	ips, err := p.allocIPs(11)
	require.NoError(t, err)
	require.Equal(t, "10.1.0.4", ips[0].String())
	require.Equal(t, "10.1.0.14", ips[10].String())
	_, err = p.allocIPs(1)
	require.ErrorIs(t, err, errNoAddresses)
	require.ErrorIs(t, p.allocIP(netip.MustParseAddr("10.1.0.0")), errReserved)
	require.ErrorIs(t, p.allocIP(netip.MustParseAddr("10.1.0.15")), errReserved)
	require.ErrorIs(t, p.allocIP(netip.MustParseAddr("10.1.0.5")), errInUse)
	require.ErrorIs(t, p.allocIP(netip.MustParseAddr("10.2.0.5")), errOutside)

	p.releaseIP(ips[3])
	p.releaseIP(ips[3]) // double release is harmless
	p.releaseIP(netip.MustParseAddr("10.1.0.1"))
	require.Equal(t, 1, p.available())
	again, err := p.allocIPs(1)
	require.NoError(t, err)
	require.Equal(t, ips[3], again[0])
}

func TestAddrPoolPrefixes(t *testing.T) {
	// A /26 has /28s at .0 (holds reserved .0-.3), .16, .32 and .48 (holds
	// the broadcast .63): only two can be delegated.
	p := newAddrPool(netip.MustParsePrefix("10.1.0.0/26"))
	got, err := p.allocPrefixes(2)
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.0.16/28"), netip.MustParsePrefix("10.1.0.32/28")}, got)
	require.Equal(t, 59-32, p.available())
	_, err = p.allocPrefixes(1)
	require.ErrorIs(t, err, errNoCidrBlocks)

	// Single addresses never land inside a delegated prefix.
	ips, err := p.allocIPs(p.available())
	require.NoError(t, err)
	for _, ip := range ips {
		for _, pf := range got {
			require.False(t, pf.Contains(ip), "%s inside %s", ip, pf)
		}
	}
	p.releasePrefix(got[0])
	require.Equal(t, 16, p.available())
	require.ErrorIs(t, p.allocPrefix(got[1]), errInUse)
	require.NoError(t, p.allocPrefix(got[0]))
	require.Equal(t, 0, p.available())
}

func TestAddrPoolBigSubnet(t *testing.T) {
	p := newAddrPool(netip.MustParsePrefix("10.0.0.0/16"))
	require.Equal(t, 65536-5, p.available())
	pf, err := p.allocPrefixes(3)
	require.NoError(t, err)
	require.Equal(t, "10.0.0.16/28", pf[0].String())
	require.Equal(t, "10.0.0.48/28", pf[2].String())
	ips, err := p.allocIPs(20)
	require.NoError(t, err)
	require.Equal(t, "10.0.0.4", ips[0].String())
	require.Equal(t, "10.0.0.64", ips[12].String(), "skips the delegated /28s")
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{InstanceType: "m5.huge"},
		{VPCCIDR: "10.0.0.0/8"},
		{Subnets: []SubnetConfig{{CIDR: "192.168.0.0/24"}}},
		{Subnets: []SubnetConfig{{CIDR: "10.0.0.0/24"}, {CIDR: "10.0.0.128/25"}}},
		{Subnets: []SubnetConfig{{CIDR: "10.0.0.0/24", AZ: "us-west-2b"}}},
		{Subnets: []SubnetConfig{{ID: "net-1", CIDR: "10.0.0.0/24"}}},
		{SecurityGroupIDs: []string{"default"}},
	}
	for _, cfg := range bad {
		_, err := New(cfg)
		require.Error(t, err, "%+v", cfg)
	}
	s, err := New(Config{})
	require.NoError(t, err)
	require.Equal(t, "us-west-2", s.Region())
	require.Equal(t, "us-west-2a", s.AZ())
	require.Equal(t, []string{"subnet-0sim00000001"}, s.SubnetIDs())
	require.Equal(t, "", s.EC2Endpoint(), "not started")
	require.NoError(t, s.Close())
}

func TestGlobMatch(t *testing.T) {
	require.True(t, globMatch("kubernetes.io/role/*", "kubernetes.io/role/cni"))
	require.True(t, globMatch("eni-?b", "eni-ab"))
	require.True(t, globMatch("*", ""))
	require.False(t, globMatch("eni-?b", "eni-abb"))
	require.False(t, globMatch("a*c", "abd"))
}

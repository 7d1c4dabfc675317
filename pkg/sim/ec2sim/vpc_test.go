package ec2sim

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckSecondaryBlock(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	cases := []struct {
		have  []netip.Prefix
		cand  string
		valid bool
	}{
		// Custom networking's usual block, with any primary.
		{pfx("10.0.0.0/16"), "100.64.0.0/16", true},
		{pfx("192.168.0.0/16"), "100.64.0.0/16", true},
		{pfx("100.64.0.0/16"), "100.65.0.0/16", true},
		// More of the primary's own private range; publicly routable.
		{pfx("10.0.0.0/16"), "10.1.0.0/16", true},
		{pfx("172.31.0.0/16"), "172.20.0.0/24", true},
		{pfx("10.0.0.0/16"), "52.0.0.0/16", true},
		{pfx("10.0.0.0/16"), "10.0.0.0/16", false},    // same block
		{pfx("10.0.0.0/16"), "10.0.128.0/20", false},  // inside it
		{pfx("10.0.0.0/16"), "10.2.0.0/15", false},    // larger than /16
		{pfx("10.0.0.0/16"), "10.2.0.0/29", false},    // smaller than /28
		{pfx("10.0.0.0/16"), "10.2.0.1/16", false},    // host bits set
		{pfx("10.0.0.0/16"), "172.16.0.0/16", false},  // another private range
		{pfx("10.0.0.0/16"), "192.168.0.0/16", false}, // another private range
		{pfx("192.168.0.0/16"), "10.0.0.0/16", false}, // another private range
		{pfx("100.64.0.0/16"), "10.0.0.0/16", false},  // non-private primary: no private blocks
		{pfx("10.0.0.0/16"), "198.19.0.0/16", false},  // benchmarking range
		{pfx("10.0.0.0/16"), "169.254.0.0/16", false}, // link-local
		{pfx("10.0.0.0/16"), "127.0.0.0/16", false},   // loopback
		{pfx("10.0.0.0/16"), "224.0.0.0/16", false},   // multicast
		// The default quota: five blocks in all.
		{pfx("10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"), "100.64.0.0/16", true},
		{pfx("10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16", "10.4.0.0/16"), "100.64.0.0/16", false},
	}
	for _, tc := range cases {
		err := checkSecondaryBlock(tc.have, netip.MustParsePrefix(tc.cand))
		if tc.valid {
			require.NoError(t, err, "%v + %s", tc.have, tc.cand)
		} else {
			require.Error(t, err, "%v + %s", tc.have, tc.cand)
		}
	}
}

func TestConfigSecondaryBlocks(t *testing.T) {
	bad := []Config{
		{SecondaryVPCCIDRs: []string{"100.64.0.0"}},
		{SecondaryVPCCIDRs: []string{"172.16.0.0/16"}},
		{SecondaryVPCCIDRs: []string{"100.64.0.0/16", "100.64.0.0/17"}},
		{VPCCIDR: "169.254.0.0/16"},
		// A subnet must lie inside one block, not across two or outside all.
		{VPCCIDR: "10.0.0.0/17", SecondaryVPCCIDRs: []string{"10.0.128.0/17"}, Subnets: []SubnetConfig{{CIDR: "10.0.0.0/24"}, {CIDR: "10.0.0.0/16"}}},
		{SecondaryVPCCIDRs: []string{"100.64.0.0/16"}, Subnets: []SubnetConfig{{CIDR: "10.0.0.0/24"}, {CIDR: "100.65.0.0/24"}}},
		{SecurityGroupIDs: []string{"sg-01", "sg-02", "sg-03", "sg-04", "sg-05", "sg-06"}},
	}
	for _, cfg := range bad {
		_, err := New(cfg)
		require.Error(t, err, "%+v", cfg)
	}

	s, err := New(Config{SecondaryVPCCIDRs: []string{"100.64.0.0/16"}, Subnets: []SubnetConfig{
		{CIDR: "10.0.0.0/24"}, {CIDR: "100.64.0.0/19"}, {CIDR: "100.64.32.0/19", AZ: "us-west-2b"},
	}})
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16"}, s.VPCCIDRs())
	require.Equal(t, []string{"subnet-0sim00000001", "subnet-0sim00000002", "subnet-0sim00000003"}, s.SubnetIDs())

	d, err := New(Config{})
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.0/16"}, d.VPCCIDRs(), "one block by default")
}

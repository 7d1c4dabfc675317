package awsutils

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// An IPv6 node: the identity carries the node's IPv6 address and the VPC's
// IPv6 block; the primary ENI gets one /80 at the first call (one EC2
// assign), and the same one afterwards, also as IMDS shows it.
func TestIPv6IdentityAndPrimaryPrefix(t *testing.T) {
	sim, c := simClient(t, ec2simtest.IPv6Node(ec2sim.Config{}), Options{IPv6: true})
	ctx := context.Background()
	prim := mustSimENI(t, sim, sim.PrimaryENI())
	require.Len(t, prim.IPv6Addrs, 1)
	assert.Equal(t, prim.IPv6Addrs[0], c.Identity.PrimaryIPv6)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix(ec2simtest.IPv6VPCCIDR)}, c.Identity.VPCIPv6CIDRs)

	p, assigned, err := c.PrimaryIPv6Prefix(ctx)
	require.NoError(t, err)
	assert.True(t, assigned, "the ENI had none")
	assert.Equal(t, 80, p.Bits())
	assert.True(t, netip.MustParsePrefix(ec2simtest.IPv6SubnetCIDR).Contains(p.Addr()))
	assert.Equal(t, []netip.Prefix{p}, mustSimENI(t, sim, sim.PrimaryENI()).IPv6Prefixes)
	assigns := callsFor(sim, "AssignIpv6Addresses")

	again, assigned, err := c.PrimaryIPv6Prefix(ctx)
	require.NoError(t, err)
	assert.False(t, assigned, "the ENI's own prefix")
	assert.Equal(t, p, again)
	assert.Equal(t, assigns, callsFor(sim, "AssignIpv6Addresses"), "an ENI with a prefix gets no other")

	enis, err := c.AttachedENIs(ctx)
	require.NoError(t, err)
	require.Len(t, enis, 1)
	assert.Equal(t, []netip.Prefix{p}, enis[0].IPv6Prefixes, "IMDS ipv6-prefix")
}

// IPv6 mode on an instance without an IPv6 address is refused with a
// message saying what is missing; an IPv4 client never asks.
func TestIPv6NeedsTheNodesIPv6Address(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), sim.IMDSEndpoint())
	_, err := New(context.Background(), Options{IPv6: true, MaxAttempts: 2})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no IPv6 address")
	c := newClient(t, Options{})
	assert.False(t, c.Identity.PrimaryIPv6.IsValid())
}

// In IMDS-only mode nothing is assigned: a primary ENI without a prefix is
// an error naming the mode.
func TestIPv6PrefixNotAssignedInIMDSOnlyMode(t *testing.T) {
	_, c := simClient(t, ec2simtest.IPv6Node(ec2sim.Config{}), Options{IPv6: true, IMDSOnly: true})
	_, _, err := c.PrimaryIPv6Prefix(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ENABLE_IMDS_ONLY_MODE")
}

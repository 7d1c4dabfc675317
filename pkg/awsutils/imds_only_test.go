package awsutils

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func TestIMDSOnlyListsENIsFromIMDSAndSendsNothingToEC2(t *testing.T) {
	ctx := context.Background()
	sim, full := simClient(t, ec2sim.Config{InstanceType: "m5.large"}, Options{})
	// A node as another ipamd (or an operator) left it: a second ENI with
	// addresses, and addresses on the primary.
	eni, err := full.AllocENI(ctx, AllocOptions{IPs: 3})
	require.NoError(t, err)
	_, err = full.WaitAttached(ctx, eni.ID)
	require.NoError(t, err)
	_, err = full.AssignIPs(ctx, sim.PrimaryENI(), 2)
	require.NoError(t, err)

	c := newClient(t, Options{IMDSOnly: true})
	sim.ResetCalls()

	got, err := c.InstanceENIs(ctx)
	require.NoError(t, err)
	want := map[string]ec2sim.ENIState{}
	for _, e := range sim.ENIs() {
		if e.Attached {
			want[e.ID] = e
		}
	}
	require.Len(t, got, len(want))
	for _, e := range got {
		truth, ok := want[e.ID]
		require.True(t, ok, e.ID)
		assert.True(t, e.Attached)
		assert.Equal(t, truth.DeviceIndex, e.DeviceNumber)
		assert.Equal(t, truth.PrimaryIP, e.PrimaryIP)
		assert.ElementsMatch(t, truth.SecondaryIPs, e.SecondaryIPs)
		assert.Equal(t, truth.SubnetID, e.SubnetID)
		assert.Nil(t, e.Tags, "IMDS shows no tags: unknown, not empty")
	}

	one, err := c.DescribeENIs(ctx, []string{eni.ID})
	require.NoError(t, err)
	require.Len(t, one, 1)
	assert.Len(t, one[0].SecondaryIPs, 3)
	_, err = c.DescribeENIs(ctx, []string{"eni-0000000000000dead"})
	assert.ErrorIs(t, err, ErrNotFound)

	// The subnet's CIDR came with the ENIs: no DescribeSubnets.
	cidr, err := c.SubnetCIDR(ctx, one[0].SubnetID)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParsePrefix("10.0.0.0/20"), cidr)

	assert.Empty(t, sim.Calls(), "IMDS-only mode reads ENIs without EC2")
}

func TestIMDSOnlyRefusesEC2CallsThatChangeAnything(t *testing.T) {
	ctx := context.Background()
	sim, full := simClient(t, ec2sim.Config{InstanceType: "m5.large"}, Options{})
	loose := createLooseENI(t, full, sim.SubnetIDs()[0])
	before := sim.ENIs()
	c := newClient(t, Options{IMDSOnly: true})
	sim.ResetCalls()

	calls := map[string]func() error{
		"AllocENI":       func() error { _, err := c.AllocENI(ctx, AllocOptions{IPs: 1}); return err },
		"FreeENI":        func() error { return c.FreeENI(ctx, loose) },
		"AssignIPs":      func() error { _, err := c.AssignIPs(ctx, sim.PrimaryENI(), 1); return err },
		"AssignPrefixes": func() error { _, err := c.AssignPrefixes(ctx, sim.PrimaryENI(), 1); return err },
		"UnassignIPs": func() error {
			return c.UnassignIPs(ctx, sim.PrimaryENI(), []netip.Addr{netip.MustParseAddr("10.0.0.9")})
		},
		"UnassignPrefixes": func() error {
			return c.UnassignPrefixes(ctx, sim.PrimaryENI(), []netip.Prefix{netip.MustParsePrefix("10.0.1.0/28")})
		},
		"TagENI": func() error { return c.TagENI(ctx, sim.PrimaryENI(), map[string]string{"k": "v"}) },
	}
	for name, call := range calls {
		err := call()
		if name == "FreeENI" {
			// The loose ENI is not attached, so IMDS does not show it: the
			// describe says not found and there is nothing to free.
			assert.NoError(t, err, name)
			continue
		}
		assert.ErrorIs(t, err, ErrIMDSOnly, name)
	}
	for action := range sim.Calls() {
		assert.True(t, allowedInIMDSOnly(action), "%s reached EC2 in IMDS-only mode", action)
	}
	assert.Equal(t, before, sim.ENIs(), "EC2 is unchanged")

	// Reads upstream still makes are allowed.
	sim.ResetCalls()
	l, err := c.DescribeInstanceTypeLimits(ctx, "m5.large")
	require.NoError(t, err)
	assert.Equal(t, 3, l.ENIs)
	assert.Equal(t, map[string]int{"DescribeInstanceTypes": 1}, sim.Calls())
}

func TestAllowedInIMDSOnly(t *testing.T) {
	for action, want := range map[string]bool{
		"DescribeInstanceTypes":           true,
		"DescribeSubnets":                 true,
		"DescribeInstances":               true,
		"DescribeNetworkInterfaces":       false,
		"CreateNetworkInterface":          false,
		"AttachNetworkInterface":          false,
		"ModifyNetworkInterfaceAttribute": false,
		"AssignPrivateIpAddresses":        false,
		"UnassignPrivateIpAddresses":      false,
		"DetachNetworkInterface":          false,
		"DeleteNetworkInterface":          false,
		"CreateTags":                      false,
		"":                                false,
	} {
		assert.Equal(t, want, allowedInIMDSOnly(action), action)
	}
}

package awsutils

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func TestAssignAndUnassignIPs(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	ctx := context.Background()
	eni := sim.PrimaryENI()
	subnet := netip.MustParsePrefix("10.0.0.0/20")

	first, err := c.AssignIPs(ctx, eni, 3)
	require.NoError(t, err)
	require.Len(t, first, 3)
	more, err := c.AssignIPs(ctx, eni, 2)
	require.NoError(t, err)
	require.Len(t, more, 2)
	all := append(append([]netip.Addr(nil), first...), more...)
	for _, ip := range all {
		assert.True(t, subnet.Contains(ip), "%s outside the subnet", ip)
		assert.NotEqual(t, c.Identity.PrimaryIP, ip)
	}
	assert.ElementsMatch(t, all, mustSimENI(t, sim, eni).SecondaryIPs)

	require.NoError(t, c.UnassignIPs(ctx, eni, first[:2]))
	assert.ElementsMatch(t, append([]netip.Addr{first[2]}, more...), mustSimENI(t, sim, eni).SecondaryIPs)

	// The ENI view agrees.
	enis, err := c.DescribeENIs(ctx, []string{eni})
	require.NoError(t, err)
	requireMatchesSim(t, sim, enis[0])

	// Unassigning an address the ENI does not hold fails and changes nothing.
	err = c.UnassignIPs(ctx, eni, first[:1])
	require.Error(t, err)
	assert.Equal(t, ec2sim.CodeInvalidParameterValue, asAPIError(t, err).Code)
	assert.Len(t, mustSimENI(t, sim, eni).SecondaryIPs, 3)
}

func TestAssignAndUnassignPrefixes(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	ctx := context.Background()
	eni := sim.PrimaryENI()
	subnet := netip.MustParsePrefix("10.0.0.0/20")

	got, err := c.AssignPrefixes(ctx, eni, 3)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for _, p := range got {
		assert.Equal(t, 28, p.Bits())
		assert.Equal(t, p.Masked(), p, "aligned /28")
		assert.True(t, subnet.Contains(p.Addr()))
		assert.False(t, p.Contains(c.Identity.PrimaryIP))
	}
	assert.ElementsMatch(t, got, mustSimENI(t, sim, eni).Prefixes)

	require.NoError(t, c.UnassignPrefixes(ctx, eni, got[1:]))
	assert.Equal(t, got[:1], mustSimENI(t, sim, eni).Prefixes)

	imds, err := c.AttachedENIs(ctx)
	require.NoError(t, err)
	require.Len(t, imds, 1)
	assert.Equal(t, got[:1], imds[0].Prefixes)
}

func TestAddressCallsWithNothingToDo(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	ctx := context.Background()
	eni := sim.PrimaryENI()
	tests := []struct {
		name string
		call func() (n int, err error)
	}{
		{"AssignIPs 0", func() (int, error) { r, err := c.AssignIPs(ctx, eni, 0); return len(r), err }},
		{"AssignIPs -1", func() (int, error) { r, err := c.AssignIPs(ctx, eni, -1); return len(r), err }},
		{"AssignPrefixes 0", func() (int, error) { r, err := c.AssignPrefixes(ctx, eni, 0); return len(r), err }},
		{"AssignPrefixes -3", func() (int, error) { r, err := c.AssignPrefixes(ctx, eni, -3); return len(r), err }},
		{"UnassignIPs nil", func() (int, error) { return 0, c.UnassignIPs(ctx, eni, nil) }},
		{"UnassignIPs empty", func() (int, error) { return 0, c.UnassignIPs(ctx, eni, []netip.Addr{}) }},
		{"UnassignPrefixes nil", func() (int, error) { return 0, c.UnassignPrefixes(ctx, eni, nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim.ResetCalls()
			n, err := tt.call()
			require.NoError(t, err)
			assert.Zero(t, n)
			assert.Empty(t, sim.Calls(), "no EC2 call")
		})
	}
}

func TestAddressLimit(t *testing.T) {
	// m5.large: 10 IPv4 slots per ENI, the primary address included; each
	// /28 prefix takes one slot.
	tests := []struct {
		name   string
		setup  int // secondary IPs added behind the API's back first
		assign func(c *Client, eni string) error
	}{
		{"IPs beyond the limit", 0, func(c *Client, eni string) error {
			_, err := c.AssignIPs(context.Background(), eni, 10)
			return err
		}},
		{"one IP too many", 9, func(c *Client, eni string) error {
			_, err := c.AssignIPs(context.Background(), eni, 1)
			return err
		}},
		{"prefixes beyond the limit", 0, func(c *Client, eni string) error {
			_, err := c.AssignPrefixes(context.Background(), eni, 10)
			return err
		}},
		{"prefix on a full ENI", 9, func(c *Client, eni string) error {
			_, err := c.AssignPrefixes(context.Background(), eni, 1)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, c := simClient(t, ec2sim.Config{}, Options{})
			eni := sim.PrimaryENI()
			if tt.setup > 0 {
				_, err := sim.AddSecondaryIPs(eni, tt.setup)
				require.NoError(t, err)
			}
			before := mustSimENI(t, sim, eni)
			sim.ResetCalls()
			err := tt.assign(c, eni)
			onlyClass(t, err, ErrAddressLimit)
			ae := asAPIError(t, err)
			assert.Equal(t, "AssignPrivateIpAddresses", ae.Action)
			assert.Equal(t, ec2sim.CodePrivateIPAddressLimitExceeded, ae.Code)
			assert.Equal(t, 1, callsFor(sim, "AssignPrivateIpAddresses"), "not retried")
			assert.Equal(t, before, mustSimENI(t, sim, eni), "nothing assigned")
		})
	}

	t.Run("AllocENI beyond the limit", func(t *testing.T) {
		sim, c := simClient(t, ec2sim.Config{}, Options{})
		_, err := c.AllocENI(context.Background(), AllocOptions{IPs: 10})
		onlyClass(t, err, ErrAddressLimit)
		assert.Len(t, sim.ENIs(), 1)
	})
}

func TestSubnetExhausted(t *testing.T) {
	ops := []struct {
		name string
		call func(c *Client, eni string) error
	}{
		{"AssignIPs", func(c *Client, eni string) error {
			_, err := c.AssignIPs(context.Background(), eni, 1)
			return err
		}},
		{"AssignPrefixes", func(c *Client, eni string) error {
			_, err := c.AssignPrefixes(context.Background(), eni, 1)
			return err
		}},
		{"AllocENI", func(c *Client, _ string) error {
			_, err := c.AllocENI(context.Background(), AllocOptions{IPs: 1})
			return err
		}},
	}

	t.Run("switched off subnet", func(t *testing.T) {
		for _, op := range ops {
			t.Run(op.name, func(t *testing.T) {
				sim, c := simClient(t, ec2sim.Config{}, Options{})
				sim.SetSubnetExhausted(c.Identity.SubnetID, true)
				err := op.call(c, sim.PrimaryENI())
				onlyClass(t, err, ErrSubnetExhausted)
				assert.Equal(t, ec2sim.CodeInsufficientFreeAddresses, asAPIError(t, err).Code)
				assert.Len(t, sim.ENIs(), 1)
				assert.Empty(t, mustSimENI(t, sim, sim.PrimaryENI()).SecondaryIPs)

				sim.SetSubnetExhausted(c.Identity.SubnetID, false)
				require.NoError(t, op.call(c, sim.PrimaryENI()), "works again once the subnet has room")
			})
		}
	})

	t.Run("really full /28 subnet", func(t *testing.T) {
		// 16 addresses, 5 reserved by AWS, 1 the primary's: 10 left.
		sim, c := simClient(t, ec2sim.Config{
			InstanceType: "m5.xlarge", // 15 per ENI, so the subnet runs out first
			Subnets:      []ec2sim.SubnetConfig{{CIDR: "10.0.0.0/28"}},
		}, Options{})
		_, err := c.AssignIPs(context.Background(), sim.PrimaryENI(), 11)
		onlyClass(t, err, ErrSubnetExhausted)
		assert.Equal(t, ec2sim.CodeInsufficientFreeAddresses, asAPIError(t, err).Code)
		ips, err := c.AssignIPs(context.Background(), sim.PrimaryENI(), 10)
		require.NoError(t, err)
		assert.Len(t, ips, 10)
	})

	t.Run("no aligned /28 left", func(t *testing.T) {
		// A /27 has free addresses but each of its /28s holds a reserved one.
		sim, c := simClient(t, ec2sim.Config{Subnets: []ec2sim.SubnetConfig{{CIDR: "10.0.0.0/27"}}}, Options{})
		_, err := c.AssignPrefixes(context.Background(), sim.PrimaryENI(), 1)
		onlyClass(t, err, ErrSubnetExhausted)
		assert.Equal(t, ec2sim.CodeInsufficientCidrBlocks, asAPIError(t, err).Code)
	})
}

package awsutils

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func TestDescribeInstanceTypeLimits(t *testing.T) {
	_, c := simClient(t, ec2sim.Config{}, Options{})
	tests := []struct {
		typ  string
		want TypeLimits
	}{
		{"m5.large", TypeLimits{ENIs: 3, IPv4PerENI: 10, Hypervisor: "nitro", CardENIs: []int{3}}},
		{"t3.nano", TypeLimits{ENIs: 2, IPv4PerENI: 2, Hypervisor: "nitro", CardENIs: []int{2}}},
		{"m5.4xlarge", TypeLimits{ENIs: 8, IPv4PerENI: 30, Hypervisor: "nitro", CardENIs: []int{8}}},
		// Two network cards of 8: ENIs is the default card's count, and
		// each card has its own.
		{"c6in.32xlarge", TypeLimits{ENIs: 8, IPv4PerENI: 50, Hypervisor: "nitro", CardENIs: []int{8, 8}}},
		{"p4d.24xlarge", TypeLimits{ENIs: 15, IPv4PerENI: 50, Hypervisor: "nitro", CardENIs: []int{15, 15, 15, 15}}},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			got, err := c.DescribeInstanceTypeLimits(context.Background(), tt.typ)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	t.Run("unknown type", func(t *testing.T) {
		_, err := c.DescribeInstanceTypeLimits(context.Background(), "x9.huge")
		onlyClass(t, err, nil)
		ae := asAPIError(t, err)
		assert.Equal(t, "DescribeInstanceTypes", ae.Action)
		assert.Equal(t, ec2sim.CodeInvalidInstanceType, ae.Code)
	})
}

func TestSubnetCIDRIsCached(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{InstanceType: "m5.large"}, Options{})
	subnet := sim.SubnetIDs()[0]
	p, err := c.SubnetCIDR(context.Background(), subnet)
	require.NoError(t, err)
	assert.True(t, p.IsValid())
	_, err = c.SubnetCIDR(context.Background(), subnet)
	require.NoError(t, err)
	assert.Equal(t, 1, sim.Calls()["DescribeSubnets"])
	_, err = c.SubnetCIDR(context.Background(), "subnet-nope")
	assert.Error(t, err)
}

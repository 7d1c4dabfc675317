package awsutils

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// A subnet and security groups named for a new ENI (custom networking's
// ENIConfig): used as given when the subnet is in the instance's AZ; a
// subnet of another AZ, an unknown subnet or an unknown group fail with
// ErrPlacement and leave no ENI behind.
func TestAllocENIInNamedSubnet(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{SecurityGroupIDs: []string{"sg-0sim00000001", "sg-0pods000000001"},
		Subnets: []ec2sim.SubnetConfig{
			{ID: "subnet-0primary", CIDR: "10.0.0.0/24"},
			{ID: "subnet-0pods", CIDR: "10.0.64.0/20"},
			{ID: "subnet-0otheraz", CIDR: "10.0.96.0/20", AZ: "us-west-2c"},
		}}, Options{})
	ctx := context.Background()

	eni, err := c.AllocENI(ctx, AllocOptions{SubnetID: "subnet-0pods", SecurityGroups: []string{"sg-0pods000000001"}, IPs: 3})
	require.NoError(t, err)
	truth := mustSimENI(t, sim, eni.ID)
	assert.Equal(t, "subnet-0pods", truth.SubnetID)
	assert.Equal(t, []string{"sg-0pods000000001"}, truth.SecurityGroupIDs)
	assert.Len(t, truth.SecondaryIPs, 3)

	for _, tc := range []struct {
		name string
		o    AllocOptions
		says string
	}{
		{"other AZ", AllocOptions{SubnetID: "subnet-0otheraz", IPs: 1}, "us-west-2c"},
		{"unknown subnet", AllocOptions{SubnetID: "subnet-0doesnotexist1", IPs: 1}, "subnet-0doesnotexist1"},
		{"unknown group", AllocOptions{SubnetID: "subnet-0pods", SecurityGroups: []string{"sg-0doesnotexist01"}, IPs: 1}, "sg-0doesnotexist01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(sim.ENIs())
			_, err := c.AllocENI(ctx, tc.o)
			require.ErrorIs(t, err, ErrPlacement)
			assert.Contains(t, err.Error(), tc.says)
			assert.Len(t, sim.ENIs(), before, "no ENI left behind")
		})
	}
}

package awsutils

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// TestExcludedSubnets: the subnets' current tags, through DescribeSubnets,
// decide; a tag added later is seen at the next call; a failure is an error.
func TestExcludedSubnets(t *testing.T) {
	ctx := context.Background()
	sim, c := simClient(t, ec2sim.Config{Subnets: discoverySubnets()}, Options{ClusterName: "blue"})
	ids := []string{"subnet-0primary", "subnet-0off", "subnet-0red", "subnet-0big", "subnet-0small"}
	got, err := c.ExcludedSubnets(ctx, ids)
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"subnet-0primary": false, "subnet-0off": true, "subnet-0red": true,
		"subnet-0big": false, "subnet-0small": false}, got)

	_, err = c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"subnet-0big"},
		Tags: []types.Tag{{Key: aws.String(TagSubnetCNIRole), Value: aws.String("0")}}})
	require.NoError(t, err)
	got, err = c.ExcludedSubnets(ctx, []string{"subnet-0big"})
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"subnet-0big": true}, got)

	got, err = c.ExcludedSubnets(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, got, "no subnet, no call")

	sim.SetUnauthorized("DescribeSubnets", true)
	_, err = c.ExcludedSubnets(ctx, []string{"subnet-0big"})
	require.Error(t, err)
}

// TestNewENIsExclusionCheckUsesTheDiscoveryListing: the check right after
// subnet discovery chose a subnet takes the listing's tags (one
// DescribeSubnets per new ENI); once the listing is a minute old, EC2 is
// asked again.
func TestNewENIsExclusionCheckUsesTheDiscoveryListing(t *testing.T) {
	ctx := context.Background()
	sim, c := simClient(t, ec2sim.Config{Subnets: discoverySubnets()}, Options{ClusterName: "blue"})
	eni, err := c.AllocENI(ctx, AllocOptions{IPs: 1, SubnetDiscovery: true})
	require.NoError(t, err)
	sim.ResetCalls()
	got, err := c.ExcludedSubnets(ctx, []string{eni.SubnetID})
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{eni.SubnetID: false}, got)
	assert.Zero(t, callsFor(sim, "DescribeSubnets"), "the discovery listing answered")

	_, err = c.ExcludedSubnets(ctx, []string{"subnet-0nosuch"})
	assert.Error(t, err, "an ID the listing lacks is asked of EC2")
	assert.Equal(t, 1, callsFor(sim, "DescribeSubnets"))

	c.subnets.mu.Lock()
	c.subnets.listedAt = c.subnets.listedAt.Add(-listingFresh)
	c.subnets.mu.Unlock()
	_, err = c.ExcludedSubnets(ctx, []string{eni.SubnetID})
	require.NoError(t, err)
	assert.Equal(t, 2, callsFor(sim, "DescribeSubnets"), "a stale listing is not used")
}

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

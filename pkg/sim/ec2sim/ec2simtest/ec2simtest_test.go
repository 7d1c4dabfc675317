package ec2simtest_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// A client built from the SDK's defaults after PointSDKAtSim reaches the
// simulator for both EC2 and IMDS, and the zero seed replays.
func TestStartAndPointSDK(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	ec2simtest.PointSDKAtSim(t, sim)
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(sim.Region()))
	require.NoError(t, err)

	id, err := imds.NewFromConfig(cfg).GetMetadata(ctx, &imds.GetMetadataInput{Path: "instance-id"})
	require.NoError(t, err)
	require.NotNil(t, id.Content)
	_ = id.Content.Close()

	out, err := ec2.NewFromConfig(cfg).DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{})
	require.NoError(t, err)
	require.Len(t, out.NetworkInterfaces, 1, "a fresh instance has its primary ENI only")

	again := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	require.Equal(t, sim.PrimaryENI(), again.PrimaryENI(), "the default seed replays IDs")
}

package ec2sim_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// TestEnvironmentEndpoints shows that a program using the SDK's defaults
// (as ipamd does) needs no code to use the simulator: the standard
// environment variables printed by cmd/tools/ec2-simulator are enough.
func TestEnvironmentEndpoints(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	t.Setenv("AWS_ENDPOINT_URL_EC2", sim.EC2Endpoint())
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", sim.IMDSEndpoint())
	t.Setenv("AWS_REGION", "us-west-2")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_PROFILE", "")

	cfg, err := config.LoadDefaultConfig(ctx)
	require.NoError(t, err)

	md := imds.NewFromConfig(cfg)
	region, err := md.GetRegion(ctx, &imds.GetRegionInput{})
	require.NoError(t, err)
	require.Equal(t, "us-west-2", region.Region)
	require.Equal(t, sim.InstanceID(), mustMetadata(t, md, "instance-id"))

	out, err := ec2.NewFromConfig(cfg).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
	require.NoError(t, err)
	require.Len(t, out.Reservations, 1)
	require.Equal(t, 1, sim.Calls()["DescribeInstances"])
}

package ec2simtest_test

import (
	"context"
	"io"
	"net/netip"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
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

// An IPv6 node's IMDS serves the node IPv6 and the VPC block, and its
// primary ENI takes a /80 from the node subnet's /64.
func TestIPv6Node(t *testing.T) {
	sim := ec2simtest.Start(t, ec2simtest.IPv6Node(ec2sim.Config{}))
	ec2simtest.PointSDKAtSim(t, sim)
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(sim.Region()))
	require.NoError(t, err)

	out, err := imds.NewFromConfig(cfg).GetMetadata(ctx, &imds.GetMetadataInput{Path: "ipv6"})
	require.NoError(t, err)
	b, err := io.ReadAll(out.Content)
	require.NoError(t, err)
	_ = out.Content.Close()
	node := netip.MustParseAddr(string(b))
	require.True(t, netip.MustParsePrefix(ec2simtest.IPv6SubnetCIDR).Contains(node))
	require.Equal(t, ec2simtest.IPv6VPCCIDR, sim.VPCIPv6CIDR())

	as, err := ec2.NewFromConfig(cfg).AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(sim.PrimaryENI()), Ipv6PrefixCount: aws.Int32(1),
	})
	require.NoError(t, err)
	require.Len(t, as.AssignedIpv6Prefixes, 1)
	for _, e := range sim.ENIs() {
		require.Equal(t, []netip.Addr{node}, e.IPv6Addrs)
		require.Equal(t, as.AssignedIpv6Prefixes[0], e.IPv6Prefixes[0].String())
	}

	// A non-default VPC block gets its default subnet, with the /64.
	other := ec2simtest.IPv6Node(ec2sim.Config{VPCCIDR: "192.168.0.0/16"})
	require.Equal(t, "192.168.0.0/20", other.Subnets[0].CIDR)
	require.Equal(t, ec2simtest.IPv6SubnetCIDR, other.Subnets[0].IPv6CIDR)
	_, err = ec2sim.New(other)
	require.NoError(t, err)
}

// A client built from the SDK's defaults after PointSDKAtNode acts as that
// node of the account: its IMDS, its access key, its own instance.
func TestPointSDKAtNode(t *testing.T) {
	acct := ec2simtest.StartAccount(t, ec2sim.AccountConfig{})
	_, _ = ec2simtest.AddNode(t, acct, ec2sim.Config{})
	node, creds := ec2simtest.AddNode(t, acct, ec2sim.Config{})
	ec2simtest.PointSDKAtNode(t, node, creds)
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(node.Region()))
	require.NoError(t, err)

	out, err := ec2.NewFromConfig(cfg).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	require.NoError(t, err)
	require.Equal(t, node.InstanceID(), aws.ToString(out.Reservations[0].Instances[0].InstanceId))
	require.Equal(t, 1, node.Calls()["DescribeInstances"])
	require.Equal(t, 2, acct.Nodes())
}

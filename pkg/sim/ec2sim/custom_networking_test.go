package ec2sim_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// customNetworkingVPC is a node in 10.0.0.0/16 whose pods live in a
// secondary block, 100.64.0.0/16, with their own security groups: one pod
// subnet per AZ, as ENIConfigs name them.
func customNetworkingVPC() ec2sim.Config {
	return ec2sim.Config{
		AttachDelay:       20 * time.Millisecond,
		SecondaryVPCCIDRs: []string{"100.64.0.0/16"},
		SecurityGroupIDs:  []string{"sg-0node", "sg-0podsa", "sg-0podsb"},
		Subnets: []ec2sim.SubnetConfig{
			{CIDR: "10.0.0.0/24"},
			{ID: "subnet-0podsa", CIDR: "100.64.0.0/19"},
			{ID: "subnet-0podsb", CIDR: "100.64.32.0/19", AZ: "us-west-2b"},
		},
	}
}

// TestSecondaryVPCBlocks: IMDS, DescribeVpcs and DescribeSubnets all show
// the secondary block; one associated later shows at once.
func TestSecondaryVPCBlocks(t *testing.T) {
	sim := ec2simtest.Start(t, customNetworkingVPC())
	c := ec2Client(t, sim)
	md := imdsClient(sim)
	base := "network/interfaces/macs/" + eniState(t, sim, sim.PrimaryENI()).MAC + "/"

	require.Equal(t, "10.0.0.0/16", mustMetadata(t, md, base+"vpc-ipv4-cidr-block"))
	require.Equal(t, "10.0.0.0/16\n100.64.0.0/16", mustMetadata(t, md, base+"vpc-ipv4-cidr-blocks"))

	vpcBlocks := func() []string {
		out, err := c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{sim.VPCID()}})
		require.NoError(t, err)
		require.Len(t, out.Vpcs, 1)
		v := out.Vpcs[0]
		require.Equal(t, "10.0.0.0/16", aws.ToString(v.CidrBlock), "the primary block")
		var cidrs []string
		for _, a := range v.CidrBlockAssociationSet {
			require.Equal(t, types.VpcCidrBlockStateCodeAssociated, a.CidrBlockState.State)
			require.True(t, strings.HasPrefix(aws.ToString(a.AssociationId), "vpc-cidr-assoc-"))
			cidrs = append(cidrs, aws.ToString(a.CidrBlock))
		}
		return cidrs
	}
	require.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16"}, vpcBlocks())
	out, err := c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []types.Filter{
		{Name: aws.String("cidr-block-association.cidr-block"), Values: []string{"100.64.0.0/16"}}}})
	require.NoError(t, err)
	require.Len(t, out.Vpcs, 1)
	out, err = c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []types.Filter{
		{Name: aws.String("cidr"), Values: []string{"100.64.0.0/16"}}}})
	require.NoError(t, err)
	require.Empty(t, out.Vpcs, "cidr matches the primary block only")
	_, err = c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{"vpc-0other"}})
	requireCode(t, err, "InvalidVpcID.NotFound")
	require.Contains(t, err.Error(), "The vpc ID 'vpc-0other' does not exist")

	// Pod subnets: found by VPC and AZ like any other, addresses from the
	// secondary block.
	sn, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{sim.VPCID()}},
		{Name: aws.String("availability-zone"), Values: []string{"us-west-2a"}},
		{Name: aws.String("cidr-block"), Values: []string{"100.64.*"}},
	}})
	require.NoError(t, err)
	require.Len(t, sn.Subnets, 1)
	require.Equal(t, "subnet-0podsa", aws.ToString(sn.Subnets[0].SubnetId))
	require.Equal(t, int32(8192-5), aws.ToInt32(sn.Subnets[0].AvailableIpAddressCount))
	// Unknown IDs: every one is named, in one error, as EC2 does.
	_, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0podsa", "subnet-0nope", "subnet-0gone"}})
	requireCode(t, err, "InvalidSubnetID.NotFound")
	require.Contains(t, err.Error(), "The subnet ID 'subnet-0nope,subnet-0gone' does not exist")

	// An operator associates another block and a subnet in it.
	require.NoError(t, sim.AssociateVPCCIDR("100.65.0.0/16"))
	require.Equal(t, "10.0.0.0/16\n100.64.0.0/16\n100.65.0.0/16", mustMetadata(t, md, base+"vpc-ipv4-cidr-blocks"))
	require.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16", "100.65.0.0/16"}, vpcBlocks())
	id, err := sim.AddSubnet(ec2sim.SubnetConfig{CIDR: "100.65.0.0/24"})
	require.NoError(t, err)
	eni, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(id)})
	require.NoError(t, err)
	require.True(t, netip.MustParsePrefix("100.65.0.0/24").Contains(netip.MustParseAddr(aws.ToString(eni.NetworkInterface.PrivateIpAddress))))

	var ae *ec2sim.APIError
	require.ErrorAs(t, sim.AssociateVPCCIDR("172.16.0.0/16"), &ae, "a second private range")
	require.Equal(t, ec2sim.CodeInvalidVpcRange, ae.Code)
	require.ErrorAs(t, sim.AssociateVPCCIDR("100.64.128.0/20"), &ae, "overlaps")
	_, err = sim.AddSubnet(ec2sim.SubnetConfig{CIDR: "100.66.0.0/24"})
	require.ErrorAs(t, err, &ae, "outside every block")
	_, err = sim.AddSubnet(ec2sim.SubnetConfig{CIDR: "100.64.0.0/24"})
	require.ErrorAs(t, err, &ae, "overlaps subnet-0podsa")
}

// TestENIInPodSubnet walks ipamd's custom-networking ENI: created in the
// ENIConfig's subnet with the ENIConfig's groups, attached, and seen in
// EC2 and IMDS with both.
func TestENIInPodSubnet(t *testing.T) {
	sim := ec2simtest.Start(t, customNetworkingVPC())
	c := ec2Client(t, sim)
	md := imdsClient(sim)

	created, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId:                       aws.String("subnet-0podsa"),
		Groups:                         []string{"sg-0podsb", "sg-0podsa"},
		SecondaryPrivateIpAddressCount: aws.Int32(2),
		Description:                    aws.String("aws-K8S-" + sim.InstanceID()),
	})
	require.NoError(t, err)
	id := aws.ToString(created.NetworkInterface.NetworkInterfaceId)
	groupIDs := func(gs []types.GroupIdentifier) []string {
		var out []string
		for _, g := range gs {
			out = append(out, aws.ToString(g.GroupId))
		}
		return out
	}
	require.Equal(t, []string{"sg-0podsa", "sg-0podsb"}, groupIDs(created.NetworkInterface.Groups))
	attID, err := attach(c, sim, id, 1, 0)
	require.NoError(t, err)
	eventually(t, 3*time.Second, func() bool {
		return describeENI(t, c, id).Status == types.NetworkInterfaceStatusInUse
	}, "never attached")

	e := describeENI(t, c, id)
	require.Equal(t, attID, aws.ToString(e.Attachment.AttachmentId))
	require.Equal(t, []string{"sg-0podsa", "sg-0podsb"}, groupIDs(e.Groups))
	require.Equal(t, "subnet-0podsa", aws.ToString(e.SubnetId))
	require.Len(t, e.PrivateIpAddresses, 3)
	pods := netip.MustParsePrefix("100.64.0.0/19")
	for _, a := range e.PrivateIpAddresses {
		require.True(t, pods.Contains(netip.MustParseAddr(aws.ToString(a.PrivateIpAddress))), "%s", aws.ToString(a.PrivateIpAddress))
	}
	byGroup, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("group-id"), Values: []string{"sg-0podsb"}},
		{Name: aws.String("subnet-id"), Values: []string{"subnet-0podsa"}}}})
	require.NoError(t, err)
	require.Len(t, byGroup.NetworkInterfaces, 1)

	base := "network/interfaces/macs/" + aws.ToString(e.MacAddress) + "/"
	require.Equal(t, "sg-0podsa\nsg-0podsb", mustMetadata(t, md, base+"security-group-ids"))
	require.Equal(t, "subnet-0podsa", mustMetadata(t, md, base+"subnet-id"))
	require.Equal(t, "100.64.0.0/19", mustMetadata(t, md, base+"subnet-ipv4-cidr-block"))
	require.Len(t, strings.Fields(mustMetadata(t, md, base+"local-ipv4s")), 3)
	require.Equal(t, "10.0.0.0/16", mustMetadata(t, md, base+"vpc-ipv4-cidr-block"))
	require.Equal(t, "10.0.0.0/16\n100.64.0.0/16", mustMetadata(t, md, base+"vpc-ipv4-cidr-blocks"))
	primaryBase := "network/interfaces/macs/" + eniState(t, sim, sim.PrimaryENI()).MAC + "/"
	require.Equal(t, "sg-0node\nsg-0podsa\nsg-0podsb", mustMetadata(t, md, primaryBase+"security-group-ids"))

	// Groups that do not exist, too many groups, a subnet that does not exist.
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-0podsa"), Groups: []string{"sg-0podsa", "sg-0gone"}})
	requireCode(t, err, "InvalidGroup.NotFound")
	require.Contains(t, err.Error(), "sg-0gone")
	six := []string{"sg-0node", "sg-0podsa", "sg-0podsb", "sg-0x1", "sg-0x2", "sg-0x3"}
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0podsa"), Groups: six})
	requireCode(t, err, "SecurityGroupsPerInterfaceLimitExceeded")
	_, err = c.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String(id), Groups: six})
	requireCode(t, err, "SecurityGroupsPerInterfaceLimitExceeded")
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-0gone"), Groups: []string{"sg-0podsa"}})
	requireCode(t, err, "InvalidSubnetID.NotFound")
	require.Contains(t, err.Error(), "The subnet ID 'subnet-0gone' does not exist")
	requireNoRetries(t, sim)
}

// TestENIInOtherAZ: EC2 makes an ENI in another AZ's subnet but refuses to
// attach it here, naming both zones; the ENI stays available, so the
// caller can delete it.
func TestENIInOtherAZ(t *testing.T) {
	sim := ec2simtest.Start(t, customNetworkingVPC())
	c := ec2Client(t, sim)

	created, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-0podsb"), Groups: []string{"sg-0podsb"}})
	require.NoError(t, err)
	id := aws.ToString(created.NetworkInterface.NetworkInterfaceId)
	require.Equal(t, "us-west-2b", aws.ToString(created.NetworkInterface.AvailabilityZone))

	_, err = attach(c, sim, id, 1, 0)
	requireCode(t, err, "InvalidParameterCombination")
	require.Contains(t, err.Error(), "not in the same availability zone")
	require.Contains(t, err.Error(), id+" is in us-west-2b")
	require.Contains(t, err.Error(), sim.InstanceID()+" is in us-west-2a")

	e := describeENI(t, c, id)
	require.Equal(t, types.NetworkInterfaceStatusAvailable, e.Status)
	require.Nil(t, e.Attachment)
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	require.NoError(t, err)
	require.Equal(t, int32(8192-5), subnetFree(t, c, "subnet-0podsb"), "its address went back")
	requireNoRetries(t, sim)
}

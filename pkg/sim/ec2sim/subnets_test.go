package ec2sim_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// TestSubnetDiscoveryCalls covers what ipamd's subnet discovery and
// leaked-ENI sweep ask of EC2: several subnets per VPC and AZ with tags,
// DescribeSubnets filtered by VPC, AZ and tags with free counts that follow
// use, ENIs made in any of them, and the delete rules.
func TestSubnetDiscoveryCalls(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{DetachDelay: 20 * time.Millisecond, Subnets: []ec2sim.SubnetConfig{
		{CIDR: "10.0.0.0/24"},
		{ID: "subnet-0cnia", CIDR: "10.0.1.0/24", Tags: map[string]string{"kubernetes.io/role/cni": "1"}},
		{ID: "subnet-0cnib", CIDR: "10.0.2.0/25", Tags: map[string]string{
			"kubernetes.io/role/cni": "1", "cni.networking.k8s.aws/cluster/blue": "owned"}},
		{ID: "subnet-0off", CIDR: "10.0.3.0/24", Tags: map[string]string{"kubernetes.io/role/cni": "0"}},
		{ID: "subnet-0otheraz", CIDR: "10.0.4.0/24", AZ: "us-west-2b", Tags: map[string]string{"kubernetes.io/role/cni": "1"}},
	}})
	c := ec2Client(t, sim)

	ids := func(out *ec2.DescribeSubnetsOutput) []string {
		var s []string
		for _, sn := range out.Subnets {
			s = append(s, aws.ToString(sn.SubnetId))
		}
		return s
	}
	vpcAZ := []types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{sim.VPCID()}},
		{Name: aws.String("availability-zone"), Values: []string{sim.AZ()}},
	}
	out, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: vpcAZ})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{sim.SubnetIDs()[0], "subnet-0cnia", "subnet-0cnib", "subnet-0off"}, ids(out))

	out, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: append(vpcAZ,
		types.Filter{Name: aws.String("tag:kubernetes.io/role/cni"), Values: []string{"1"}})})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"subnet-0cnia", "subnet-0cnib"}, ids(out))

	out, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("tag-key"), Values: []string{"cni.networking.k8s.aws/cluster/*"}}}})
	require.NoError(t, err)
	require.Equal(t, []string{"subnet-0cnib"}, ids(out))

	out, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{"vpc-0other"}}}})
	require.NoError(t, err)
	require.Empty(t, out.Subnets)

	// Free counts follow use: an ENI with 4 secondary IPs takes 5, a /28
	// takes 16 more, and deleting the (detached) ENI gives all back.
	require.Equal(t, int32(256-5), subnetFree(t, c, "subnet-0cnia"))
	created, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-0cnia"), SecondaryPrivateIpAddressCount: aws.Int32(4),
		Description: aws.String("aws-K8S-" + sim.InstanceID()),
	})
	require.NoError(t, err)
	id := aws.ToString(created.NetworkInterface.NetworkInterfaceId)
	require.Equal(t, "subnet-0cnia", aws.ToString(created.NetworkInterface.SubnetId))
	require.Equal(t, int32(256-5-5), subnetFree(t, c, "subnet-0cnia"))
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id), Ipv4PrefixCount: aws.Int32(1)})
	require.NoError(t, err)
	require.Equal(t, int32(256-5-5-16), subnetFree(t, c, "subnet-0cnia"))

	// Tags on an existing ENI, then a filter on them.
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{
		{Key: aws.String("node.k8s.amazonaws.com/instance_id"), Value: aws.String(sim.InstanceID())}}})
	require.NoError(t, err)
	enis, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("tag-key"), Values: []string{"node.k8s.amazonaws.com/instance_id"}},
		{Name: aws.String("status"), Values: []string{"available"}},
		{Name: aws.String("vpc-id"), Values: []string{sim.VPCID()}},
	}})
	require.NoError(t, err)
	require.Len(t, enis.NetworkInterfaces, 1)
	require.Equal(t, id, aws.ToString(enis.NetworkInterfaces[0].NetworkInterfaceId))

	// Attached, attaching or detaching: EC2 refuses the delete with the
	// generic code and says why in the text.
	attID, err := attach(c, sim, id, 1, 0)
	require.NoError(t, err)
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	requireCode(t, err, "InvalidParameterValue")
	require.Contains(t, err.Error(), "Network interface '"+id+"' is currently in use.")
	_, err = c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attID)})
	require.NoError(t, err)
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	requireCode(t, err, "InvalidParameterValue") // still detaching
	eventually(t, 3*time.Second, func() bool {
		return describeENI(t, c, id).Status == types.NetworkInterfaceStatusAvailable
	}, "ENI never detached")
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	require.NoError(t, err)
	require.Equal(t, int32(256-5), subnetFree(t, c, "subnet-0cnia"))
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	requireCode(t, err, "InvalidNetworkInterfaceID.NotFound")

	// An ENI in another AZ can be made but not attached here.
	other, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0otheraz")})
	require.NoError(t, err)
	_, err = attach(c, sim, aws.ToString(other.NetworkInterface.NetworkInterfaceId), 1, 0)
	requireCode(t, err, "InvalidParameterCombination")
}

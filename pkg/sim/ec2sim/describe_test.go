package ec2sim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func TestDescribeInstances(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)

	out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
	require.NoError(t, err)
	require.Len(t, out.Reservations, 1)
	require.Len(t, out.Reservations[0].Instances, 1)
	inst := out.Reservations[0].Instances[0]
	require.Equal(t, sim.InstanceID(), aws.ToString(inst.InstanceId))
	require.Equal(t, types.InstanceTypeM5Large, inst.InstanceType)
	require.Equal(t, "us-west-2a", aws.ToString(inst.Placement.AvailabilityZone))
	require.Len(t, inst.NetworkInterfaces, 1)
	ni := inst.NetworkInterfaces[0]
	require.Equal(t, sim.PrimaryENI(), aws.ToString(ni.NetworkInterfaceId))
	require.Equal(t, int32(0), aws.ToInt32(ni.Attachment.DeviceIndex))
	require.Equal(t, int32(0), aws.ToInt32(ni.Attachment.NetworkCardIndex))
	require.Equal(t, types.AttachmentStatusAttached, ni.Attachment.Status)
	require.NotNil(t, ni.Attachment.AttachTime)
	require.Equal(t, aws.ToString(inst.PrivateIpAddress), aws.ToString(ni.PrivateIpAddress))
	require.Len(t, ni.PrivateIpAddresses, 1)
	require.True(t, aws.ToBool(ni.PrivateIpAddresses[0].Primary))

	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
	requireCode(t, err, "InvalidInstanceID.NotFound")
	require.Contains(t, err.Error(), "'i-0123456789abcdef0'")
	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"bogus"}})
	requireCode(t, err, "InvalidInstanceID.Malformed")
}

func TestDescribeInstanceTypes(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "c6in.32xlarge"})
	c := ec2Client(t, sim)

	out, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{
		InstanceTypes: []types.InstanceType{"m5.large", "c6in.32xlarge"},
	})
	require.NoError(t, err)
	require.Len(t, out.InstanceTypes, 2)
	byType := map[types.InstanceType]types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		byType[it.InstanceType] = it
	}
	m5 := byType["m5.large"]
	require.Equal(t, int32(3), aws.ToInt32(m5.NetworkInfo.MaximumNetworkInterfaces))
	require.Equal(t, int32(10), aws.ToInt32(m5.NetworkInfo.Ipv4AddressesPerInterface))
	require.Equal(t, int32(1), aws.ToInt32(m5.NetworkInfo.MaximumNetworkCards))
	require.Equal(t, int32(0), aws.ToInt32(m5.NetworkInfo.DefaultNetworkCardIndex))
	require.Equal(t, types.InstanceTypeHypervisorNitro, m5.Hypervisor)
	require.False(t, aws.ToBool(m5.BareMetal))

	c6 := byType["c6in.32xlarge"]
	require.Equal(t, int32(16), aws.ToInt32(c6.NetworkInfo.MaximumNetworkInterfaces))
	require.Equal(t, int32(2), aws.ToInt32(c6.NetworkInfo.MaximumNetworkCards))
	require.Len(t, c6.NetworkInfo.NetworkCards, 2)
	require.Equal(t, int32(1), aws.ToInt32(c6.NetworkInfo.NetworkCards[1].NetworkCardIndex))
	require.Equal(t, int32(8), aws.ToInt32(c6.NetworkInfo.NetworkCards[1].MaximumNetworkInterfaces))

	_, err = c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.huge"}})
	requireCode(t, err, "InvalidInstanceType")
}

func TestDescribeSubnets(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{Subnets: []ec2sim.SubnetConfig{
		{CIDR: "10.0.0.0/20"},
		{ID: "subnet-0cni", CIDR: "10.0.16.0/24", Tags: map[string]string{"kubernetes.io/role/cni": "1"}},
		{ID: "subnet-0otheraz", CIDR: "10.0.32.0/24", AZ: "us-west-2b"},
	}})
	c := ec2Client(t, sim)

	out, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{sim.VPCID()}},
		{Name: aws.String("availability-zone"), Values: []string{"us-west-2a"}},
	}})
	require.NoError(t, err)
	require.Len(t, out.Subnets, 2)
	got := map[string]types.Subnet{}
	for _, sn := range out.Subnets {
		got[aws.ToString(sn.SubnetId)] = sn
	}
	primary := got[sim.SubnetIDs()[0]]
	require.Equal(t, "10.0.0.0/20", aws.ToString(primary.CidrBlock))
	// 4096 addresses, 5 reserved by AWS, 1 used by the primary ENI.
	require.Equal(t, int32(4096-5-1), aws.ToInt32(primary.AvailableIpAddressCount))
	cni := got["subnet-0cni"]
	require.Equal(t, int32(256-5), aws.ToInt32(cni.AvailableIpAddressCount))
	require.Len(t, cni.Tags, 1)
	require.Equal(t, "kubernetes.io/role/cni", aws.ToString(cni.Tags[0].Key))

	out, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("tag-key"), Values: []string{"kubernetes.io/role/*"}},
	}})
	require.NoError(t, err)
	require.Len(t, out.Subnets, 1)

	out, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0otheraz"}})
	require.NoError(t, err)
	require.Equal(t, "us-west-2b", aws.ToString(out.Subnets[0].AvailabilityZone))

	_, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0nope"}})
	requireCode(t, err, "InvalidSubnetID.NotFound")
	_, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("no-such-filter"), Values: []string{"x"}},
	}})
	requireCode(t, err, "InvalidParameterValue")
}

func TestDescribeNetworkInterfacesFiltersAndPagination(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]

	const tagged = 12
	var ids []string
	for i := range tagged {
		out, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
			SubnetId:    aws.String(subnet),
			Description: aws.String("aws-K8S-" + sim.InstanceID()),
			TagSpecifications: []types.TagSpecification{{
				ResourceType: types.ResourceTypeNetworkInterface,
				Tags: []types.Tag{
					{Key: aws.String("node.k8s.amazonaws.com/instance_id"), Value: aws.String(sim.InstanceID())},
					{Key: aws.String("cluster.k8s.amazonaws.com/name"), Value: aws.String(fmt.Sprintf("c%d", i%2))},
				},
			}},
		})
		require.NoError(t, err)
		ids = append(ids, aws.ToString(out.NetworkInterface.NetworkInterfaceId))
	}
	// One untagged extra that the tag filter must skip.
	_, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnet)})
	require.NoError(t, err)

	leakedSweep := []types.Filter{
		{Name: aws.String("tag-key"), Values: []string{"node.k8s.amazonaws.com/instance_id"}},
		{Name: aws.String("status"), Values: []string{"available"}},
		{Name: aws.String("vpc-id"), Values: []string{sim.VPCID()}},
	}
	pager := ec2.NewDescribeNetworkInterfacesPaginator(c, &ec2.DescribeNetworkInterfacesInput{
		Filters: leakedSweep, MaxResults: aws.Int32(5),
	})
	var seen []string
	pages := 0
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		require.NoError(t, err)
		pages++
		require.LessOrEqual(t, len(page.NetworkInterfaces), 5)
		for _, ni := range page.NetworkInterfaces {
			seen = append(seen, aws.ToString(ni.NetworkInterfaceId))
			require.Len(t, ni.TagSet, 2)
			require.True(t, strings.HasPrefix(aws.ToString(ni.Description), "aws-K8S-"))
		}
	}
	require.Equal(t, 3, pages)
	require.ElementsMatch(t, ids, seen)

	out, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: append(leakedSweep,
		types.Filter{Name: aws.String("tag:cluster.k8s.amazonaws.com/name"), Values: []string{"c1"}})})
	require.NoError(t, err)
	require.Len(t, out.NetworkInterfaces, tagged/2)

	out, err = c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("attachment.instance-id"), Values: []string{sim.InstanceID()}},
	}})
	require.NoError(t, err)
	require.Len(t, out.NetworkInterfaces, 1)
	require.Equal(t, sim.PrimaryENI(), aws.ToString(out.NetworkInterfaces[0].NetworkInterfaceId))

	// By ID, with one unknown: the error quotes the first unknown ID, as
	// ipamd's DescribeAllENIs parses it.
	_, err = c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
		NetworkInterfaceIds: []string{ids[0], "eni-0123"},
	})
	requireCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	require.Contains(t, err.Error(), "'eni-0123'")

	_, err = c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
		NetworkInterfaceIds: ids[:1], MaxResults: aws.Int32(5),
	})
	requireCode(t, err, "InvalidParameterCombination")
	_, err = c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(2)})
	requireCode(t, err, "InvalidParameterValue")
	_, err = c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
		MaxResults: aws.Int32(5), NextToken: aws.String("not-a-token"),
	})
	requireCode(t, err, "InvalidParameterValue")
	requireNoRetries(t, sim)
}

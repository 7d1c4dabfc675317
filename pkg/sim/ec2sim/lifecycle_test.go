package ec2sim_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func subnetFree(t *testing.T, c *ec2.Client, id string) int32 {
	t.Helper()
	out, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{id}})
	require.NoError(t, err)
	return aws.ToInt32(out.Subnets[0].AvailableIpAddressCount)
}

func describeENI(t *testing.T, c *ec2.Client, id string) types.NetworkInterface {
	t.Helper()
	out, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	require.NoError(t, err)
	require.Len(t, out.NetworkInterfaces, 1)
	return out.NetworkInterfaces[0]
}

func imdsMACs(t *testing.T, c *imds.Client) []string {
	t.Helper()
	return strings.Fields(strings.ReplaceAll(mustMetadata(t, c, "network/interfaces/macs"), "/", ""))
}

// TestENILifecycle walks one ENI through everything ipamd does to it and
// checks EC2, IMDS and the subnet's free-address count at each step.
func TestENILifecycle(t *testing.T) {
	const delay = 300 * time.Millisecond
	sim := ec2simtest.Start(t, ec2sim.Config{AttachDelay: delay, DetachDelay: delay})
	c := ec2Client(t, sim)
	md := imdsClient(sim)
	subnet := sim.SubnetIDs()[0]
	free0 := subnetFree(t, c, subnet)

	// Create.
	created, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId:    aws.String(subnet),
		Description: aws.String("aws-K8S-" + sim.InstanceID()),
		Groups:      []string{"sg-0sim00000001"},
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface,
			Tags:         []types.Tag{{Key: aws.String("node.k8s.amazonaws.com/instance_id"), Value: aws.String(sim.InstanceID())}},
		}},
	})
	require.NoError(t, err)
	ni := created.NetworkInterface
	id, mac := aws.ToString(ni.NetworkInterfaceId), aws.ToString(ni.MacAddress)
	require.Equal(t, types.NetworkInterfaceStatusAvailable, ni.Status)
	require.Nil(t, ni.Attachment)
	require.Equal(t, []types.GroupIdentifier{{GroupId: aws.String("sg-0sim00000001"), GroupName: aws.String("ec2sim-sg-0sim00000001")}}, ni.Groups)
	require.Equal(t, free0-1, subnetFree(t, c, subnet))

	// Attach at the first free device index, as ipamd picks it.
	inst, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
	require.NoError(t, err)
	used := map[int32]bool{}
	for _, n := range inst.Reservations[0].Instances[0].NetworkInterfaces {
		used[aws.ToInt32(n.Attachment.DeviceIndex)] = true
	}
	device := int32(0)
	for used[device] {
		device++
	}
	require.Equal(t, int32(1), device)
	attachedAt := time.Now() // the attachment starts after this
	att, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(id), InstanceId: aws.String(sim.InstanceID()),
		DeviceIndex: aws.Int32(device), NetworkCardIndex: aws.Int32(0),
	})
	require.NoError(t, err)
	attID := aws.ToString(att.AttachmentId)
	require.True(t, strings.HasPrefix(attID, "eni-attach-"))
	require.Equal(t, int32(0), aws.ToInt32(att.NetworkCardIndex))
	_, err = c.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(id),
		Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(attID), DeleteOnTermination: aws.Bool(true)},
	})
	require.NoError(t, err)

	// Not attached yet, in EC2 nor IMDS.
	if time.Since(attachedAt) < delay/2 {
		got := describeENI(t, c, id)
		require.Equal(t, types.AttachmentStatusAttaching, got.Attachment.Status)
		require.Equal(t, sim.InstanceID(), aws.ToString(got.Attachment.InstanceId))
		require.NotContains(t, imdsMACs(t, md), mac)
		require.False(t, eniState(t, sim, id).Attached)
	}
	eventually(t, 3*time.Second, func() bool {
		return describeENI(t, c, id).Attachment.Status == types.AttachmentStatusAttached
	}, "ENI never attached")
	require.GreaterOrEqual(t, time.Since(attachedAt), delay)
	got := describeENI(t, c, id)
	require.Equal(t, types.NetworkInterfaceStatusInUse, got.Status)
	require.True(t, aws.ToBool(got.Attachment.DeleteOnTermination))
	require.Contains(t, imdsMACs(t, md), mac)
	base := "network/interfaces/macs/" + mac + "/"
	require.Equal(t, id, mustMetadata(t, md, base+"interface-id"))
	require.Equal(t, "1", mustMetadata(t, md, base+"device-number"))
	require.Equal(t, "0", mustMetadata(t, md, base+"network-card"))
	require.Equal(t, subnet, mustMetadata(t, md, base+"subnet-id"))
	require.Equal(t, aws.ToString(ni.PrivateIpAddress), mustMetadata(t, md, base+"local-ipv4s"))
	_, err = metadata(t, md, base+"ipv4-prefix")
	require.Error(t, err, "no prefixes yet: 404")

	// Assign secondary IPs.
	assigned, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(id), SecondaryPrivateIpAddressCount: aws.Int32(5),
	})
	require.NoError(t, err)
	require.Len(t, assigned.AssignedPrivateIpAddresses, 5)
	require.Equal(t, free0-1-5, subnetFree(t, c, subnet))
	ips := strings.Split(mustMetadata(t, md, base+"local-ipv4s"), "\n")
	require.Len(t, ips, 6)
	require.Equal(t, aws.ToString(ni.PrivateIpAddress), ips[0], "primary first")

	// Assign prefixes.
	pfx, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(id), Ipv4PrefixCount: aws.Int32(2),
	})
	require.NoError(t, err)
	require.Len(t, pfx.AssignedIpv4Prefixes, 2)
	for _, p := range pfx.AssignedIpv4Prefixes {
		pp := netip.MustParsePrefix(aws.ToString(p.Ipv4Prefix))
		require.Equal(t, 28, pp.Bits())
		require.Equal(t, pp.Masked(), pp, "aligned")
		for _, ip := range ips {
			require.False(t, pp.Contains(netip.MustParseAddr(ip)), "prefix overlaps an assigned IP")
		}
	}
	require.Equal(t, free0-1-5-32, subnetFree(t, c, subnet))
	require.Contains(t, mustMetadata(t, md, base), "ipv4-prefix")
	require.Len(t, strings.Split(mustMetadata(t, md, base+"ipv4-prefix"), "\n"), 2)
	got = describeENI(t, c, id)
	require.Len(t, got.PrivateIpAddresses, 6)
	require.Len(t, got.Ipv4Prefixes, 2)

	// Unassign two IPs and one prefix.
	_, err = c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(id), PrivateIpAddresses: ips[1:3],
	})
	require.NoError(t, err)
	_, err = c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(id), Ipv4Prefixes: []string{aws.ToString(pfx.AssignedIpv4Prefixes[0].Ipv4Prefix)},
	})
	require.NoError(t, err)
	require.Equal(t, free0-1-3-16, subnetFree(t, c, subnet))
	imdsIPs := strings.Split(mustMetadata(t, md, base+"local-ipv4s"), "\n")
	require.Len(t, imdsIPs, 4)
	require.False(t, slices.Contains(imdsIPs, ips[1]))
	st := eniState(t, sim, id)
	require.Len(t, st.SecondaryIPs, 3)
	require.Len(t, st.Prefixes, 1)

	// Unassigning something not on the ENI fails and changes nothing.
	_, err = c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(id), PrivateIpAddresses: []string{ips[3], ips[1]},
	})
	requireCode(t, err, "InvalidParameterValue")
	require.Len(t, eniState(t, sim, id).SecondaryIPs, 3)

	// Delete while attached is refused.
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	requireCode(t, err, "InvalidParameterValue")
	require.Contains(t, err.Error(), "is currently in use")

	// Detach.
	_, err = c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attID)})
	require.NoError(t, err)
	require.Equal(t, types.NetworkInterfaceStatusDetaching, describeENI(t, c, id).Status)
	eventually(t, 3*time.Second, func() bool {
		return describeENI(t, c, id).Status == types.NetworkInterfaceStatusAvailable
	}, "ENI never detached")
	require.Nil(t, describeENI(t, c, id).Attachment)
	require.NotContains(t, imdsMACs(t, md), mac)
	_, err = c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attID)})
	requireCode(t, err, "InvalidAttachmentID.NotFound")

	// Delete gives every address back.
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	require.NoError(t, err)
	require.Equal(t, free0, subnetFree(t, c, subnet))
	_, err = c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	requireCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	require.Len(t, sim.ENIs(), 1)

	calls := sim.Calls()
	require.Equal(t, 1, calls["CreateNetworkInterface"])
	require.Equal(t, 1, calls["AttachNetworkInterface"])
	require.Equal(t, 3, calls["DeleteNetworkInterface"]) // in use, ok, not found
	requireNoRetries(t, sim)
}

func TestCreateTagsAndSecurityGroups(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{SecurityGroupIDs: []string{"sg-0aaa", "sg-0bbb"}})
	c := ec2Client(t, sim)
	md := imdsClient(sim)
	primary := sim.PrimaryENI()

	_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{
		Resources: []string{primary, sim.SubnetIDs()[0]},
		Tags:      []types.Tag{{Key: aws.String("node.k8s.amazonaws.com/createdAt"), Value: aws.String("2024-01-01T00:00:00Z")}},
	})
	require.NoError(t, err)
	require.Equal(t, "2024-01-01T00:00:00Z", eniState(t, sim, primary).Tags["node.k8s.amazonaws.com/createdAt"])
	sn, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: sim.SubnetIDs()[:1]})
	require.NoError(t, err)
	require.Len(t, sn.Subnets[0].Tags, 1)

	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"eni-0gone"}, Tags: []types.Tag{{Key: aws.String("k")}}})
	requireCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"vol-0abc"}, Tags: []types.Tag{{Key: aws.String("k")}}})
	requireCode(t, err, "InvalidID")
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{primary}, Tags: []types.Tag{{Key: aws.String("aws:x")}}})
	requireCode(t, err, "InvalidParameterValue")

	// Security groups: the primary ENI has both; change to one (the
	// RefreshSGIDs path) and IMDS follows.
	mac := eniState(t, sim, primary).MAC
	require.Equal(t, "sg-0aaa\nsg-0bbb", mustMetadata(t, md, "network/interfaces/macs/"+mac+"/security-group-ids"))
	_, err = c.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(primary), Groups: []string{"sg-0bbb"},
	})
	require.NoError(t, err)
	require.Equal(t, "sg-0bbb", mustMetadata(t, md, "network/interfaces/macs/"+mac+"/security-group-ids"))
	_, err = c.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(primary), Groups: []string{"sg-0ccc"},
	})
	requireCode(t, err, "InvalidGroup.NotFound")
	_, err = c.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(primary),
		Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String("eni-attach-0nope"), DeleteOnTermination: aws.Bool(true)},
	})
	requireCode(t, err, "InvalidAttachmentID.NotFound")
	_, err = c.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String(primary)})
	requireCode(t, err, "MissingParameter")
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(sim.SubnetIDs()[0]), Groups: []string{"sg-0ccc"}})
	requireCode(t, err, "InvalidGroup.NotFound")
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0nope")})
	requireCode(t, err, "InvalidSubnetID.NotFound")
}

// TestDirectManipulation covers the test hooks that bypass the API.
func TestDirectManipulation(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	md := imdsClient(sim)
	primary := sim.PrimaryENI()

	ips, err := sim.AddSecondaryIPs(primary, 2)
	require.NoError(t, err)
	require.Len(t, ips, 2)
	got := describeENI(t, c, primary)
	require.Len(t, got.PrivateIpAddresses, 3)
	mac := eniState(t, sim, primary).MAC
	require.Contains(t, mustMetadata(t, md, "network/interfaces/macs/"+mac+"/local-ipv4s"), ips[1].String())

	require.NoError(t, sim.RemoveSecondaryIP(primary, ips[0]))
	require.Equal(t, []netip.Addr{ips[1]}, eniState(t, sim, primary).SecondaryIPs)
	err = sim.RemoveSecondaryIP(primary, ips[0])
	var ae *ec2sim.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "InvalidParameterValue", ae.Code)
	_, err = sim.AddSecondaryIPs(primary, 100)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "PrivateIpAddressLimitExceeded", ae.Code)
	_, err = sim.AddSecondaryIPs("eni-0nope", 1)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "InvalidNetworkInterfaceID.NotFound", ae.Code)
}

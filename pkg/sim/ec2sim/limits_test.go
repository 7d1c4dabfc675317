package ec2sim_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func createENI(t *testing.T, c *ec2.Client, subnet string) string {
	t.Helper()
	out, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnet)})
	require.NoError(t, err)
	return aws.ToString(out.NetworkInterface.NetworkInterfaceId)
}

func attach(c *ec2.Client, sim *ec2sim.Sim, eni string, device, card int32) (string, error) {
	out, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(eni), InstanceId: aws.String(sim.InstanceID()),
		DeviceIndex: aws.Int32(device), NetworkCardIndex: aws.Int32(card),
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.AttachmentId), nil
}

func TestPerENIAddressLimit(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"}) // 10 IPv4 per ENI
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]

	// Create with the most ipamd asks for: limit-1 secondaries.
	out, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnet), SecondaryPrivateIpAddressCount: aws.Int32(9),
	})
	require.NoError(t, err)
	full := aws.ToString(out.NetworkInterface.NetworkInterfaceId)
	require.Len(t, out.NetworkInterface.PrivateIpAddresses, 10)
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(full), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	requireCode(t, err, "PrivateIpAddressLimitExceeded")
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnet), SecondaryPrivateIpAddressCount: aws.Int32(10),
	})
	requireCode(t, err, "PrivateIpAddressLimitExceeded")

	// Prefixes share the same slots: primary + 9 prefixes.
	out, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnet), Ipv4PrefixCount: aws.Int32(4),
	})
	require.NoError(t, err)
	pd := aws.ToString(out.NetworkInterface.NetworkInterfaceId)
	require.Len(t, out.NetworkInterface.Ipv4Prefixes, 4)
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(pd), Ipv4PrefixCount: aws.Int32(5),
	})
	require.NoError(t, err)
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(pd), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	requireCode(t, err, "PrivateIpAddressLimitExceeded")

	// Parameter rules.
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(pd)})
	requireCode(t, err, "MissingParameter")
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(pd), SecondaryPrivateIpAddressCount: aws.Int32(1), Ipv4PrefixCount: aws.Int32(1),
	})
	requireCode(t, err, "InvalidParameterCombination")
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-0nope"), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	requireCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	_, err = c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(pd), PrivateIpAddresses: []string{"not-an-ip"},
	})
	requireCode(t, err, "InvalidParameterValue")
	_, err = c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(pd), PrivateIpAddresses: []string{aws.ToString(out.NetworkInterface.PrivateIpAddress)},
	})
	requireCode(t, err, "InvalidParameterValue") // the primary cannot be unassigned
}

func TestAttachmentRules(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"}) // 3 ENIs
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]
	a, b, d := createENI(t, c, subnet), createENI(t, c, subnet), createENI(t, c, subnet)

	_, err := attach(c, sim, a, 0, 0)
	requireCode(t, err, "InvalidParameterValue") // device 0 is the primary's
	attA, err := attach(c, sim, a, 1, 0)
	require.NoError(t, err)
	_, err = attach(c, sim, a, 2, 0)
	requireCode(t, err, "InvalidNetworkInterface.InUse")
	_, err = attach(c, sim, b, 2, 0)
	require.NoError(t, err)
	_, err = attach(c, sim, d, 3, 0)
	requireCode(t, err, "AttachmentLimitExceeded")
	_, err = attach(c, sim, d, 3, 1)
	requireCode(t, err, "InvalidParameterValue") // m5.large has one network card
	_, err = c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(d), InstanceId: aws.String("i-0nope"), DeviceIndex: aws.Int32(3),
	})
	requireCode(t, err, "InvalidInstanceID.NotFound")
	_, err = c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(d), InstanceId: aws.String(sim.InstanceID()), DeviceIndex: aws.Int32(-1),
	})
	requireCode(t, err, "InvalidParameterValue")

	// The primary cannot be detached; a secondary can, which frees a slot.
	inst, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
	require.NoError(t, err)
	require.Len(t, inst.Reservations[0].Instances[0].NetworkInterfaces, 3)
	var primaryAtt string
	for _, n := range inst.Reservations[0].Instances[0].NetworkInterfaces {
		if aws.ToInt32(n.Attachment.DeviceIndex) == 0 {
			primaryAtt = aws.ToString(n.Attachment.AttachmentId)
		}
	}
	_, err = c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(primaryAtt)})
	requireCode(t, err, "OperationNotPermitted")
	_, err = c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attA)})
	require.NoError(t, err)
	_, err = attach(c, sim, d, 1, 0)
	require.NoError(t, err)
}

func TestMultiCardAttach(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "c6in.32xlarge"}) // cards 0:8, 1:8
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]
	// Device indexes are per network card.
	e1 := createENI(t, c, subnet)
	_, err := attach(c, sim, e1, 1, 1)
	require.NoError(t, err)
	for dev := int32(2); dev <= 8; dev++ {
		_, err := attach(c, sim, createENI(t, c, subnet), dev, 1)
		require.NoError(t, err, "device %d", dev)
	}
	_, err = attach(c, sim, createENI(t, c, subnet), 9, 1)
	requireCode(t, err, "AttachmentLimitExceeded") // card 1 is full
	_, err = attach(c, sim, createENI(t, c, subnet), 1, 0)
	require.NoError(t, err)

	md := imdsClient(sim)
	mac := eniState(t, sim, e1).MAC
	require.Equal(t, "1", mustMetadata(t, md, "network/interfaces/macs/"+mac+"/network-card"))
	ni := describeENI(t, c, e1)
	require.Equal(t, int32(1), aws.ToInt32(ni.Attachment.NetworkCardIndex))
}

// TestLimitsMatchSharedTable checks the built-in table against
// /work/shared/data/instance-limits.tsv when it is present.
func TestLimitsMatchSharedTable(t *testing.T) {
	f, err := os.Open("/work/shared/data/instance-limits.tsv")
	if err != nil {
		t.Skip("instance-limits.tsv not available:", err)
	}
	defer f.Close()
	rows := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			cols := strings.Split(line, "\t")
			rows[cols[0]] = cols
		}
	}
	require.NoError(t, sc.Err())

	sim := ec2simtest.Start(t, ec2sim.Config{})
	out, err := ec2Client(t, sim).DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{})
	require.NoError(t, err)
	require.Len(t, out.InstanceTypes, len(ec2sim.InstanceTypes()))
	for _, it := range out.InstanceTypes {
		row, ok := rows[string(it.InstanceType)]
		require.True(t, ok, "%s not in the table", it.InstanceType)
		ni := it.NetworkInfo
		var cards []string
		for _, c := range ni.NetworkCards {
			cards = append(cards, strconv.Itoa(int(aws.ToInt32(c.NetworkCardIndex)))+":"+strconv.Itoa(int(aws.ToInt32(c.MaximumNetworkInterfaces))))
		}
		def := aws.ToInt32(ni.DefaultNetworkCardIndex)
		require.Equal(t, row[1], strconv.Itoa(int(aws.ToInt32(ni.NetworkCards[def].MaximumNetworkInterfaces))), "%s ENIs (default card)", it.InstanceType)
		require.Equal(t, row[2], strconv.Itoa(int(aws.ToInt32(ni.Ipv4AddressesPerInterface))), "%s IPv4 per ENI", it.InstanceType)
		require.Equal(t, row[3], strconv.Itoa(int(def)), "%s default card", it.InstanceType)
		require.Equal(t, row[4], strings.Join(cards, ","), "%s cards", it.InstanceType)
		require.Equal(t, row[5], string(it.Hypervisor), "%s hypervisor", it.InstanceType)
		require.Equal(t, row[6], strconv.FormatBool(aws.ToBool(it.BareMetal)), "%s bare metal", it.InstanceType)
		require.Equal(t, types.InstanceTypeHypervisorNitro, it.Hypervisor)
	}
}

package ec2sim_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int } // aws and smithy ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func TestSubnetExhaustedFault(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]
	primary := sim.PrimaryENI()

	sim.SetSubnetExhausted(subnet, true)
	_, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnet)})
	requireCode(t, err, "InsufficientFreeAddressesInSubnet")
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(primary), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	requireCode(t, err, "InsufficientFreeAddressesInSubnet")
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(primary), Ipv4PrefixCount: aws.Int32(1),
	})
	requireCode(t, err, "InsufficientFreeAddressesInSubnet")
	require.Equal(t, int32(0), subnetFree(t, c, subnet))
	require.Len(t, sim.ENIs(), 1)

	sim.SetSubnetExhausted(subnet, false)
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(primary), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	require.NoError(t, err)
}

// TestSubnetRunsOut fills small subnets for real.
func TestSubnetRunsOut(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.xlarge", Subnets: []ec2sim.SubnetConfig{
		{CIDR: "10.0.0.0/20"},
		{ID: "subnet-0tiny", CIDR: "10.0.16.0/28"},  // 11 usable
		{ID: "subnet-0small", CIDR: "10.0.17.0/26"}, // 59 usable, /28s only at .16 and .32
	}})
	c := ec2Client(t, sim)

	out, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-0tiny"), SecondaryPrivateIpAddressCount: aws.Int32(9),
	})
	require.NoError(t, err)
	require.Equal(t, "10.0.16.4", aws.ToString(out.NetworkInterface.PrivateIpAddress), "first four are AWS's")
	require.Equal(t, int32(1), subnetFree(t, c, "subnet-0tiny"))
	last := createENI(t, c, "subnet-0tiny")
	require.Equal(t, "10.0.16.14", eniState(t, sim, last).PrimaryIP.String(), ".15 is the broadcast")
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0tiny")})
	requireCode(t, err, "InsufficientFreeAddressesInSubnet")
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(last), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	requireCode(t, err, "InsufficientFreeAddressesInSubnet")

	// Enough addresses but no free aligned /28.
	eni := createENI(t, c, "subnet-0small")
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), PrivateIpAddresses: []string{"10.0.17.20", "10.0.17.40"},
	})
	require.NoError(t, err)
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), PrivateIpAddresses: []string{"10.0.17.20"},
	})
	requireCode(t, err, "InvalidParameterValue") // already assigned
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), Ipv4PrefixCount: aws.Int32(1),
	})
	requireCode(t, err, "InsufficientCidrBlocks")
	_, err = c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), PrivateIpAddresses: []string{"10.0.17.40"},
	})
	require.NoError(t, err)
	p, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), Ipv4PrefixCount: aws.Int32(1),
	})
	require.NoError(t, err)
	require.Equal(t, "10.0.17.32/28", aws.ToString(p.AssignedIpv4Prefixes[0].Ipv4Prefix))
}

func TestThrottling(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := fastRetryEC2Client(t, sim)

	sim.SetThrottle(1.0)
	_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
	requireCode(t, err, "RequestLimitExceeded")
	require.Equal(t, http.StatusServiceUnavailable, httpStatus(err))
	require.Equal(t, 3, sim.Calls()["DescribeInstances"], "the SDK's standard retryer makes 3 attempts")
	for i, call := range sim.CallLog() {
		require.Equal(t, "RequestLimitExceeded", call.ErrorCode)
		require.Equal(t, i+1, call.Attempt, "Amz-Sdk-Request attempt number")
	}

	// Half the attempts throttled: SDK retries absorb most of it.
	sim.SetThrottle(0.5)
	sim.ResetCalls()
	const n = 40
	ok := 0
	for range n {
		_, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{})
		if err == nil {
			ok++
		} else {
			requireCode(t, err, "RequestLimitExceeded")
		}
	}
	attempts := sim.Calls()["DescribeNetworkInterfaces"]
	t.Logf("throttle 0.5: %d/%d calls succeeded in %d attempts", ok, n, attempts)
	require.GreaterOrEqual(t, ok, n*3/4)
	require.Greater(t, attempts, n)

	sim.SetThrottle(0)
	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	require.NoError(t, err)
}

func TestServerErrors(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := fastRetryEC2Client(t, sim)

	sim.SetServerErrors(1.0)
	_, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(sim.SubnetIDs()[0])})
	requireCode(t, err, "InternalError")
	require.Equal(t, http.StatusInternalServerError, httpStatus(err))
	require.Equal(t, 3, sim.Calls()["CreateNetworkInterface"])
	require.Len(t, sim.ENIs(), 1, "a failed call changes nothing")

	sim.SetServerErrors(0)
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(sim.SubnetIDs()[0])})
	require.NoError(t, err)
}

func TestUnauthorized(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := fastRetryEC2Client(t, sim)

	sim.SetUnauthorized("CreateTags", true)
	_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{sim.PrimaryENI()}, Tags: tagsKV("k", "v")})
	requireCode(t, err, "UnauthorizedOperation")
	require.Equal(t, http.StatusForbidden, httpStatus(err))
	require.Equal(t, 1, sim.Calls()["CreateTags"], "not retried")
	_, err = c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	require.NoError(t, err, "other actions unaffected")

	sim.SetUnauthorized("CreateTags", false)
	_, err = c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{sim.PrimaryENI()}, Tags: tagsKV("k", "v")})
	require.NoError(t, err)
}

func TestLatency(t *testing.T) {
	const latency = 150 * time.Millisecond
	sim := ec2simtest.Start(t, ec2sim.Config{Latency: latency})
	c := ec2Client(t, sim)
	start := time.Now()
	_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), latency)
}

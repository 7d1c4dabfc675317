package ec2sim_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// noRetryClient talks to an EC2 endpoint with one attempt per call, so
// that every throttle reaches the test.
func noRetryClient(t *testing.T, endpoint string) *ec2.Client {
	return ec2.NewFromConfig(sdkConfig(t), func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.RetryMaxAttempts = 1
	})
}

// TestThrottleOverHTTP drains one action's bucket through the SDK: the
// request after the burst fails with RequestLimitExceeded and HTTP 503,
// is logged as such, and other actions are unaffected.
func TestThrottleOverHTTP(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{Throttle: &ec2sim.ThrottleConfig{
		Actions: map[string]ec2sim.Bucket{"DescribeInstances": {Capacity: 3}}, // never refills
	}})
	c := noRetryClient(t, sim.EC2Endpoint())
	in := &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}}
	for i := range 3 {
		_, err := c.DescribeInstances(ctx, in)
		require.NoError(t, err, "request %d of the burst", i+1)
	}
	_, err := c.DescribeInstances(ctx, in)
	requireCode(t, err, "RequestLimitExceeded")
	require.Equal(t, http.StatusServiceUnavailable, httpStatus(err))
	require.Contains(t, err.Error(), "Request limit exceeded.")

	log := sim.CallLog()
	require.Len(t, log, 4)
	require.Equal(t, ec2sim.Call{Time: log[3].Time, Action: "DescribeInstances", ErrorCode: "RequestLimitExceeded", Attempt: 1}, log[3])

	_, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	require.NoError(t, err, "other actions have their own buckets")
	require.Equal(t, map[string]ec2sim.ThrottleStat{"DescribeInstances": {Admitted: 3, Throttled: 1}}, sim.ThrottleStats(),
		"DescribeSubnets has no bucket in this config")
}

// TestThrottledRequestDoesNothing checks that the limits come first: a
// throttled request changes nothing and meets neither faults nor
// validation.
func TestThrottledRequestDoesNothing(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{Throttle: &ec2sim.ThrottleConfig{
		Actions: map[string]ec2sim.Bucket{"AssignPrivateIpAddresses": {Capacity: 1}},
	}})
	c := noRetryClient(t, sim.EC2Endpoint())
	assign := &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(sim.PrimaryENI()), SecondaryPrivateIpAddressCount: aws.Int32(1)}
	_, err := c.AssignPrivateIpAddresses(ctx, assign)
	require.NoError(t, err)

	sim.SetUnauthorized("AssignPrivateIpAddresses", true)
	_, err = c.AssignPrivateIpAddresses(ctx, assign)
	requireCode(t, err, "RequestLimitExceeded")
	require.Len(t, eniState(t, sim, sim.PrimaryENI()).SecondaryIPs, 1, "the throttled request assigned nothing")

	status, body := postForm(t, sim, url.Values{
		"Action": {"AssignPrivateIpAddresses"}, "Version": {"2016-11-15"}, "Bogus": {"1"},
	})
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.True(t, strings.Contains(body, "<Code>RequestLimitExceeded</Code>"), body)
}

// TestDefaultThrottleOverHTTP runs unfiltered DescribeInstances against
// EC2's published limits until the first throttle. The burst is at least
// the bucket's 50 and at most what 10 tokens a second could add while it
// ran (the bound grows with the time taken, so a slow machine passes).
// A DescribeInstances by ID then still passes: it draws on the larger
// non-mutating bucket.
func TestDefaultThrottleOverHTTP(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{Throttle: ec2sim.DefaultThrottle()})
	c := noRetryClient(t, sim.EC2Endpoint())
	start := time.Now()
	passed := 0
	for {
		_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		if err != nil {
			requireCode(t, err, "RequestLimitExceeded")
			break
		}
		passed++
		require.Less(t, passed, 10_000, "never throttled")
	}
	elapsed := time.Since(start)
	t.Logf("%d unfiltered DescribeInstances passed in %v", passed, elapsed)
	require.GreaterOrEqual(t, passed, 50)
	require.LessOrEqual(t, float64(passed), 50+10*elapsed.Seconds()+1)

	_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
	require.NoError(t, err)
	require.Equal(t, 1, sim.ThrottleStats()["DescribeInstances"].Throttled)
}

// TestActionLatency checks that an action's own latency applies to it.
// Only lower bounds are asserted.
func TestActionLatency(t *testing.T) {
	const slow = 200 * time.Millisecond
	sim := ec2simtest.Start(t, ec2sim.Config{ActionLatency: map[string]time.Duration{"DescribeSubnets": slow}})
	c := ec2Client(t, sim)
	start := time.Now()
	_, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), slow)
}

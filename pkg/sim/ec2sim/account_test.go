package ec2sim_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// nodeClient is a node's EC2 client: the account's endpoint, the node's
// static credentials, and one attempt per call unless retries is set.
func nodeClient(base aws.Config, acct *ec2sim.Account, creds ec2sim.Credentials, retries bool) *ec2.Client {
	base.Credentials = credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, "")
	return ec2.NewFromConfig(base, func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(acct.EC2Endpoint())
		if !retries {
			o.RetryMaxAttempts = 1
			return
		}
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		})
	})
}

func instanceFilter(id string) []types.Filter {
	return []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{id}}}
}

// TestAccountRoutesByAccessKey serves two nodes from one endpoint: each
// key reaches its own node's model and IMDS, unknown and missing keys get
// AuthFailure, and a removed node's key stops working.
func TestAccountRoutesByAccessKey(t *testing.T) {
	acct := ec2simtest.StartAccount(t, ec2sim.AccountConfig{})
	a, credsA := ec2simtest.AddNode(t, acct, ec2sim.Config{})
	b, credsB := ec2simtest.AddNode(t, acct, ec2sim.Config{InstanceType: "m5.xlarge"})
	require.Equal(t, 2, acct.Nodes())
	require.NotEqual(t, a.InstanceID(), b.InstanceID())
	require.NotEqual(t, credsA.AccessKeyID, credsB.AccessKeyID)
	require.Equal(t, acct.EC2Endpoint(), a.EC2Endpoint(), "a node's EC2 endpoint is its account's")
	require.NotEqual(t, a.IMDSEndpoint(), b.IMDSEndpoint())

	base := sdkConfig(t)
	for _, n := range []struct {
		sim, other *ec2sim.Sim
		creds      ec2sim.Credentials
	}{{a, b, credsA}, {b, a, credsB}} {
		c := nodeClient(base, acct, n.creds, false)
		require.Equal(t, n.sim.InstanceID(), mustMetadata(t, imdsClient(n.sim), "instance-id"))

		out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		require.NoError(t, err)
		require.Len(t, out.Reservations, 1)
		require.Len(t, out.Reservations[0].Instances, 1)
		require.Equal(t, n.sim.InstanceID(), aws.ToString(out.Reservations[0].Instances[0].InstanceId))

		enis, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: instanceFilter(n.sim.InstanceID())})
		require.NoError(t, err)
		require.Len(t, enis.NetworkInterfaces, 1)
		require.Equal(t, n.sim.PrimaryENI(), aws.ToString(enis.NetworkInterfaces[0].NetworkInterfaceId))
		enis, err = c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: instanceFilter(n.other.InstanceID())})
		require.NoError(t, err)
		require.Empty(t, enis.NetworkInterfaces, "each node has its own model")
	}
	require.Equal(t, map[string]int{"DescribeInstances": 1, "DescribeNetworkInterfaces": 2}, a.Calls())
	require.Equal(t, map[string]int{"DescribeInstances": 1, "DescribeNetworkInterfaces": 2}, b.Calls())
	require.Equal(t, 6, acct.Snapshot().Total().Requests)

	stranger := nodeClient(base, acct, ec2sim.Credentials{AccessKeyID: "AKIDUNKNOWN", SecretAccessKey: "x"}, false)
	_, err := stranger.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	requireCode(t, err, "AuthFailure")
	require.Equal(t, http.StatusUnauthorized, httpStatus(err))

	resp, err := http.Post(acct.EC2Endpoint(), "application/x-www-form-urlencoded",
		strings.NewReader(url.Values{"Action": {"DescribeInstances"}, "Version": {"2016-11-15"}}.Encode()))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "unsigned")
	require.Equal(t, ec2sim.ActionCounts{Requests: 4, Errors: 2}, acct.Snapshot().Actions["DescribeInstances"])

	require.NoError(t, acct.RemoveNode(a.InstanceID()))
	require.Equal(t, 1, acct.Nodes())
	_, err = nodeClient(base, acct, credsA, false).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	requireCode(t, err, "AuthFailure")
	_, err = http.Get(a.IMDSEndpoint() + "/latest/api/token") // the SDK's IMDS client would retry for seconds
	require.Error(t, err, "the removed node's IMDS is closed")
	_, err = nodeClient(base, acct, credsB, false).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	require.NoError(t, err, "the other node carries on")
	require.True(t, errors.Is(acct.RemoveNode(a.InstanceID()), ec2sim.ErrUnknownNode))
}

// TestAccountSharesBuckets shows that the nodes of an account draw on one
// bucket per action: node A's burst throttles node B, B's other actions
// pass, and each node's stats and call log show its own requests while
// the account's snapshot shows them all, retries included.
func TestAccountSharesBuckets(t *testing.T) {
	acct := ec2simtest.StartAccount(t, ec2sim.AccountConfig{Throttle: &ec2sim.ThrottleConfig{
		Actions: map[string]ec2sim.Bucket{"DescribeInstances": {Capacity: 5}}, // never refills
	}})
	a, credsA := ec2simtest.AddNode(t, acct, ec2sim.Config{})
	b, credsB := ec2simtest.AddNode(t, acct, ec2sim.Config{})
	base := sdkConfig(t)
	ca, cb := nodeClient(base, acct, credsA, false), nodeClient(base, acct, credsB, true)
	before := acct.Snapshot()

	for range 5 {
		_, err := ca.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{a.InstanceID()}})
		require.NoError(t, err)
	}
	_, err := cb.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{b.InstanceID()}})
	requireCode(t, err, "RequestLimitExceeded")
	require.Equal(t, http.StatusServiceUnavailable, httpStatus(err))
	_, err = cb.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	require.NoError(t, err, "another action's bucket")

	require.Equal(t, map[string]ec2sim.ThrottleStat{"DescribeInstances": {Admitted: 5}}, a.ThrottleStats())
	require.Equal(t, map[string]ec2sim.ThrottleStat{"DescribeInstances": {Throttled: 3}}, b.ThrottleStats(),
		"the SDK's three attempts, all throttled")
	logB := b.CallLog()
	require.Len(t, logB, 4)
	for i, c := range logB[:3] {
		require.Equal(t, "RequestLimitExceeded", c.ErrorCode)
		require.Equal(t, i+1, c.Attempt)
	}
	require.Empty(t, logB[3].ErrorCode)

	phase := acct.Snapshot().Since(before)
	require.Equal(t, map[string]ec2sim.ActionCounts{
		"DescribeInstances": {Requests: 8, Throttled: 3, Retries: 2, Errors: 3},
		"DescribeSubnets":   {Requests: 1},
	}, phase.Actions)
	require.Equal(t, 2, phase.Nodes)
}

func TestAccountLatency(t *testing.T) {
	const slow = 150 * time.Millisecond
	acct := ec2simtest.StartAccount(t, ec2sim.AccountConfig{ActionLatency: map[string]time.Duration{"DescribeSubnets": slow}})
	_, creds := ec2simtest.AddNode(t, acct, ec2sim.Config{})
	start := time.Now()
	_, err := nodeClient(sdkConfig(t), acct, creds, false).DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), slow)
}

func TestAccountConfig(t *testing.T) {
	_, err := ec2sim.NewAccount(ec2sim.AccountConfig{Throttle: &ec2sim.ThrottleConfig{Actions: map[string]ec2sim.Bucket{"CreateTags": {}}}})
	require.Error(t, err, "zero capacity")
	_, err = ec2sim.NewAccount(ec2sim.AccountConfig{ActionLatency: map[string]time.Duration{"Nope": 1}})
	require.Error(t, err)

	acct := ec2simtest.StartAccount(t, ec2sim.AccountConfig{Region: "eu-west-1"})
	require.Error(t, acct.Start(), "already started")
	for name, cfg := range map[string]ec2sim.Config{
		"own throttle": {Throttle: ec2sim.DefaultThrottle()},
		"own latency":  {Latency: time.Millisecond},
		"own EC2 addr": {EC2Addr: "127.0.0.1:0"},
		"other region": {Region: "us-east-1"},
		"bad type":     {InstanceType: "m5.huge"},
	} {
		_, _, err := acct.AddNode(cfg)
		require.Error(t, err, name)
	}
	require.Zero(t, acct.Nodes())

	n, _ := ec2simtest.AddNode(t, acct, ec2sim.Config{})
	require.Equal(t, "eu-west-1", n.Region())
	require.Equal(t, "eu-west-1a", n.AZ())
	require.Error(t, n.Start(), "a node is started by AddNode")
	_, _, err = acct.AddNode(ec2sim.Config{Seed: 7})
	require.NoError(t, err)
	_, _, err = acct.AddNode(ec2sim.Config{Seed: 7})
	require.Error(t, err, "the same seed makes the same instance ID")

	require.NoError(t, acct.Close())
	require.Zero(t, acct.Nodes())
	_, _, err = acct.AddNode(ec2sim.Config{})
	require.Error(t, err, "closed")
}

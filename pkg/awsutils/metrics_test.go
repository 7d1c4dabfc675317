package awsutils

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func TestEC2Metrics(t *testing.T) {
	const fn = "AssignPrivateIpAddresses"
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	ctx := context.Background()
	eni := sim.PrimaryENI()

	reqs := func() float64 { return testutil.ToFloat64(ec2Requests.WithLabelValues(fn)) }
	errs := func() float64 { return testutil.ToFloat64(ec2Errors.WithLabelValues(fn)) }
	apiErrs := func(code string) float64 { return testutil.ToFloat64(apiErrors.WithLabelValues(fn, code)) }
	reqs0, errs0 := reqs(), errs()
	unauth0, throttled0 := apiErrs(ec2sim.CodeUnauthorizedOperation), apiErrs(ec2sim.CodeRequestLimitExceeded)

	_, err := c.AssignIPs(ctx, eni, 1)
	require.NoError(t, err)
	_, err = c.AssignPrefixes(ctx, eni, 1)
	require.NoError(t, err)
	assert.Equal(t, reqs0+2, reqs())
	assert.Equal(t, errs0, errs(), "successes are not errors")

	sim.SetUnauthorized(fn, true)
	_, err = c.AssignIPs(ctx, eni, 1)
	require.ErrorIs(t, err, ErrUnauthorized)
	sim.SetUnauthorized(fn, false)
	assert.Equal(t, reqs0+3, reqs())
	assert.Equal(t, errs0+1, errs())
	assert.Equal(t, unauth0+1, apiErrs(ec2sim.CodeUnauthorizedOperation))

	// One call counts once, however many attempts the SDK made.
	sim.SetThrottle(1.0)
	sim.ResetCalls()
	_, err = c.AssignIPs(ctx, eni, 1)
	require.ErrorIs(t, err, ErrThrottled)
	assert.Equal(t, 4, callsFor(sim, fn))
	assert.Equal(t, reqs0+4, reqs())
	assert.Equal(t, errs0+2, errs())
	assert.Equal(t, throttled0+1, apiErrs(ec2sim.CodeRequestLimitExceeded))

	// The other actions are counted under their own names.
	describes0 := testutil.ToFloat64(ec2Requests.WithLabelValues("DescribeInstanceTypes"))
	sim.SetThrottle(0)
	_, err = c.DescribeInstanceTypeLimits(ctx, "m5.large")
	require.NoError(t, err)
	assert.Equal(t, describes0+1, testutil.ToFloat64(ec2Requests.WithLabelValues("DescribeInstanceTypes")))
	assert.Equal(t, reqs0+4, reqs())

	assert.Positive(t, testutil.CollectAndCount(apiLatency), "latency observed")
}

func TestMetricsRegistered(t *testing.T) {
	RegisterMetrics()
	RegisterMetrics() // idempotent
	ec2Requests.WithLabelValues("DescribeInstances").Add(0)
	ec2Errors.WithLabelValues("DescribeInstances").Add(0)
	for _, name := range []string{"awscni_ec2api_req_count", "awscni_ec2api_error_count"} {
		n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, name)
		require.NoError(t, err)
		assert.Positive(t, n, "%s is on the default registry", name)
	}
}

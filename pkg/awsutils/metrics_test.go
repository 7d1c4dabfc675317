package awsutils

import (
	"context"
	"errors"
	"testing"
	"time"

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

// awscni_aws_utils_error_count is counted where upstream counts it: an ENI
// left behind by a failed attach or a failed DeleteOnTermination, a free
// that cannot look up the attachment, a delete that fails.
func TestAWSUtilsErrorCount(t *testing.T) {
	ctx := context.Background()
	code := ec2sim.CodeUnauthorizedOperation
	count := func(fn string) float64 { return testutil.ToFloat64(utilsErrors.WithLabelValues(fn, code)) }
	fns := []string{FnAllocENIDeleteErr, FnENICleanupUponModifyNetworkErr, FnGetENIAttachmentIDFailed, FnFreeENIDeleteErr}
	before := map[string]float64{}
	for _, fn := range fns {
		before[fn] = count(fn)
	}
	delta := func() map[string]float64 {
		out := map[string]float64{}
		for _, fn := range fns {
			if d := count(fn) - before[fn]; d != 0 {
				out[fn] = d
			}
			before[fn] = count(fn)
		}
		return out
	}

	t.Run("attach fails, then the delete", func(t *testing.T) {
		sim, c := simClient(t, ec2sim.Config{}, Options{})
		sim.SetUnauthorized("AttachNetworkInterface", true)
		sim.SetUnauthorized("DeleteNetworkInterface", true)
		_, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
		require.ErrorIs(t, err, ErrUnauthorized)
		assert.Equal(t, map[string]float64{FnAllocENIDeleteErr: 1}, delta())
	})
	t.Run("DeleteOnTermination fails, then the clean-up", func(t *testing.T) {
		sim, c := simClient(t, ec2sim.Config{DetachDelay: time.Millisecond}, Options{})
		sim.SetUnauthorized("ModifyNetworkInterfaceAttribute", true)
		sim.SetUnauthorized("DeleteNetworkInterface", true)
		_, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
		require.ErrorIs(t, err, ErrUnauthorized)
		assert.Equal(t, map[string]float64{FnENICleanupUponModifyNetworkErr: 1, FnFreeENIDeleteErr: 1}, delta())
	})
	t.Run("free cannot look up the attachment", func(t *testing.T) {
		sim, c := simClient(t, ec2sim.Config{}, Options{})
		eni, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
		require.NoError(t, err)
		sim.SetUnauthorized("DescribeNetworkInterfaces", true)
		require.ErrorIs(t, c.FreeENI(ctx, eni.ID), ErrUnauthorized)
		assert.Equal(t, map[string]float64{FnGetENIAttachmentIDFailed: 1}, delta())
	})
	t.Run("success counts nothing", func(t *testing.T) {
		_, c := simClient(t, ec2sim.Config{DetachDelay: time.Millisecond}, Options{})
		eni, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
		require.NoError(t, err)
		require.NoError(t, c.FreeENI(ctx, eni.ID))
		assert.Empty(t, delta())
	})
}

func TestUtilsErrorLabelIsBounded(t *testing.T) {
	before := testutil.ToFloat64(utilsErrors.WithLabelValues(FnCleanUpLeakedENIDeleteErr, "unknown"))
	CountUtilsError(FnCleanUpLeakedENIDeleteErr, errors.New("delete eni-0123: connection reset"))
	assert.Equal(t, before+1, testutil.ToFloat64(utilsErrors.WithLabelValues(FnCleanUpLeakedENIDeleteErr, "unknown")),
		"an error without an AWS code is labelled unknown, not by its text")
}

package awsutils

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func TestBudgetSpacesRequestsBeyondTheBurst(t *testing.T) {
	const perSecond, burst, calls = 5.0, 2, 6
	sim, c := simClient(t, ec2sim.Config{}, Options{Budget: Budget{CallsPerSecond: perSecond, Burst: burst}})
	waits := testutil.ToFloat64(budgetWaits)
	sim.ResetCalls()
	for range calls {
		_, err := c.InstanceENIs(context.Background())
		require.NoError(t, err)
	}
	log := sim.CallLog()
	require.Len(t, log, calls)
	// The first burst go at once; each later one waits for a token, so
	// the last arrives no sooner than (calls-burst)/rate after the first.
	minSpan := time.Duration(float64(time.Second) * (calls - burst) / perSecond)
	assert.GreaterOrEqual(t, log[calls-1].Time.Sub(log[0].Time), minSpan-20*time.Millisecond)
	assert.GreaterOrEqual(t, testutil.ToFloat64(budgetWaits)-waits, float64(calls-burst-1), "the requests beyond the burst waited")
	assert.Positive(t, testutil.ToFloat64(budgetWaitSeconds))
}

func TestBudgetCoversRetriesAndCountsThrottledAttempts(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{MaxAttempts: 3, MaxBackoff: time.Millisecond})
	throttled := func() float64 { return testutil.ToFloat64(ec2Throttled.WithLabelValues("DescribeNetworkInterfaces")) }
	before := throttled()
	sim.SetThrottle(1) // every request answered RequestLimitExceeded
	_, err := c.InstanceENIs(context.Background())
	require.ErrorIs(t, err, ErrThrottled)
	assert.Equal(t, 3.0, throttled()-before, "each attempt, the SDK's retries included, is counted")
	sim.SetThrottle(0)
}

func TestBudgetWaitEndsWithTheContext(t *testing.T) {
	_, c := simClient(t, ec2sim.Config{}, Options{Budget: Budget{CallsPerSecond: 0.01, Burst: 1}})
	_, err := c.InstanceENIs(context.Background()) // takes the only token
	require.NoError(t, err)
	// The next would wait 100 s.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.InstanceENIs(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestBudgetDefaults(t *testing.T) {
	assert.Equal(t, Budget{CallsPerSecond: DefaultEC2CallsPerSecond, Burst: DefaultEC2Burst}, Budget{}.withDefaults())
	assert.Equal(t, Budget{CallsPerSecond: 0.5, Burst: 3}, Budget{CallsPerSecond: 0.5, Burst: 3}.withDefaults())
}

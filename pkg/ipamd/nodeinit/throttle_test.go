package nodeinit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func shortThrottlePauses(t *testing.T, tries int) {
	first, maxPause, n := throttleFirstPause, throttleMaxPause, throttleTries
	throttleFirstPause, throttleMaxPause, throttleTries = 20*time.Millisecond, 100*time.Millisecond, tries
	t.Cleanup(func() { throttleFirstPause, throttleMaxPause, throttleTries = first, maxPause, n })
}

// TestIPv4WaitsOutThrottling: EC2 throttles every request for a while at
// start; node init waits and then fills the datastore, where it used to
// fail after the SDK's attempts.
func TestIPv4WaitsOutThrottling(t *testing.T) {
	shortThrottlePauses(t, 40)
	sim, c := testsupport.SimClient(t, ec2sim.Config{}, awsutils.Options{})
	n := &node{sim: sim, aws: c, errors: testsupport.ErrorCount()}
	deps, store := n.deps(t, false, nil)
	sim.SetThrottle(1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		sim.SetThrottle(0)
	}()
	_, err := IPv4(context.Background(), n.config(), deps, n.limits(t))
	require.NoError(t, err)
	assert.Len(t, store.ENISummaries(), 1, "the primary ENI joined")
	assert.Greater(t, sim.Calls()["DescribeNetworkInterfaces"], 1, "asked again after being throttled")
}

// TestIPv4GivesUpOnEndlessThrottling: the retries are bounded, and an
// error that is not throttling is not retried.
func TestIPv4GivesUpOnEndlessThrottling(t *testing.T) {
	shortThrottlePauses(t, 3)
	sim, c := testsupport.SimClient(t, ec2sim.Config{}, awsutils.Options{})
	n := &node{sim: sim, aws: c, errors: testsupport.ErrorCount()}
	deps, _ := n.deps(t, false, nil)
	sim.SetThrottle(1)
	_, err := IPv4(context.Background(), n.config(), deps, n.limits(t))
	require.ErrorIs(t, err, awsutils.ErrThrottled)
	assert.Equal(t, 3*2, sim.Calls()["DescribeNetworkInterfaces"], "3 tries of the SDK's 2 attempts (testsupport's)")

	sim.SetThrottle(0)
	sim.SetUnauthorized("DescribeNetworkInterfaces", true)
	sim.ResetCalls()
	_, err = IPv4(context.Background(), n.config(), deps, n.limits(t))
	require.ErrorIs(t, err, awsutils.ErrUnauthorized)
	assert.LessOrEqual(t, sim.Calls()["DescribeNetworkInterfaces"], 2, "not retried beyond the SDK's attempts")
}

package awsutils

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// TestAllocENIKeepsANewENIWhoseAttachIsThrottled: the account's attach
// bucket holds one token and refills one a second, so the second ENI's
// attach is throttled through the SDK's attempts. AllocENI waits and
// attaches it, rather than deleting it and making another.
func TestAllocENIKeepsANewENIWhoseAttachIsThrottled(t *testing.T) {
	throttle := &ec2sim.ThrottleConfig{Actions: map[string]ec2sim.Bucket{
		"AttachNetworkInterface": {Capacity: 1, RefillPerSecond: 1},
	}}
	sim, c := simClient(t, ec2sim.Config{Throttle: throttle}, Options{})
	ctx := context.Background()
	_, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
	require.NoError(t, err)
	sim.ResetCalls()
	second, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
	require.NoError(t, err)
	assert.True(t, mustSimENI(t, sim, second.ID).Attached)
	assert.Equal(t, 1, callsFor(sim, "CreateNetworkInterface"), "the ENI made once")
	assert.Zero(t, callsFor(sim, "DeleteNetworkInterface"), "and not deleted")
	assert.Greater(t, callsFor(sim, "AttachNetworkInterface"), 1, "its attach was throttled, then retried")
	assert.Positive(t, sim.ThrottleStats()["AttachNetworkInterface"].Throttled)
}

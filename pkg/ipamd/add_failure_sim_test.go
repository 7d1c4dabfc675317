package ipamd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// fillPool assigns addresses until the datastore has none left.
func (n *simNode) fillPool(t *testing.T, prefix string) []datastore.Allocation {
	t.Helper()
	var out []datastore.Allocation
	for i := 0; ; i++ {
		key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("%s-%d", prefix, i), IfName: "eth0"}
		a, err := n.agent.store.Assign(key, datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: key.ContainerID})
		if errors.Is(err, datastore.ErrNoAvailableIP) {
			return out
		}
		require.NoError(t, err)
		out = append(out, a)
	}
}

// What the agent wires into the gRPC handlers names the cause on a node of the simulator: max
// pods, then a released address cooling down.
func TestAddFailureExplainedAtMaxPodsThenCooling(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"IP_COOLDOWN_PERIOD": "30", "WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "9"},
		func(o *Options) { o.MaxPods = 9 })
	n.settle(t, 10)
	pods := n.fillPool(t, "pod")
	require.Len(t, pods, 9, "one ENI's 9 secondary addresses: max pods")
	n.agent.pool.Step(context.Background())

	c := n.agent.rpc.Explain()
	assert.Equal(t, addfail.MaxPods, c.Reason, c.Line)
	assert.Equal(t, "max_pods: the node is at max pods (max pods 9, 9 of 9 addresses assigned); an address frees when a pod on the node is deleted", c.Line)

	_, err := n.agent.store.Release(pods[0].Key)
	require.NoError(t, err)
	c = n.agent.rpc.Explain()
	assert.Equal(t, addfail.CoolingDown, c.Reason, c.Line)
	assert.True(t, strings.HasPrefix(c.Line, "cooling_down: released addresses are cooling down (1 cooling, IP_COOLDOWN_PERIOD 30s, 8 of 9 addresses assigned); the first is free in "), c.Line)
}

// A full subnet: the ENI's subnet is named, and when growth is retried.
func TestAddFailureExplainedWhenTheSubnetIsFull(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "1"},
		func(o *Options) { o.Timings.SubnetCooldown = time.Hour })
	n.settle(t, 10)
	subnet := n.sim.SubnetIDs()[0]
	n.sim.SetSubnetExhausted(subnet, true)
	n.fillPool(t, "pod")
	n.agent.pool.Step(context.Background()) // growth asks EC2 and is refused

	c := n.agent.rpc.Explain()
	require.Equal(t, addfail.SubnetExhausted, c.Reason, c.Line)
	// The free count is the last DescribeSubnets answer's (the listing
	// before the subnet filled up), with its age.
	free, _, ok := n.agent.subnetFigures().Free(subnet)
	require.True(t, ok, "ipamd has an answer for its ENI's subnet")
	assert.Contains(t, c.Line, fmt.Sprintf("subnet_exhausted: the subnet has no free addresses (%s, %d free at DescribeSubnets ", subnet, free))
	assert.Contains(t, c.Line, "; growth is retried in ")
}

package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WaitPool waits until the agent's pool holds at least want addresses.
func (n *Node) WaitPool(t testing.TB, want int, within time.Duration) {
	t.Helper()
	var total int
	took, ok := WaitFor(within, func() bool {
		infos, err := n.IPAMD.ENIs()
		total = infos.TotalIPs
		return err == nil && total >= want
	})
	require.Truef(t, ok, "pool holds %d addresses after %s, want %d", total, within, want)
	t.Logf("pool reached %d addresses in %v", total, took.Round(time.Millisecond))
}

// TestThirtyPods creates 30 pods through the CRI: each gets its own address
// from the instance's ENIs (as EC2 records them), its namespace is wired
// (address, default route via 169.254.1.1), pods reach each other, and
// after deletion every address is back in the pool.
func TestThirtyPods(t *testing.T) {
	n := NewNode(t, Options{InstanceType: "m5.4xlarge", Env: map[string]string{"MINIMUM_IP_TARGET": "32", "WARM_IP_TARGET": "2"}})
	n.WaitPool(t, 32, 30*time.Second)

	pods := n.ParallelRun(t, "web", 30, 3)
	t.Logf("FIGURE 30-pod create-to-IP latency: %s", n.CreateLatency.Summary())
	// The agent set up the ENIs it attached, in the node's namespace.
	enis, err := n.CheckENILinks()
	require.NoError(t, err)
	require.NotZero(t, enis, "the pool grew onto a secondary ENI")

	ec2 := n.EC2PodIPs()
	seen := map[netip.Addr]string{}
	for _, p := range pods {
		if other, dup := seen[p.IP]; dup {
			t.Errorf("pods %s and %s both got %s", other, p.Name, p.IP)
		}
		seen[p.IP] = p.Name
		_, inEC2 := ec2[p.IP]
		assert.Truef(t, inEC2, "pod %s has %s, which EC2 does not show on the instance's ENIs", p.Name, p.IP)
		assert.NoError(t, n.CheckPodNetwork(p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := n.Observe(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.Problems())
	assert.Len(t, st.Assigned, 30, "introspection: assigned addresses")
	for _, p := range pods {
		a, ok := st.Assigned[p.IP]
		if assert.Truef(t, ok, "introspection does not show %s (pod %s) assigned", p.IP, p.Name) {
			assert.Equal(t, p.Ref(), a.Pod, "introspection: owner of %s", p.IP)
		}
		assert.Equal(t, p.IP, st.Checkpoint[p.ID], "checkpoint: address of container %s", short(p.ID))
	}

	// A ring of pings: every pod reaches the next one through the node.
	start := time.Now()
	for i, p := range pods {
		q := pods[(i+1)%len(pods)]
		assert.NoErrorf(t, n.Ping(p, q), "ping %s (%s) -> %s (%s)", p.Name, p.IP, q.Name, q.IP)
	}
	t.Logf("%d pod-to-pod pings in %v", len(pods), time.Since(start).Round(time.Millisecond))

	n.ParallelDelete(t, pods, 3)
	var assigned int
	took, ok := WaitFor(10*time.Second, func() bool {
		infos, err := n.IPAMD.ENIs()
		assigned = infos.AssignedIPs
		return err == nil && assigned == 0
	})
	require.Truef(t, ok, "%d addresses still assigned after deleting every pod", assigned)
	t.Logf("all addresses back in the pool %v after the last delete (IP_COOLDOWN_PERIOD=0)", took.Round(time.Millisecond))
	st, err = n.Observe(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.Problems())
	assert.Empty(t, st.Checkpoint, "checkpoint after deleting every pod")
	assert.Empty(t, n.IPAMD.Queue(), "no DEL was queued: ipamd was up")
}

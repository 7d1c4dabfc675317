package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLeakedPoolAtMaxPods is the reported node: max pods equals the pool
// (m5.large, MAX_ENI=1: 9 addresses, node capacity 9 pods) and every
// address is held by a pod that no longer exists (DELs lost while ipamd
// was down). New pods fail until the pool manager's leak signal triggers
// the reconciler; then they start within seconds of the trigger.
func TestLeakedPoolAtMaxPods(t *testing.T) {
	const pool = 9
	n := NewNode(t, Options{InstanceType: "m5.large", MaxPods: pool,
		Env: map[string]string{"MAX_ENI": "1", "WARM_ENI_TARGET": "1"}})
	n.WaitPool(t, pool, 15*time.Second)
	pods := n.ParallelRun(t, "full", pool, 3)

	require.NoError(t, n.IPAMD.Stop())
	for _, p := range pods {
		n.MustDeletePod(t, p)
	}
	dropped, err := n.IPAMD.DropQueue()
	require.NoError(t, err)
	require.Equal(t, pool, dropped)
	// A node that has been leaking for a while: the allocations are past
	// the reconciler's grace period when ipamd comes back.
	time.Sleep(time.Until(pods[len(pods)-1].Created.Add(6*time.Second + 500*time.Millisecond)))

	restart := time.Now()
	require.NoError(t, n.IPAMD.Start())
	infos, err := n.IPAMD.ENIs()
	require.NoError(t, err)
	require.Equal(t, pool, infos.TotalIPs, "MAX_ENI=1 keeps the pool at one ENI")
	require.Equal(t, pool, infos.AssignedIPs, "every address is held by a deleted pod")

	var failures int
	var first *Pod
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		p, err := n.RunPod(ctx, n.NextName("new"))
		cancel()
		if err == nil {
			first = p
			break
		}
		failures++
		time.Sleep(250 * time.Millisecond)
	}
	require.NotNil(t, first, "no pod could start within 60s of the restart")
	started := time.Now()
	triggers, err := n.IPAMD.LogLines("pool is at max pods")
	require.NoError(t, err)
	var trigger time.Time
	for _, tt := range triggers {
		if tt.After(restart) {
			trigger = tt
			break
		}
	}
	require.False(t, trigger.IsZero(), "the pool manager raised the leak signal")
	reclaims, err := n.IPAMD.LogLines("reclaimed leaked pod IP")
	require.NoError(t, err)
	require.NotEmpty(t, reclaims)
	t.Logf("FIGURE max-pods leak: %d RunPodSandbox failures; leak signal %v after restart; first reclaim %v after the signal; first new pod running %v after the signal",
		failures, trigger.Sub(restart).Round(time.Millisecond), reclaims[0].Sub(trigger).Round(time.Millisecond),
		started.Sub(trigger).Round(time.Millisecond))
	assert.Positive(t, failures, "new pods fail while the pool is full of leaks")
	assert.Less(t, started.Sub(trigger), 20*time.Second, "pods start within seconds of the trigger")

	var leakEvent bool
	for _, e := range n.Kube.Events() {
		if e.Mentions("PodIPLeakSuspected") && e.Mentions("Warning") && e.Mentions(n.Kube.NodeName) {
			leakEvent = true
		}
	}
	assert.True(t, leakEvent, "a PodIPLeakSuspected warning event was posted on the node")

	// The rest of the pool is usable too.
	more := n.ParallelRun(t, "refill", pool-1, 3)
	st := requireConsistent(t, n)
	assert.Len(t, st.Checkpoint, pool)
	for _, p := range append(more, first) {
		assert.NoError(t, n.CheckPodNetwork(p))
	}
}

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIPAMDMemory110Pods reports ipamd's resident memory with no pods and
// with 110 pods (the usual kubelet max-pods) on an m5.4xlarge whose pool
// is grown up front (MINIMUM_IP_TARGET), and checks the node stays
// consistent at that size. Each figure is split into anonymous pages
// (heap, stacks) and file-backed ones (the binary's text and data).
func TestIPAMDMemory110Pods(t *testing.T) {
	const pods = 110
	n := NewNode(t, Options{InstanceType: "m5.4xlarge", Env: map[string]string{"MINIMUM_IP_TARGET": "112", "WARM_IP_TARGET": "4"}})
	memStart, err := n.IPAMD.Memory()
	require.NoError(t, err)
	n.WaitPool(t, 112, 60*time.Second)
	mem0, err := n.IPAMD.Memory()
	require.NoError(t, err)

	start := time.Now()
	created := n.ParallelRun(t, "mem", pods, 3)
	t.Logf("%d pods created in %v; create-to-IP latency %s", pods, time.Since(start).Round(time.Millisecond), n.CreateLatency.Summary())
	mem110, err := n.IPAMD.Memory()
	require.NoError(t, err)
	st := requireConsistent(t, n)
	require.Len(t, st.Checkpoint, pods)
	t.Logf("FIGURE ipamd RSS: %v at start, %v at 0 pods (pool %d), %v at %d pods (+%d KiB)",
		memStart, mem0, st.TotalIPs, mem110, pods, mem110.RSS-mem0.RSS)

	start = time.Now()
	n.ParallelDelete(t, created, 3)
	t.Logf("%d pods deleted in %v", pods, time.Since(start).Round(time.Millisecond))
	st = requireConsistent(t, n)
	require.Empty(t, st.Checkpoint)
}

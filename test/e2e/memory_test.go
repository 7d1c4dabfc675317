package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIPAMDMemory110Pods reports ipamd's resident memory with no pods and
// with 110 pods (the usual kubelet max-pods) on an m5.4xlarge whose pool
// is grown up front (MINIMUM_IP_TARGET), and checks the node stays
// consistent at that size.
func TestIPAMDMemory110Pods(t *testing.T) {
	const pods = 110
	n := NewNode(t, Options{InstanceType: "m5.4xlarge", Env: map[string]string{"MINIMUM_IP_TARGET": "112", "WARM_IP_TARGET": "4"}})
	rssStart, err := n.IPAMD.RSSKiB()
	require.NoError(t, err)
	n.WaitPool(t, 112, 60*time.Second)
	rss0, err := n.IPAMD.RSSKiB()
	require.NoError(t, err)

	start := time.Now()
	created := n.ParallelRun(t, "mem", pods, 3)
	t.Logf("%d pods created in %v; create-to-IP latency %s", pods, time.Since(start).Round(time.Millisecond), n.CreateLatency.Summary())
	rss110, err := n.IPAMD.RSSKiB()
	require.NoError(t, err)
	st := requireConsistent(t, n)
	require.Len(t, st.Checkpoint, pods)
	t.Logf("FIGURE ipamd VmRSS: %d KiB at start, %d KiB at 0 pods (pool %d), %d KiB at %d pods (+%d KiB)",
		rssStart, rss0, st.TotalIPs, rss110, pods, rss110-rss0)

	start = time.Now()
	n.ParallelDelete(t, created, 3)
	t.Logf("%d pods deleted in %v", pods, time.Since(start).Round(time.Millisecond))
	st = requireConsistent(t, n)
	require.Empty(t, st.Checkpoint)
}

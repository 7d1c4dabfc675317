package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldIPs reports which of ips the agent still has assigned.
func heldIPs(t testing.TB, n *Node, ips []netip.Addr) []netip.Addr {
	t.Helper()
	assigned, _, err := n.IPAMD.Assigned()
	require.NoError(t, err)
	var out []netip.Addr
	for _, ip := range ips {
		if _, ok := assigned[ip]; ok {
			out = append(out, ip)
		}
	}
	return out
}

func podIPs(pods []*Pod) []netip.Addr {
	out := make([]netip.Addr, len(pods))
	for i, p := range pods {
		out[i] = p.IP
	}
	return out
}

// requireConsistent fails t on any inconsistency between runtime, agent
// and EC2.
func requireConsistent(t testing.TB, n *Node) State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := n.Observe(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Problems())
	return st
}

// TestLostDELReplayedFromQueue deletes pods while ipamd is stopped: the
// plugin reports success and queues each DEL, and the restarted ipamd
// replays the queue before it serves, so the addresses are free at once.
func TestLostDELReplayedFromQueue(t *testing.T) {
	n := NewNode(t, Options{})
	pods := n.ParallelRun(t, "q", 8, 2)
	gone, kept := pods[:5], pods[5:]

	require.NoError(t, n.IPAMD.Stop())
	for _, p := range gone {
		n.MustDeletePod(t, p) // both CNI DELs succeed although ipamd is down
	}
	q := n.IPAMD.Queue()
	require.Len(t, q, 5, "queued DELs")
	for _, e := range q {
		assert.Equal(t, "aws-cni", e.NetworkName)
		assert.Equal(t, "eth0", e.IfName)
	}
	cp, err := n.IPAMD.Checkpoint()
	require.NoError(t, err)
	require.Len(t, cp, 8, "the stopped agent's checkpoint still holds every allocation")

	start := time.Now()
	require.NoError(t, n.IPAMD.Start())
	ready := time.Since(start)
	var held []netip.Addr
	took, ok := WaitFor(10*time.Second, func() bool { held = heldIPs(t, n, podIPs(gone)); return len(held) == 0 })
	require.Truef(t, ok, "still held after %v: %v", took, held)
	t.Logf("FIGURE reclaim latency, queued DELs: %d addresses free %v after the restart began (agent serving after %v; replay runs before it serves)",
		len(gone), (ready + took).Round(time.Millisecond), ready.Round(time.Millisecond))
	assert.Empty(t, n.IPAMD.Queue(), "replayed entries are removed")

	st := requireConsistent(t, n)
	assert.Len(t, st.Checkpoint, len(kept))
	for _, p := range kept {
		assert.Equal(t, p.IP, st.Checkpoint[p.ID], "survivor %s keeps its address", p.Name)
		assert.NoError(t, n.CheckPodNetwork(p))
	}
	p := n.MustRunPod(t, n.NextName("after"))
	assert.NoError(t, n.Ping(p, kept[0]))
}

// TestLostDELReclaimedByReconciler loses DELs for good (the queue files are
// deleted while ipamd is down): only the pod-IP reconciler can free the
// addresses. It must wait for the grace period and the runtime's word for
// each sandbox's ID, never free before, and leave a pod created meanwhile
// alone.
func TestLostDELReclaimedByReconciler(t *testing.T) {
	n := NewNode(t, Options{})
	pods := n.ParallelRun(t, "r", 8, 2)
	lost, kept := pods[:3], pods[5:]
	kept = append(kept, pods[3:5]...)
	reclaimLostDELs(t, n, lost, kept)
}

// reclaimLostDELs deletes the lost pods while ipamd is stopped and drops
// their queued DELs, restarts ipamd and creates a pod meanwhile, then
// checks that the reconciler frees exactly the lost pods' addresses, not
// before their grace period, and that
// the kept pods and the new one keep theirs. It returns the new pod.
func reclaimLostDELs(t *testing.T, n *Node, lost, kept []*Pod) *Pod {
	t.Helper()
	const grace = ReconcileGrace // POD_IP_RECONCILE_GRACE_PERIOD (harness default, the agent's floor)
	require.NoError(t, n.IPAMD.Stop())
	for _, p := range lost {
		n.MustDeletePod(t, p)
	}
	dropped, err := n.IPAMD.DropQueue()
	require.NoError(t, err)
	require.Equal(t, len(lost), dropped, "queued DELs removed")

	restart := time.Now()
	require.NoError(t, n.IPAMD.Start())
	fresh := n.MustRunPod(t, n.NextName("meanwhile"))

	time.Sleep(time.Until(restart.Add(grace / 2)))
	require.ElementsMatch(t, podIPs(lost), heldIPs(t, n, podIPs(lost)), "at grace/2 after the restart the leaked addresses are still held")

	// The first pass past their grace period frees them, on the runtime's
	// "not found" for each sandbox's ID.
	var held []netip.Addr
	took, ok := WaitFor(120*time.Second, func() bool {
		held = heldIPs(t, n, podIPs(lost))
		return len(held) == 0
	})
	reclaimed := time.Now()
	require.Truef(t, ok, "reconciler did not free %v within %v", held, took)
	since := reclaimed.Sub(restart)
	t.Logf("FIGURE reclaim latency, reconciler only: %d addresses free %v after the restart (grace %v, interval %v; first pass %v after start)",
		len(lost), since.Round(time.Millisecond), grace, ReconcileInterval, ReconcileStartDelay)
	if st, err := n.IPAMD.Reconciler(); assert.NoError(t, err) {
		assert.GreaterOrEqual(t, st.Totals.Reclaimed, len(lost), "the reconciler freed them")
	}
	for _, p := range lost {
		assert.GreaterOrEqualf(t, reclaimed.Sub(p.Created), grace, "%s freed before its grace period", p.IP)
	}
	st, err := n.IPAMD.Reconciler()
	require.NoError(t, err)
	assert.Equal(t, len(lost), st.Totals.Reclaimed, "reconciler totals")

	s := requireConsistent(t, n)
	assert.Equal(t, fresh.IP, s.Checkpoint[fresh.ID], "the pod created meanwhile keeps its address")
	assert.NoError(t, n.CheckPodNetwork(fresh))
	assert.NoError(t, n.Ping(fresh, kept[0]))
	for _, p := range kept {
		assert.Equal(t, p.IP, s.Checkpoint[p.ID], "survivor %s keeps its address", p.Name)
	}
	return fresh
}

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leakedFor is how far back a node's lost DELs are moved (the checkpoint's
// allocation times, see IPAMD.BackdateCheckpoint): a node that has been
// leaking for a while, every leak well past the reconciler's grace period
// when ipamd comes back, as on the reported nodes.
const leakedFor = 10 * time.Minute

// recoveryBound is the generous limit on the time from the first failed ADD
// to the first pod running on a node full of leaks. The figures go in the
// issue note; this only catches a node that does not recover.
const recoveryBound = 2*ReconcileGrace + ReconcileInterval

// FillPods runs count pods, at most workers at a time and never more at
// once than the pool has addresses available, so the pool manager can grow
// the pool (ENIs, prefixes) as pods arrive. A RunPodSandbox that fails
// anyway (the pool not grown yet) is retried, as a kubelet would.
func (n *Node) FillPods(t testing.TB, prefix string, count, workers int, within time.Duration) []*Pod {
	t.Helper()
	deadline := time.Now().Add(within)
	var out []*Pod
	var failures int
	var last error
	for len(out) < count {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d pods running after %v (%d failed attempts, last: %v)", len(out), count, within, failures, last)
		}
		infos, err := n.IPAMD.ENIs()
		avail := infos.TotalIPs - infos.AssignedIPs
		if err != nil || avail <= 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		batch := min(avail, count-len(out), workers)
		var mu sync.Mutex
		var wg sync.WaitGroup
		failed := false
		for range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				p, err := n.RunPod(ctx, n.NextName(prefix))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures++
					failed, last = true, err
					return
				}
				out = append(out, p)
			}()
		}
		wg.Wait()
		if failed {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if failures > 0 {
		t.Logf("filling %d pods: %d RunPodSandbox attempts failed while the pool grew (retried)", count, failures)
	}
	slices.SortFunc(out, func(a, b *Pod) int { return a.Created.Compare(b.Created) })
	return out
}

// Recovery is how a new pod got started on a node whose pool was full.
type Recovery struct {
	Pod      *Pod // nil if none ran in time
	Failures int  // failed RunPodSandbox calls before it ran
	// FirstFailedADD is when ipamd logged the first failed AddNetwork after
	// the attempts began (else when the first RunPodSandbox returned its
	// error); zero when no attempt failed.
	FirstFailedADD time.Time
	Running        time.Time // when the pod ran with its address
}

// FailedToRunning is the time from the first failed ADD to the pod running
// (0 when no ADD failed).
func (r Recovery) FailedToRunning() time.Duration {
	if r.FirstFailedADD.IsZero() || r.Pod == nil {
		return 0
	}
	return r.Running.Sub(r.FirstFailedADD)
}

// Figure renders the E2E-FIGURE line of a recovery.
func (r Recovery) Figure(name string) string {
	if r.Pod == nil {
		return fmt.Sprintf("E2E-FIGURE %s first-failed-add->running: never (%d failed attempts)", name, r.Failures)
	}
	if r.FirstFailedADD.IsZero() {
		return fmt.Sprintf("E2E-FIGURE %s first-failed-add->running: 0s (no ADD failed)", name)
	}
	return fmt.Sprintf("E2E-FIGURE %s first-failed-add->running: %.1fs (%d failed RunPodSandbox attempts)",
		name, r.FailedToRunning().Seconds(), r.Failures)
}

// StartRetrying starts one new pod the way a kubelet retries a sandbox whose
// ADD failed (here every 250 ms, more eagerly than a kubelet's backoff) until
// it runs or within passes.
func (n *Node) StartRetrying(t testing.TB, prefix string, within time.Duration) Recovery {
	t.Helper()
	began := time.Now()
	var r Recovery
	var firstReturn time.Time
	for time.Since(began) < within {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		p, err := n.RunPod(ctx, n.NextName(prefix))
		cancel()
		if err == nil {
			r.Pod, r.Running = p, time.Now()
			break
		}
		if r.Failures == 0 {
			firstReturn = time.Now()
		}
		r.Failures++
		time.Sleep(250 * time.Millisecond)
	}
	if r.Failures > 0 {
		r.FirstFailedADD = firstReturn
		if fails, err := n.IPAMD.LogLines("AddNetwork failed"); err == nil {
			for _, at := range fails {
				if !at.Before(began) {
					r.FirstFailedADD = at
					break
				}
			}
		}
	}
	return r
}

// logAfter returns the agent's log lines containing substr logged at or
// after since.
func logAfter(t testing.TB, n *Node, substr string, since time.Time) []time.Time {
	t.Helper()
	all, err := n.IPAMD.LogLines(substr)
	require.NoError(t, err)
	var out []time.Time
	for _, at := range all {
		if !at.Before(since) {
			out = append(out, at)
		}
	}
	return out
}

// heldFor lists the pods the agent's checkpoint still holds an address
// for (by container ID: a freed address may already be a new pod's).
func heldFor(t testing.TB, n *Node, pods []*Pod) []string {
	t.Helper()
	entries, err := n.IPAMD.Checkpoint()
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, e := range entries {
		ids[e.Key.ContainerID] = true
	}
	var out []string
	for _, p := range pods {
		if ids[p.ID] {
			out = append(out, p.Name+" "+p.IP.String())
		}
	}
	return out
}

// leakEventPosted reports whether a PodIPLeakSuspected warning naming
// reason was posted on the node.
func leakEventPosted(n *Node, reason string) bool {
	for _, e := range n.Kube.Events() {
		if e.Mentions("PodIPLeakSuspected") && e.Mentions("Warning") && e.Mentions(n.Kube.NodeName) && e.Mentions(reason) {
			return true
		}
	}
	return false
}

// loseDELsWhileDown stops ipamd, deletes the pods (the plugin queues their
// DELs) and then loses the queue, so only the pod-IP reconciler can free
// their addresses; the checkpoint is moved leakedFor into the past. ipamd
// is left stopped.
func loseDELsWhileDown(t testing.TB, n *Node, pods []*Pod) {
	t.Helper()
	require.NoError(t, n.IPAMD.Stop())
	n.ParallelDelete(t, pods, 4)
	dropped, err := n.IPAMD.DropQueue()
	require.NoError(t, err)
	require.Equal(t, len(pods), dropped, "queued DELs removed")
	require.NoError(t, n.IPAMD.BackdateCheckpoint(leakedFor))
}

// TestFullM5LargeRecovers is a default m5.large in secondary-IP mode (3
// ENIs x 9 = 27 addresses, max pods 29) whose every address is held by a
// pod that no longer exists (DELs lost while ipamd was down). Max pods is
// never reached, so the leak signal must come from the instance's address
// capacity; the reconciler then frees the leaks (all of them at once, on
// the runtime's word for each sandbox, without a brake) and new pods start.
func TestFullM5LargeRecovers(t *testing.T) {
	const capacity, maxPods = 27, 29
	n := NewNode(t, Options{InstanceType: "m5.large", MaxPods: maxPods})
	pods := n.FillPods(t, "full", capacity, 4, 45*time.Second)
	infos, err := n.IPAMD.ENIs()
	require.NoError(t, err)
	require.Equal(t, capacity, infos.TotalIPs, "the pool holds the instance's capacity: 3 ENIs x 9")
	require.Len(t, infos.ENIs, 3)

	loseDELsWhileDown(t, n, pods)
	held, err := n.IPAMD.Checkpoint()
	require.NoError(t, err)
	require.Len(t, held, capacity, "every address is held by a deleted pod when ipamd comes back")
	restart := time.Now()
	require.NoError(t, n.IPAMD.Start())
	infos, err = n.IPAMD.ENIs()
	require.NoError(t, err)
	require.Equal(t, capacity, infos.TotalIPs)
	// The reconciler may be freeing the leaks already: the pool step at
	// start raises the leak signal, and the pass it triggers frees them.

	r := n.StartRetrying(t, "new", recoveryBound+30*time.Second)
	t.Log(r.Figure("full-node-m5large"))
	require.NotNil(t, r.Pod, "no pod could start after the restart")
	assert.Less(t, r.FailedToRunning(), recoveryBound, "first failed ADD to running pod")

	capTriggers := append(logAfter(t, n, "pool at the instance's address capacity", restart),
		logAfter(t, n, "pool has all the ENIs it may use", restart)...)
	assert.NotEmpty(t, capTriggers, "the leak signal fired at the address capacity")
	assert.Empty(t, logAfter(t, n, "pool at max pods", restart), "27 addresses on a node of 29 pods is not max pods")
	assert.True(t, leakEventPosted(n, "capacity") || leakEventPosted(n, "all the ENIs"),
		"a PodIPLeakSuspected warning naming the capacity was posted on the node")
	rec, err := n.IPAMD.Reconciler()
	require.NoError(t, err)
	t.Logf("reconciler after recovery: %d passes (%d skipped), %d reclaimed; first pod %s got %s",
		rec.Totals.Passes, rec.Totals.Skipped, rec.Totals.Reclaimed, r.Pod.Name, r.Pod.IP)
	assert.Positive(t, rec.Totals.Reclaimed)

	// The rest of the pool is usable too.
	more := n.FillPods(t, "refill", capacity-1, 4, 45*time.Second)
	st := requireConsistent(t, n)
	assert.Len(t, st.Checkpoint, capacity)
	for _, p := range append(more, r.Pod) {
		assert.NoError(t, n.CheckPodNetwork(p))
	}
}

// TestSeedPDNodeRecovers is the node of the report: prefix delegation, max
// pods 62, 4 prefixes (64 addresses) all allocated, of which only 50 belong
// to live pods (14 DELs lost while ipamd was down). 64 allocations on a
// node of 62 pods is the max-pods leak signal; the 14 are freed and the
// node fills up to its 62 pods again.
func TestSeedPDNodeRecovers(t *testing.T) {
	const addresses, live, maxPods = 64, 50, 62
	// WARM_PREFIX_TARGET=4 builds the 4 prefixes before the pods come (max
	// pods stops the pool there); ipamd comes back with the reported
	// node's WARM_PREFIX_TARGET=1.
	n := NewNode(t, Options{InstanceType: "m5.large", MaxPods: maxPods,
		Env: map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "4"}})
	n.WaitPool(t, addresses, 30*time.Second)
	pods := n.FillPods(t, "seed", addresses, 4, 60*time.Second)
	infos, err := n.IPAMD.ENIs()
	require.NoError(t, err)
	require.Equal(t, addresses, infos.TotalIPs, "4 prefixes; max pods keeps a 5th away")

	lost := pods[:addresses-live]
	loseDELsWhileDown(t, n, lost)
	n.IPAMD.Env["WARM_PREFIX_TARGET"] = "1"
	held, err := n.IPAMD.Checkpoint()
	require.NoError(t, err)
	require.Len(t, held, addresses, "64 allocations when ipamd comes back, 50 of them live")
	restart := time.Now()
	require.NoError(t, n.IPAMD.Start())
	infos, err = n.IPAMD.ENIs()
	require.NoError(t, err)
	require.Equal(t, addresses, infos.TotalIPs)

	r := n.StartRetrying(t, "new", recoveryBound+30*time.Second)
	t.Log(r.Figure("seed-pd-node"))
	require.NotNil(t, r.Pod, "no pod could start after the restart")
	assert.Less(t, r.FailedToRunning(), recoveryBound, "first failed ADD to running pod")

	assert.NotEmpty(t, logAfter(t, n, "pool at max pods", restart), "the max-pods leak signal fired")
	assert.True(t, leakEventPosted(n, "max pods"), "a PodIPLeakSuspected warning was posted on the node")
	var stillHeld []string
	_, ok := WaitFor(2*ReconcileInterval, func() bool { stillHeld = heldFor(t, n, lost); return len(stillHeld) == 0 })
	assert.True(t, ok, "every lost pod's allocation is freed: %v still held", stillHeld)

	// The node runs its 62 pods again.
	more := n.FillPods(t, "refill", maxPods-live-1, 4, 30*time.Second)
	st := requireConsistent(t, n)
	assert.Len(t, st.Checkpoint, maxPods)
	for _, p := range append(more, r.Pod) {
		assert.NoError(t, n.CheckPodNetwork(p))
	}
	rec, err := n.IPAMD.Reconciler()
	require.NoError(t, err)
	assert.Equal(t, addresses-live, rec.Totals.Reclaimed, "reconciler totals")
	leaked, err := n.IPAMD.Metric("awscni_ipamd_pod_ip_reconcile_leaked")
	require.NoError(t, err)
	assert.Zero(t, leaked, "nothing is left judged leaked")
}

package e2e

import (
	"io/fs"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The agent's runtime metric: 1 when its last CRI call reached the runtime.
const reachableMetric = "awscni_ipamd_cri_runtime_reachable"

// reconnectMax is the agent's CRI reconnect backoff cap (pkg/cri): a pass
// that comes while the client still waits to redial fails, and the next
// one, an interval later, succeeds.
const reconnectMax = 2 * time.Second

func inode(t testing.TB, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&fs.ModeSocket, "%s is a socket", path)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// loseDELWhileRunning deletes the pod while neither ipamd nor its DEL queue
// can be reached: ipamd's socket is moved aside and a file stands where the
// queue directory was, so the plugin's DEL succeeds (it never fails a pod
// deletion over ipamd) and is lost; only the pod-IP reconciler can free the
// address. ipamd itself keeps running, with the runtime client it has.
func loseDELWhileRunning(t testing.TB, n *Node, p *Pod) {
	t.Helper()
	sock, sockAside := n.IPAMD.Sock, n.IPAMD.Sock+".aside"
	q, qAside := n.IPAMD.QueueDir(), n.IPAMD.QueueDir()+".aside"
	require.NoError(t, os.Rename(sock, sockAside))
	require.NoError(t, os.Rename(q, qAside))
	require.NoError(t, os.WriteFile(q, nil, 0o600))
	func() {
		defer func() {
			for _, err := range []error{os.Remove(q), os.Rename(qAside, q), os.Rename(sockAside, sock)} {
				if err != nil {
					t.Errorf("restoring ipamd's socket and queue: %v", err)
				}
			}
		}()
		n.MustDeletePod(t, p)
	}()
	require.Empty(t, n.IPAMD.Queue(), "the DEL was not queued")
}

// TestContainerdRestartSocketDir restarts the runtime (E2E_RUNTIME;
// containerd by default, hence the name) under a running ipamd that reaches
// it the way the chart mounts it: the socket's directory, read-only, with
// CRI_RUNTIME_ENDPOINT naming the socket inside (harness default). The
// runtime deletes its socket when it stops and makes a new one at the same
// path when it starts; the agent's passes fail meanwhile
// (awscni_ipamd_cri_runtime_reachable 0, nothing freed) and succeed again
// within an interval of the runtime being back. A DEL lost after the restart
// is then reclaimed by that same agent: the node's last address (t3.nano: 2
// ENIs x 1) is taken, the leak signal fires at the address capacity (max
// pods is unknown here), and a new pod gets the leaked address.
func TestContainerdRestartSocketDir(t *testing.T) {
	n := NewNode(t, Options{InstanceType: "t3.nano"})
	n.WaitPool(t, 1, 30*time.Second)
	// Created first so that its grace period runs during the restart.
	leak := n.MustRunPod(t, n.NextName("leak"))
	n.WaitPool(t, 2, 30*time.Second)

	// The agent lists sandboxes through the mounted directory.
	var st ReconcilerStatus
	_, ok := WaitFor(ReconcileStartDelay+ReconcileInterval, func() bool {
		var err error
		st, err = n.IPAMD.Reconciler()
		v, merr := n.IPAMD.Metric(reachableMetric)
		return err == nil && merr == nil && v == 1 && st.RuntimeReachable && !st.LastSuccessfulList.IsZero()
	})
	require.True(t, ok, "the agent reached %s through %s: %+v", n.RT.Name(), n.RT.AgentSocketDir(), st)

	before := inode(t, n.RT.Socket())
	n.RT.Stop()
	stopped := time.Now()
	_, err := os.Stat(n.RT.Socket())
	assert.ErrorIs(t, err, fs.ErrNotExist, "the runtime deletes its socket when it stops")
	took, ok := WaitFor(ReconcileInterval+5*time.Second, func() bool {
		v, err := n.IPAMD.Metric(reachableMetric)
		return err == nil && v == 0
	})
	require.True(t, ok, "%s did not go to 0 within %v of the runtime stopping", reachableMetric, took)
	st, err = n.IPAMD.Reconciler()
	require.NoError(t, err)
	assert.False(t, st.RuntimeReachable)
	assert.True(t, st.LastSuccessfulList.Before(stopped), "no list succeeded while the runtime was down")
	assert.Zero(t, st.Totals.Reclaimed, "nothing freed while the runtime is away")
	t.Logf("%s down: a pass failed %v after the stop (%q)", n.RT.Name(), took.Round(time.Millisecond), st.LastPass.Skipped)

	require.NoError(t, n.RT.Start())
	ready := time.Now()
	n.CRI.Close()
	n.CRI, err = DialCRI(n.RT.Socket())
	require.NoError(t, err)
	// The socket was gone while the runtime was down (asserted above); the
	// new one may reuse the old inode number (tmpfs), so that is only logged.
	t.Logf("socket inode before %d, after the restart %d", before, inode(t, n.RT.Socket()))
	var recovered time.Time
	_, ok = WaitFor(2*ReconcileInterval+reconnectMax, func() bool {
		st, err = n.IPAMD.Reconciler()
		v, merr := n.IPAMD.Metric(reachableMetric)
		if err != nil || merr != nil || v != 1 || !st.LastSuccessfulList.After(ready) {
			return false
		}
		recovered = st.LastSuccessfulList
		return true
	})
	require.True(t, ok, "no successful pass within %v of the runtime being back: %+v", 2*ReconcileInterval+reconnectMax, st)
	recovery := recovered.Sub(ready)
	t.Logf("E2E-FIGURE containerd-restart recovery: %.1fs (%s ready to the first successful pass; interval %v, reconnect backoff cap %v)",
		recovery.Seconds(), n.RT.Name(), ReconcileInterval, reconnectMax)
	assert.True(t, st.RuntimeReachable)
	assert.LessOrEqual(t, recovery, ReconcileInterval+reconnectMax, "passes succeed again within an interval (plus the reconnect backoff)")

	// A DEL lost after the restart.
	loseDELWhileRunning(t, n, leak)
	require.Equal(t, []netip.Addr{leak.IP}, heldIPs(t, n, []netip.Addr{leak.IP}), "the lost DEL left the address allocated")
	fill := n.MustRunPod(t, n.NextName("fill"))
	// The next pod comes once the leak is past its grace period (before
	// that, nothing may free it).
	time.Sleep(time.Until(leak.Created.Add(ReconcileGrace)))
	r := n.StartRetrying(t, "new", recoveryBound+30*time.Second)
	t.Log(r.Figure("containerd-restart-lost-del"))
	require.NotNil(t, r.Pod, "no pod could start on the full node")
	assert.Equal(t, leak.IP, r.Pod.IP, "the new pod got the reclaimed address")
	assert.Less(t, r.FailedToRunning(), recoveryBound, "first failed ADD to running pod")
	reclaims := logAfter(t, n, "reclaimed leaked pod IP", ready)
	require.NotEmpty(t, reclaims, "the reconciler reclaimed the lost DEL's address")
	assert.GreaterOrEqual(t, reclaims[0].Sub(leak.Created), ReconcileGrace, "freed before its grace period")
	t.Logf("FIGURE containerd-restart lost DEL: reclaimed %v after its grace period ended",
		reclaims[0].Sub(leak.Created.Add(ReconcileGrace)).Round(time.Millisecond))
	assert.NotEmpty(t, append(logAfter(t, n, "pool at the instance's address capacity", ready),
		logAfter(t, n, "pool has all the ENIs it may use", ready)...), "the leak signal fired at the address capacity")

	s := requireConsistent(t, n)
	assert.Len(t, s.Checkpoint, 2)
	for _, p := range []*Pod{fill, r.Pod} {
		assert.NoError(t, n.CheckPodNetwork(p))
	}
	assert.NoError(t, n.Ping(r.Pod, fill))
}

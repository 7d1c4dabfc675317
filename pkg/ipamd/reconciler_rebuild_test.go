package ipamd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
	"github.com/aws/amazon-vpc-cni-k8s/test/fakecri"
)

// A lost checkpoint (missing file on a node whose ENIs carry addresses) is
// rebuilt from the runtime's sandboxes before any ADD is served; an empty
// sandbox list proves nothing then, so it is trusted only after the grace
// period, and the rebuild marker carries that distrust across restarts.

// startRebuildNode runs an agent on a 2x3 DevPool (non-fresh: its ENIs
// carry addresses) in dir, with no checkpoint unless one is there already.
func startRebuildNode(t *testing.T, dir string, client sandboxSource, rc ReconcilerConfig) *testNode {
	t.Helper()
	rc.Mode = ReconcileEnforce
	return startNodeOpts(t, dir, DevPool{ENIs: 2, PerENI: 3}, func(o *Options) {
		o.CRI = client
		o.Config.Reconciler = rc
	})
}

func markerOf(n *testNode) string { return n.agent.opts.Config.CheckpointPath + RebuildMarkerSuffix }

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// emptyRuntime is a fake runtime that lists no sandbox at all.
func emptyRuntime(t *testing.T) (*fakecri.Runtime, sandboxSource) {
	t.Helper()
	rt, client := startFakeCRI(t)
	rt.Remove(hostSandboxID)
	return rt, client
}

// TestLostCheckpointWithEmptySandboxListWaitsForGrace guards a lost
// checkpoint met by a runtime that lists nothing (a runtime still starting,
// or one answering wrongly): ipamd starts but serves no address, keeps the
// marker, and only once the grace period since start has passed does its
// own pass verify the addresses and remove the marker.
func TestLostCheckpointWithEmptySandboxListWaitsForGrace(t *testing.T) {
	const grace = 600 * time.Millisecond
	_, client := emptyRuntime(t)
	start := time.Now()
	n := startRebuildNode(t, t.TempDir(), client, ReconcilerConfig{StartDelay: 10 * time.Millisecond, Interval: 20 * time.Millisecond, Grace: grace})
	marker := markerOf(n)
	b, err := os.ReadFile(marker)
	require.NoError(t, err, "the lost checkpoint is recorded")
	assert.Equal(t, markerMissing, strings.TrimSpace(string(b)))
	assert.Equal(t, 6, n.agent.store.Stats().PendingIPs)
	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	assert.Empty(t, add(t, c, "early"), "no ADD is served from unverified addresses")
	st := getReconStatus(t, n)
	assert.Equal(t, 6, st.PendingAddresses)
	assert.Equal(t, waitEmptyList, st.PendingReason)

	// The agent's own passes (every 20 ms) must not verify before the
	// grace period has passed since start.
	deadline := time.Now().Add(grace + 3*time.Second)
	for {
		waiting := fileExists(marker) && n.agent.store.Stats().PendingIPs == 6
		now := time.Now()
		if now.Sub(start) < grace {
			require.True(t, waiting, "verified %s after start, before the grace period", now.Sub(start))
		}
		if !fileExists(marker) && n.agent.store.Stats().PendingIPs == 0 {
			break
		}
		require.True(t, now.Before(deadline), "the addresses were never verified after the grace period")
		time.Sleep(10 * time.Millisecond)
	}
	assert.GreaterOrEqual(t, time.Since(start), grace)
	assert.Equal(t, reconStatusView{RuntimeReachable: true}, getReconStatus(t, n))
	assert.NotEmpty(t, add(t, c, "late"), "verified addresses serve ADDs")
}

// TestLostCheckpointRebuildAdoptsLiveAndFreesTheRest guards the common
// lost checkpoint: the runtime lists a running pod using one of the node's
// addresses, so the rebuild at start gives it that address, frees the
// others at once (no grace wait) and removes the marker; no ADD ever gets
// the running pod's address.
func TestLostCheckpointRebuildAdoptsLiveAndFreesTheRest(t *testing.T) {
	rt, client := startFakeCRI(t) // lists aws-node's own sandbox too
	const liveIP = "10.250.1.2"
	rt.Add(liveSandbox("live", "web", liveIP))
	n := startRebuildNode(t, t.TempDir(), client, ReconcilerConfig{StartDelay: time.Hour, Interval: time.Hour})

	assert.False(t, fileExists(markerOf(n)), "fully rebuilt at start: marker removed")
	assert.Zero(t, n.agent.store.Stats().PendingIPs)
	a, ok := n.agent.store.Find(podKey("live"))
	require.True(t, ok)
	assert.Equal(t, liveIP, a.IP.String())
	assert.Equal(t, "web", a.Metadata.K8SPodName)

	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	var got []string
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		ip := add(t, c, id)
		require.NotEmpty(t, ip, "the other addresses are free at once")
		got = append(got, ip)
	}
	assert.NotContains(t, got, liveIP)
	assert.Empty(t, add(t, c, "f"), "the running pod's address is never handed out")
}

// TestRebuildMarkerSurvivesRestartBeforeGrace guards a restart during the
// rebuild: the first start rewrote an (empty) intact checkpoint, but the
// marker keeps the empty list untrusted at the next start, with the grace
// period counted from that start; once a pass clears the marker, a later
// start trusts its clean checkpoint again.
func TestRebuildMarkerSurvivesRestartBeforeGrace(t *testing.T) {
	const grace = 700 * time.Millisecond
	dir := t.TempDir()
	_, client := emptyRuntime(t)
	rc := ReconcilerConfig{StartDelay: time.Hour, Interval: time.Hour, Grace: grace}

	first := startRebuildNode(t, dir, client, rc)
	marker, checkpoint := markerOf(first), first.agent.opts.Config.CheckpointPath
	require.True(t, fileExists(marker))
	assert.Equal(t, 6, first.agent.store.Stats().PendingIPs)
	first.stop(t)
	require.True(t, fileExists(checkpoint), "the first start wrote a fresh, intact checkpoint")
	require.True(t, fileExists(marker), "the marker outlives the process")

	secondStart := time.Now()
	second := startRebuildNode(t, dir, client, rc)
	rep := second.agent.recon.Pass(context.Background(), false)
	require.Less(t, time.Since(secondStart), grace, "the checks below must run within the grace period")
	assert.Equal(t, verifyResult{Waiting: 6, Reason: waitEmptyList}, rep.Pending, "an intact checkpoint written during a rebuild proves nothing")
	assert.Equal(t, 6, second.agent.store.Stats().PendingIPs)
	assert.True(t, fileExists(marker))
	conn := second.dial(t)
	c := rpc.NewCNIBackendClient(conn)
	assert.Empty(t, add(t, c, "early"))
	conn.Close()

	require.Eventually(t, func() bool {
		return second.agent.recon.Pass(context.Background(), false).Pending.Verified == 6
	}, grace+3*time.Second, 20*time.Millisecond, "verified once the grace period since this start has passed")
	assert.GreaterOrEqual(t, time.Since(secondStart), grace)
	assert.False(t, fileExists(marker))
	second.stop(t)

	third := startRebuildNode(t, dir, client, rc)
	assert.Zero(t, third.agent.store.Stats().PendingIPs, "marker gone, checkpoint intact: a clean start trusts the empty list")
	assert.False(t, fileExists(filepath.Join(dir, "ipam.json"+RebuildMarkerSuffix)), "a clean start writes no marker")
}

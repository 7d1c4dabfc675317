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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// A lost checkpoint (missing file on a node whose ENIs carry addresses) is
// rebuilt from the runtime's sandboxes before any ADD is served; an empty
// sandbox list proves nothing then, so it is never trusted while the
// rebuild marker exists, and the marker carries that distrust across
// restarts.

// startRebuildNode runs an agent on a 2x3 DevPool (non-fresh: its ENIs
// carry addresses) in dir, with no checkpoint unless one is there already.
func startRebuildNode(t *testing.T, dir string, client podip.SandboxSource, rc podip.Config) *testNode {
	t.Helper()
	rc.Mode = podip.Enforce
	return startNodeOpts(t, dir, devpool.Pool{ENIs: 2, PerENI: 3}, func(o *Options) {
		o.CRI = client
		o.Config.Reconciler = rc
	})
}

func markerOf(n *testNode) string {
	return n.agent.opts.Config.CheckpointPath + podip.RebuildMarkerSuffix
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// emptyRuntime is a fake runtime that lists no sandbox at all.
func emptyRuntime(t *testing.T) (*fakecri.Runtime, podip.SandboxSource) {
	t.Helper()
	rt, client := testsupport.StartFakeCRI(t)
	rt.Remove(testsupport.HostSandboxID)
	return rt, podip.CRISource(client)
}

// TestLostCheckpointWithEmptySandboxListNeverTrustsIt guards a lost
// checkpoint met by a runtime that lists nothing (the wrong runtime, e.g. an
// unused containerd on a CRI-O node, or one still starting): ipamd starts but
// serves no address and keeps the marker for as long as the list stays
// empty, however long that is; the first non-empty list (aws-node's own
// sandbox shows up) verifies the addresses and removes the marker.
func TestLostCheckpointWithEmptySandboxListNeverTrustsIt(t *testing.T) {
	const grace = 300 * time.Millisecond
	rt, client := emptyRuntime(t)
	n := startRebuildNode(t, t.TempDir(), client, podip.Config{StartDelay: 10 * time.Millisecond, Interval: 20 * time.Millisecond, Grace: grace})
	marker := markerOf(n)
	b, err := os.ReadFile(marker)
	require.NoError(t, err, "the lost checkpoint is recorded")
	assert.Equal(t, string(podip.RebuildMissing), strings.TrimSpace(string(b)))
	assert.Equal(t, 6, n.agent.store.Stats().PendingIPs)
	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	assert.Empty(t, add(t, c, "early"), "no ADD is served from unverified addresses")
	st := getReconStatus(t, n)
	assert.Equal(t, 6, st.PendingAddresses)
	assert.Equal(t, podip.WaitEmptyList, st.PendingReason)

	// The agent's own passes (every 20 ms) never verify on an empty list,
	// not even long after the grace period.
	passes := n.agent.recon.Status().Totals.Passes
	require.Eventually(t, func() bool { return n.agent.recon.Status().Totals.Passes >= passes+20 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(2 * grace)
	assert.True(t, fileExists(marker))
	assert.Equal(t, 6, n.agent.store.Stats().PendingIPs)
	assert.Empty(t, add(t, c, "still"))

	rt.Add(fakecri.Sandbox{ID: testsupport.HostSandboxID, Name: "aws-node-test", Namespace: "kube-system", IP: "192.0.2.10",
		State: runtimeapi.PodSandboxState_SANDBOX_READY})
	require.Eventually(t, func() bool { return !fileExists(marker) && n.agent.store.Stats().PendingIPs == 0 },
		3*time.Second, 10*time.Millisecond, "a non-empty list verifies the addresses and clears the marker")
	assert.Equal(t, reconStatusView{RuntimeReachable: true}, getReconStatus(t, n))
	assert.NotEmpty(t, add(t, c, "late"), "verified addresses serve ADDs")
}

// TestLostCheckpointRebuildAdoptsLiveAndFreesTheRest guards the common
// lost checkpoint: the runtime lists a running pod using one of the node's
// addresses, so the rebuild at start gives it that address, frees the
// others at once (no grace wait) and removes the marker; no ADD ever gets
// the running pod's address.
func TestLostCheckpointRebuildAdoptsLiveAndFreesTheRest(t *testing.T) {
	rt, client := testsupport.StartFakeCRI(t) // lists aws-node's own sandbox too
	const liveIP = "10.250.1.2"
	rt.Add(liveSandbox("live", "web", liveIP))
	n := startRebuildNode(t, t.TempDir(), podip.CRISource(client), podip.Config{StartDelay: time.Hour, Interval: time.Hour})

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

// TestRebuildMarkerSurvivesRestart: a restart during a rebuild must not
// trust the intact checkpoint the first run wrote meanwhile.
func TestRebuildMarkerSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	rt, client := emptyRuntime(t)
	rc := podip.Config{StartDelay: time.Hour, Interval: time.Hour, Grace: 100 * time.Millisecond}

	first := startRebuildNode(t, dir, client, rc)
	marker, checkpoint := markerOf(first), first.agent.opts.Config.CheckpointPath
	require.True(t, fileExists(marker))
	assert.Equal(t, 6, first.agent.store.Stats().PendingIPs)
	first.stop(t)
	require.True(t, fileExists(checkpoint), "the first start wrote a fresh, intact checkpoint")
	require.True(t, fileExists(marker), "the marker outlives the process")

	time.Sleep(2 * rc.Grace)
	second := startRebuildNode(t, dir, client, rc)
	rep := second.agent.recon.Pass(context.Background(), false)
	assert.Equal(t, podip.VerifyResult{Waiting: 6, Reason: podip.WaitEmptyList}, rep.Pending, "an intact checkpoint written during a rebuild proves nothing")
	assert.Equal(t, 6, second.agent.store.Stats().PendingIPs)
	assert.True(t, fileExists(marker))
	conn := second.dial(t)
	c := rpc.NewCNIBackendClient(conn)
	assert.Empty(t, add(t, c, "early"))
	conn.Close()

	rt.Add(fakecri.Sandbox{ID: testsupport.HostSandboxID, Name: "aws-node-test", Namespace: "kube-system", IP: "192.0.2.10",
		State: runtimeapi.PodSandboxState_SANDBOX_READY})
	rep = second.agent.recon.Pass(context.Background(), false)
	assert.Equal(t, 6, rep.Pending.Verified)
	assert.False(t, fileExists(marker))
	second.stop(t)

	rt.Remove(testsupport.HostSandboxID)
	third := startRebuildNode(t, dir, client, rc)
	assert.Zero(t, third.agent.store.Stats().PendingIPs, "marker gone, checkpoint intact: a clean start trusts the empty list")
	assert.False(t, fileExists(filepath.Join(dir, "ipam.json"+podip.RebuildMarkerSuffix)), "a clean start writes no marker")
}

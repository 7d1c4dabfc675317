package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
)

// TestAgentCRIClientReachesRuntime lists sandboxes with the agent's own
// CRI client (pkg/cri) on a fresh connection, as the agent does at start
// and after every reconnect. CRI-O serves gRPC and HTTP on one socket
// through cmux, which routes a connection by the content-type of its
// first request and resets it unless that is exactly "application/grpc";
// a first request sent with a forced codec goes out as
// "application/grpc+proto" and is reset (containerd accepts both).
func TestAgentCRIClientReachesRuntime(t *testing.T) {
	n := NewNode(t, Options{NoAgentPod: true, Env: map[string]string{"POD_IP_RECONCILE_MODE": "off"}})
	p := n.MustRunPod(t, n.NextName("probe"))
	c, err := cri.Dial(n.RT.Socket(), 5*time.Second, nil)
	require.NoError(t, err)
	defer c.Close()
	sbs, err := c.ListSandboxes(context.Background())
	require.NoError(t, err, "the agent's first ListPodSandbox on a new connection to %s", n.RT.Version())
	var ids []string
	for _, s := range sbs {
		ids = append(ids, s.ID)
	}
	assert.Contains(t, ids, p.ID)
}

// delCalls reads the plugin log: for each container ID, the netns of each
// DEL in order ("" when the runtime passed none).
func delCalls(t testing.TB, n *Node) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(n.Dir, "plugin.log"))
	require.NoError(t, err)
	defer f.Close()
	out := map[string][]string{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var l struct{ Msg, ContainerID, Netns string }
		if json.Unmarshal(s.Bytes(), &l) == nil && l.Msg == "DEL" {
			out[l.ContainerID] = append(out[l.ContainerID], l.Netns)
		}
	}
	return out
}

// listedState is the state ListPodSandbox gives sandbox id, and whether
// it lists it at all.
func listedState(ctx context.Context, t testing.TB, n *Node, id string) (runtimeapi.PodSandboxState, bool) {
	t.Helper()
	items, err := n.CRI.ListPodSandbox(ctx)
	require.NoError(t, err)
	for _, it := range items {
		if it.Id == id {
			return it.State, true
		}
	}
	return 0, false
}

// TestRuntimeSandboxLifecycle records, per runtime, what the agent's
// reconciler and the plugin see over a pod's life: the listed state of a
// stopped sandbox, its status once its network namespace is gone, whether
// a removed one is still listed, and the DEL calls with their netns. The
// agent's runtime check is turned off so that the node works whatever the
// agent's client makes of the runtime (TestAgentCRIClientReachesRuntime).
// Lines tagged RUNTIME-FACT are the record; the assertions are what the
// agent relies on. A runtime restart under the running pod comes first
// (socket removed and recreated, pod still listed).
func TestRuntimeSandboxLifecycle(t *testing.T) {
	n := NewNode(t, Options{Env: map[string]string{"POD_IP_RECONCILE_MODE": "off"}})
	p := n.MustRunPod(t, n.NextName("life"))
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	state := func() (runtimeapi.PodSandboxState, bool) { return listedState(ctx, t, n, p.ID) }
	st, listed := state()
	require.True(t, listed)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, st)

	// A runtime restart under the running pod.
	before := inode(t, n.RT.Socket())
	n.RT.Stop()
	_, sockErr := os.Stat(n.RT.Socket())
	require.NoError(t, n.RT.Start())
	n.CRI.Close()
	n.CRI, err = DialCRI(n.RT.Socket())
	require.NoError(t, err)
	st, listed = state()
	t.Logf("RUNTIME-FACT %s: restart: socket gone while stopped=%v, new inode after start=%v; running pod listed=%v state=%v",
		n.RT.Name(), os.IsNotExist(sockErr), inode(t, n.RT.Socket()) != before, listed, st)
	assert.True(t, listed, "a running pod survives a runtime restart")
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_READY, st)

	require.NoError(t, n.CRI.StopPodSandbox(ctx, p.ID))
	st, listed = state()
	t.Logf("RUNTIME-FACT %s: after StopPodSandbox the sandbox is listed=%v state=%v", n.RT.Name(), listed, st)
	assert.True(t, listed, "a stopped sandbox is listed until removed")
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, st)
	_, nsErr := os.Stat(p.Netns)
	si, err := n.CRI.PodSandboxStatus(ctx, p.ID)
	t.Logf("RUNTIME-FACT %s: after StopPodSandbox netns %s exists=%v; PodSandboxStatus state=%v ip=%v err=%v",
		n.RT.Name(), p.Netns, nsErr == nil, si.State, si.IP, err)

	require.NoError(t, n.CRI.RemovePodSandbox(ctx, p.ID))
	_, listed = state()
	_, err = n.CRI.PodSandboxStatus(ctx, p.ID)
	t.Logf("RUNTIME-FACT %s: after RemovePodSandbox listed=%v; PodSandboxStatus err=%v", n.RT.Name(), listed, err)
	assert.False(t, listed)
	assert.Error(t, err)

	dels := delCalls(t, n)[p.ID]
	t.Logf("RUNTIME-FACT %s: DEL calls for one pod (stop, then remove): %d, netns %q", n.RT.Name(), len(dels), dels)
	require.NotEmpty(t, dels)
	assert.NotEmpty(t, dels[0], "the first DEL names the netns")
	assert.Empty(t, heldIPs(t, n, podIPs([]*Pod{p})), "the DELs freed the address")
}

// TestAgentProbesTheRuntimeEndpoint leaves CRI_RUNTIME_ENDPOINT unset: the
// agent finds the runtime through its probe of the default socket paths
// (containerd's, then CRI-O's, under /var/run and /run), where the
// runtime's socket directory is mounted as the chart mounts it, and its
// reconciler lists the node's sandboxes through what it found.
func TestAgentProbesTheRuntimeEndpoint(t *testing.T) {
	n := NewNode(t, Options{ProbeRuntime: true})
	p := n.MustRunPod(t, n.NextName("probed"))
	var st ReconcilerStatus
	_, ok := WaitFor(ReconcileStartDelay+3*ReconcileInterval+30*time.Second, func() bool {
		var err error
		st, err = n.IPAMD.Reconciler()
		return err == nil && st.LastPass.Sandboxes >= 2 && st.LastPass.Start.After(p.Created)
	})
	require.Truef(t, ok, "no reconcile pass listing the agent's and the test's sandboxes (last pass: %+v)", st.LastPass)
	b, err := os.ReadFile(n.IPAMD.LogFile)
	require.NoError(t, err)
	var chosen string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "CRI endpoint chosen") {
			chosen = l
		}
	}
	require.NotEmpty(t, chosen, "the agent logs the endpoint it chose")
	assert.NotContains(t, chosen, "set by CRI_RUNTIME_ENDPOINT")
	assert.Contains(t, chosen, filepath.Join(n.RT.AgentSocketDir(), filepath.Base(n.RT.Socket())),
		"the probe found the runtime's socket where the chart mounts it")
	t.Logf("RUNTIME-FACT %s: %s", n.RT.Name(), chosen)
}

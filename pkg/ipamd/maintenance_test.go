package ipamd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

func TestDelQueueReplayedAtStart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, devpool.Pool{ENIs: 1, PerENI: 5})
	conn := n.dial(t)
	c := rpc.NewCNIBackendClient(conn)
	for _, id := range []string{"lost", "kept", "stepped"} {
		r, err := c.AddNetwork(context.Background(), addReq(id))
		require.NoError(t, err)
		require.True(t, r.Success)
	}
	conn.Close()
	n.stop(t)

	q := filepath.Join(dir, "delq")
	// ipamd was down when "lost" was deleted: the plugin queued its DEL.
	require.NoError(t, delqueue.Write(q, delqueue.Entry{ContainerID: "lost", IfName: "eth0", NetworkName: "aws-cni", PodName: "pod-lost"}))
	// The wall clock stepped back an hour between the ADD of "stepped" and
	// its DEL: its only DEL, queued "before" its allocation, still frees it.
	require.NoError(t, delqueue.Write(q, delqueue.Entry{ContainerID: "stepped", IfName: "eth0", NetworkName: "aws-cni", QueuedAt: time.Now().Add(-time.Hour)}))
	// A DEL for a pod ipamd never saw is simply dropped.
	require.NoError(t, delqueue.Write(q, delqueue.Entry{ContainerID: "ghost", IfName: "eth0", NetworkName: "aws-cni"}))
	require.NoError(t, os.WriteFile(filepath.Join(q, "junk_eth0.json"), []byte("{"), 0o600))

	n2 := startNode(t, dir, devpool.Pool{ENIs: 1, PerENI: 5})
	store := n2.agent.Store()
	for _, id := range []string{"lost", "stepped"} {
		_, ok := store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"})
		assert.False(t, ok, "%s: a queued DEL is replayed before serving", id)
	}
	_, ok := store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "kept", IfName: "eth0"})
	assert.True(t, ok, "kept")
	entries, bad := delqueue.List(q)
	assert.Empty(t, entries, "replayed and moot entries are removed")
	assert.Len(t, bad, 1, "an unreadable file is left for the operator")
}

// Issue 36, case 3, across a restart on the same checkpoint and queue
// (reconciler off). The pod "gone" was deleted while ipamd was down; at
// start the pool leaves its address out, so the restore drops its entry
// and remembers it. The replayed DEL ends that memory: when the address
// joins again it is free, not given back to the deleted pod.
func TestDelQueueReplayEndsTheMemoryOfAnEntryTheRestoreDropped(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, devpool.Pool{ENIs: 1, PerENI: 5})
	conn := n.dial(t)
	c := rpc.NewCNIBackendClient(conn)
	var gone datastore.Allocation
	for _, id := range []string{"a", "b", "c"} {
		r, err := c.AddNetwork(context.Background(), addReq(id))
		require.NoError(t, err)
		require.True(t, r.Success)
		alloc, ok := n.agent.Store().Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"})
		require.True(t, ok)
		if alloc.IP.Compare(gone.IP) > 0 {
			gone = alloc
		}
	}
	conn.Close()
	n.stop(t)
	require.NoError(t, delqueue.Write(filepath.Join(dir, "delq"), delqueue.Entry{ContainerID: gone.Key.ContainerID, IfName: "eth0", NetworkName: "aws-cni"}))

	// The restarted pool stops below the deleted pod's address.
	n2 := startNode(t, dir, devpool.Pool{ENIs: 1, PerENI: int(gone.IP.As4()[3]) - 1})
	store := n2.agent.Store()
	assert.Zero(t, store.RemovedByForce(), "the replayed DEL ended the memory of %s", gone.IP)
	require.NoError(t, store.AddCIDR(gone.ENIID, gone.CIDR))
	_, held := store.Find(gone.Key)
	assert.False(t, held, "the deleted pod got %s back", gone.IP)
	inPool, free := store.Holds(gone.IP)
	assert.True(t, inPool && free)
}

func TestGarbageCollectAndPoolStatus(t *testing.T) {
	rt, client := testsupport.StartFakeCRI(t)
	rc := podip.Config{Mode: podip.Enforce, Interval: time.Hour, StartDelay: time.Hour, Grace: 300 * time.Millisecond, MaxReleasePerPass: 10}
	n := startNodeOpts(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 10}, func(o *Options) { o.Config.Reconciler = rc; o.CRI = podip.CRISource(client) })
	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	for _, id := range []string{"valid", "gone", "listed", "young1", "young2"} {
		if id == "young1" {
			time.Sleep(rc.Grace + 50*time.Millisecond) // the first three are past the grace
		}
		r, err := c.AddNetwork(context.Background(), addReq(id))
		require.NoError(t, err)
		require.True(t, r.Success)
	}
	// The runtime still has "listed" (GC's list raced with it) and "valid".
	rt.Add(fakecri.Sandbox{ID: "listed", Name: "listed", Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	rt.Add(fakecri.Sandbox{ID: "valid", Name: "valid", Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY})

	m := rpc.NewCNIMaintenanceClient(conn)
	st, err := m.PoolStatus(context.Background(), &rpc.PoolStatusRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, 10, st.TotalIPs)
	assert.EqualValues(t, 5, st.AssignedIPs)
	assert.EqualValues(t, 5, st.AvailableIPs)

	gc := &rpc.GarbageCollectRequest{
		NetworkName:      "aws-cni",
		ValidAttachments: []*rpc.Attachment{{ContainerID: "valid", IfName: "eth0"}},
	}
	reply, err := m.GarbageCollect(context.Background(), gc)
	require.NoError(t, err)
	assert.EqualValues(t, 1, reply.Released, "only the old allocation the runtime no longer has, on its word for the sandbox's ID")
	assert.EqualValues(t, 3, reply.Deferred, "young ones and one still listed")
	_, ok := n.agent.Store().Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "gone", IfName: "eth0"})
	assert.False(t, ok)

	_, err = m.GarbageCollect(context.Background(), &rpc.GarbageCollectRequest{})
	assert.Error(t, err, "a network name is required")
	_, err = m.GarbageCollect(context.Background(), &rpc.GarbageCollectRequest{NetworkName: "aws-cni", ClientVersion: "v9"})
	assert.Error(t, err, "version gate")
}

func TestGarbageCollectWithoutRuntimeReleasesNothing(t *testing.T) {
	n := startNode(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 3})
	conn := n.dial(t)
	defer conn.Close()
	_, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), addReq("a"))
	require.NoError(t, err)
	reply, err := rpc.NewCNIMaintenanceClient(conn).GarbageCollect(context.Background(), &rpc.GarbageCollectRequest{NetworkName: "aws-cni"})
	require.NoError(t, err)
	assert.EqualValues(t, 0, reply.Released)
	assert.Len(t, n.agent.Store().Allocations(), 1)
}

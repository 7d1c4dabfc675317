package ipamd

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// Branch pods never enter the datastore, so the pod-IP reconciler has no
// allocation of theirs to release, and their sandboxes' addresses (the
// branch ENI's, never the pool's) are nothing to adopt or hand over: a
// node with branch pods, a live regular pod and a lost DEL frees the lost
// DEL's address and nothing else, and counts only the datastore's
// allocations.
func TestTheReconcilerLeavesBranchPodsAlone(t *testing.T) {
	rt, client := testsupport.StartFakeCRI(t)
	rc := podip.Config{Mode: podip.Enforce, Interval: time.Hour, StartDelay: time.Hour, Grace: 50 * time.Millisecond}
	k8s := fake.NewClientset(sgpPod("branch-ready", true), sgpPod("branch-stopping", true), sgpPod("regular", false))
	n := startNodeOpts(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 5}, func(o *Options) {
		o.Config.Reconciler, o.CRI = rc, podip.CRISource(client)
		o.Config.EnablePodENI, o.Config.NodeName, o.K8s = true, sgpNode, k8s
	})
	require.NotNil(t, n.agent.recon)
	branchIPs := map[string]string{"branch-ready": "10.0.40.7", "branch-stopping": "10.0.40.8"}
	rt.Add(fakecri.Sandbox{ID: "sandbox-branch-ready", Name: "branch-ready", Namespace: "default", IP: branchIPs["branch-ready"],
		State: runtimeapi.PodSandboxState_SANDBOX_READY})
	rt.Add(fakecri.Sandbox{ID: "sandbox-branch-stopping", Name: "branch-stopping", Namespace: "default", IP: branchIPs["branch-stopping"],
		State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY})

	conn := n.dial(t)
	defer conn.Close()
	cni := rpc.NewCNIBackendClient(conn)
	live, err := cni.AddNetwork(context.Background(), sgpAdd("regular"))
	require.NoError(t, err)
	require.True(t, live.Success)
	rt.Add(fakecri.Sandbox{ID: "c-regular", Name: "regular", Namespace: "default", IP: live.IPAllocationMetadata[0].IPv4Addr,
		State: runtimeapi.PodSandboxState_SANDBOX_READY})
	lost, err := n.agent.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "c-lost", IfName: "eth0"},
		datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: "lost"})
	require.NoError(t, err)
	time.Sleep(2 * rc.Grace) // past the grace period: the lost DEL's allocation is a candidate

	var total podip.PassReport
	require.Eventually(t, func() bool {
		rep := n.agent.recon.Pass(context.Background(), false)
		total.Reclaimed += rep.Reclaimed
		total.Readopted += rep.Readopted
		total.HandedOver += rep.HandedOver
		total.Pending.Adopted += rep.Pending.Adopted
		assert.LessOrEqual(t, rep.Allocations, 2, "only the datastore's allocations are counted")
		_, held := n.agent.store.Find(lost.Key)
		return !held
	}, 10*time.Second, 20*time.Millisecond, "the lost DEL's address is freed")

	assert.Equal(t, 1, total.Reclaimed)
	assert.Zero(t, total.Readopted+total.HandedOver+total.Pending.Adopted, "no branch address is adopted or handed over")
	got, ok := n.agent.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "c-regular", IfName: "eth0"})
	require.True(t, ok, "the live regular pod keeps its address")
	assert.Equal(t, live.IPAllocationMetadata[0].IPv4Addr, got.IP.String())
	for name, ip := range branchIPs {
		inPool, _ := n.agent.store.Holds(netip.MustParseAddr(ip))
		assert.False(t, inPool, name)
		_, held := n.agent.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "sandbox-" + name, IfName: "eth0"})
		assert.False(t, held, name)
	}
	assert.Len(t, n.agent.store.Allocations(), 1)
}

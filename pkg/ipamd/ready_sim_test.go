package ipamd

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// A restarted node with addresses to spare is served before its first
// pool step: NewAgent returns with the checkpoint's allocations in the
// datastore and no growth asked of EC2; an ADD then gets an address no
// restored pod holds; and the growth the (raised) warm target asks for
// comes as the pool manager starts.
func TestRestartServesBeforeFirstPoolStep(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{Seed: 7}, map[string]string{"WARM_IP_TARGET": "2"})
	n.settle(t, 20)
	held := map[netip.Addr]bool{}
	for _, a := range n.assign(t, 4, "pod") {
		held[a.IP] = true
	}
	n.settle(t, 20) // two spares beside the pods
	require.NoError(t, n.agent.store.Close())
	n.sim.ResetCalls()

	again := nodeOnSim(t, n.sim, map[string]string{"WARM_IP_TARGET": "6",
		"AWS_VPC_K8S_CNI_BACKING_STORE": n.agent.opts.Config.CheckpointPath})
	assert.Zero(t, n.sim.Calls()["AssignPrivateIpAddresses"], "no growth before serving")
	s := again.agent.store.Stats()
	require.Equal(t, 4, s.AssignedIPs, "the checkpoint's allocations are in the datastore before anything is served")
	require.Positive(t, s.AssignableIPs())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- again.agent.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	sock := again.agent.opts.SocketPath
	require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 10*time.Second, 5*time.Millisecond)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	r, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), addReq("new"))
	require.NoError(t, err)
	require.True(t, r.Success)
	ip := netip.MustParseAddr(r.IPAllocationMetadata[0].IPv4Addr)
	assert.False(t, held[ip], "the first ADD after the restart got %s, a restored pod's address", ip)
	require.Eventually(t, func() bool { return n.sim.Calls()["AssignPrivateIpAddresses"] > 0 }, 10*time.Second, 5*time.Millisecond,
		"the pool manager's first act grows the pool to the warm target")
}

// A fresh node has nothing to serve until the pool has grown: NewAgent
// sizes the pool before it returns (and so before the socket listens).
func TestFreshNodeSizedBeforeServing(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{Seed: 7}, nil)
	assert.Positive(t, n.agent.store.Stats().AssignableIPs(), "addresses to serve when the socket listens")
	_, err := os.Stat(filepath.Join(n.dir, "ipamd.sock"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing listens before Run")
}

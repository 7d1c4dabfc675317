package ipamd

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// serveSimNode runs a simulator-backed agent (no metrics or introspection
// listeners) until the test ends and returns a client on its socket.
func serveSimNode(t *testing.T, n *simNode) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("agent did not stop")
		}
	})
	// The socket file appears at bind, before listen: wait until a
	// connection is accepted, or an early call may be refused.
	require.Eventually(t, func() bool {
		c, err := net.Dial("unix", n.agent.opts.SocketPath)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 5*time.Second, 5*time.Millisecond)
	conn, err := grpc.NewClient("unix://"+n.agent.opts.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

var quietListeners = map[string]string{"DISABLE_METRICS": "true", "DISABLE_INTROSPECTION": "true"}

func withEnv(base map[string]string, extra map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range []map[string]string{base, extra} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// The network-policy agent learns the instance from ipamd: its ID, region
// and primary IPv4 address, as IMDS reports them.
func TestNetworkPolicyConfigsCarryTheInstance(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{Region: "eu-central-1"}, withEnv(quietListeners, map[string]string{"NETWORK_POLICY_ENFORCING_MODE": "strict"}))
	conn := serveSimNode(t, n)
	r, err := rpc.NewConfigServerBackendClient(conn).GetNetworkPolicyConfigs(context.Background(), &emptypb.Empty{})
	require.NoError(t, err)
	var nodeIP string
	for _, e := range n.sim.ENIs() {
		if e.ID == n.sim.PrimaryENI() {
			nodeIP = e.PrimaryIP.String()
		}
	}
	require.NotEmpty(t, nodeIP)
	assert.Equal(t, n.sim.InstanceID(), r.InstanceID)
	assert.Equal(t, "eu-central-1", r.Region)
	assert.Equal(t, nodeIP, r.NodeIPv4)
	assert.Equal(t, "strict", r.NetworkPolicyMode)
	assert.False(t, r.MultiNICEnabled)
}

// With AWS_VPC_K8S_CNI_EXTERNALSNAT=true the ADD reply still lists the
// VPC's CIDRs (only the SNAT exclusions are left out), as upstream.
func TestAddReplyKeepsVPCCIDRsWithExternalSNAT(t *testing.T) {
	for _, external := range []string{"false", "true"} {
		t.Run("external="+external, func(t *testing.T) {
			n := startSimNode(t, ec2sim.Config{VPCCIDR: "10.20.0.0/16"}, withEnv(quietListeners, map[string]string{
				"AWS_VPC_K8S_CNI_EXTERNALSNAT":       external,
				"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS": "172.16.0.0/12",
			}))
			n.settle(t, 10)
			conn := serveSimNode(t, n)
			req := addReq("a")
			req.ClientVersion = n.agent.rpc.Version
			r, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), req)
			require.NoError(t, err)
			require.True(t, r.Success)
			want := []string{"10.20.0.0/16", "172.16.0.0/12"}
			if external == "true" {
				want = want[:1]
			}
			assert.Equal(t, want, r.VPCv4CIDRs)
			assert.Equal(t, external == "true", r.UseExternalSNAT)
		})
	}
}

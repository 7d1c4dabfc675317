package ipamd

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// failingVPCBlocks is the real client on the simulator, except that
// re-reading the VPC's CIDR blocks fails while fail is set.
type failingVPCBlocks struct {
	awsAPI
	mu   sync.Mutex
	fail bool
}

func (v *failingVPCBlocks) VPCIPv4CIDRs(ctx context.Context) ([]netip.Prefix, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.fail {
		return nil, errors.New("imds unreachable")
	}
	return v.awsAPI.VPCIPv4CIDRs(ctx)
}

// The agent's IMDS refresh keeps the blocks the AddNetwork replies carry
// and the host's SNAT exclusions current, and counts a failed read in
// upstream's awscni_ipamd_error_count (imdsrefresh tests the refresh
// itself).
func TestVPCCIDRBlocksRefreshed(t *testing.T) {
	host := &hostState{enis: map[netip.Addr]networkutils.ENI{}}
	var blocks *failingVPCBlocks
	n := startSimNode(t, ec2sim.Config{}, nil, func(o *Options) {
		blocks = &failingVPCBlocks{awsAPI: o.AWS}
		o.AWS = blocks
		o.HostNetwork = func(awsutils.Identity) (HostNetwork, error) { return host, nil }
	})
	ctx := context.Background()
	assert.Equal(t, []string{"10.0.0.0/16"}, n.agent.vpcCIDRs())

	require.NoError(t, n.sim.AssociateVPCCIDR("100.64.0.0/16"))
	n.agent.imds.Pass(ctx)
	require.Len(t, host.snat, 1)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")}, host.snat[0])
	assert.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16"}, n.agent.vpcCIDRs(), "AddNetwork replies carry the new block")

	blocks.mu.Lock()
	blocks.fail = true
	blocks.mu.Unlock()
	n.agent.imds.Pass(ctx)
	assert.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16"}, n.agent.vpcCIDRs(), "a failed read keeps the known blocks")
	assert.Equal(t, 1.0, testutil.ToFloat64(n.agent.metrics.errors.WithLabelValues("refreshVPCCIDRsFailed")))
}

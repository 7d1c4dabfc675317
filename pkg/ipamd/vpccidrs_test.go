package ipamd

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// The agent's IMDS refresh keeps the blocks the AddNetwork replies carry
// and the host's SNAT exclusions current (imdsrefresh tests the refresh
// itself: unchanged blocks, failed reads).
func TestVPCCIDRBlocksRefreshed(t *testing.T) {
	host := &hostState{enis: map[netip.Addr]networkutils.ENI{}}
	n := startSimNode(t, ec2sim.Config{}, nil, func(o *Options) {
		o.HostNetwork = func(awsutils.Identity) (HostNetwork, error) { return host, nil }
	})
	ctx := context.Background()
	assert.Equal(t, []string{"10.0.0.0/16"}, n.agent.vpcSet.Strings())

	require.NoError(t, n.sim.AssociateVPCCIDR("100.64.0.0/16"))
	n.agent.imds.Pass(ctx)
	require.Len(t, host.snat, 1)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")}, host.snat[0])
	assert.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16"}, n.agent.vpcSet.Strings(), "AddNetwork replies carry the new block")
}

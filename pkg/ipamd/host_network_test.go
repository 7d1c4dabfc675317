package ipamd

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// hostState keeps what a real host would hold: whether the node-wide setup
// ran and which secondary ENIs have their route table and rule.
type hostState struct {
	mu      sync.Mutex
	setup   int
	enis    map[netip.Addr]networkutils.ENI // by ENI primary IP
	primary awsutils.Identity
	snat    [][]netip.Prefix // VPC CIDR sets the SNAT rules were updated for
}

func (h *hostState) UpdateSNATRules(_ context.Context, vpc []netip.Prefix) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.snat = append(h.snat, vpc)
	return nil
}

func (h *hostState) SetupHostNetwork(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setup++
	return nil
}

func (h *hostState) SetupENINetwork(_ context.Context, e networkutils.ENI) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.enis[e.PrimaryIP] = e
	return nil
}

func (h *hostState) TeardownENINetwork(_ context.Context, ip netip.Addr) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.enis, ip)
	return nil
}

func TestHostNetworkFollowsENIs(t *testing.T) {
	host := &hostState{enis: map[netip.Addr]networkutils.ENI{}}
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, nil, func(o *Options) {
		o.HostNetwork = func(id awsutils.Identity) (HostNetwork, error) { host.primary = id; return host, nil }
	})
	assert.Equal(t, 1, host.setup, "node-wide setup at init")
	assert.Equal(t, n.sim.PrimaryENI(), host.primary.PrimaryENIID)
	assert.Empty(t, host.enis, "the primary ENI needs no route table")

	pods := n.assign(t, 1, "pod")
	n.settle(t, 10)
	require.Len(t, host.enis, 1, "a new ENI is set up before its addresses are used")
	for _, e := range host.enis {
		assert.Equal(t, 1, e.DeviceNumber)
		assert.True(t, e.SubnetCIDR.IsValid())
		assert.True(t, e.SubnetCIDR.Contains(e.PrimaryIP))
		var mac string
		for _, s := range n.sim.ENIs() {
			if s.PrimaryIP == e.PrimaryIP {
				mac = s.MAC
			}
		}
		assert.Equal(t, mac, e.MAC)
	}

	n.release(t, pods)
	n.outliveMinENILifetime()
	n.settle(t, 10)
	assert.Empty(t, host.enis, "a freed ENI's host rules are removed")
}

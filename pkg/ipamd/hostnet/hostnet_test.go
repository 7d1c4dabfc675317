package hostnet

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
)

// host keeps what a real host would hold: whether the node-wide setup ran,
// which secondary ENIs have their route table and rule, and the SNAT
// exclusions; teardowns fail while failTeardown is set.
type host struct {
	setup        int
	enis         map[netip.Addr]networkutils.ENI // by ENI primary IP
	snat         [][]netip.Prefix
	failTeardown bool
}

func (h *host) SetupHostNetwork(context.Context) error { h.setup++; return nil }

func (h *host) SetupENINetwork(_ context.Context, e networkutils.ENI) error {
	h.enis[e.PrimaryIP] = e
	return nil
}

func (h *host) TeardownENINetwork(_ context.Context, ip netip.Addr) error {
	if h.failTeardown {
		return errors.New("rule busy")
	}
	delete(h.enis, ip)
	return nil
}

func (h *host) UpdateSNATRules(_ context.Context, vpc []netip.Prefix) error {
	h.snat = append(h.snat, vpc)
	return nil
}

// subnets is EC2's subnets by ID.
type subnets map[string]netip.Prefix

func (s subnets) SubnetCIDR(_ context.Context, id string) (netip.Prefix, error) {
	p, ok := s[id]
	if !ok {
		return netip.Prefix{}, errors.New("no such subnet")
	}
	return p, nil
}

var secondary = awsutils.ENI{ID: "eni-1", MAC: "02:00:00:00:00:01", DeviceNumber: 1, SubnetID: "subnet-a",
	PrimaryIP: netip.MustParseAddr("10.0.32.5")}

// The node-wide setup runs once at start; a secondary ENI is set up with
// its subnet's CIDR and torn down when freed; the primary ENI needs
// nothing. A teardown that fails is counted under upstream's reason.
func TestWiringFollowsENIs(t *testing.T) {
	h := &host{enis: map[netip.Addr]networkutils.ENI{}}
	var got awsutils.Identity
	id := awsutils.Identity{PrimaryENIID: "eni-0"}
	errs := testsupport.ErrorCount()
	w, err := Setup(context.Background(), func(id awsutils.Identity) (Host, error) { got = id; return h, nil }, id,
		Config{Subnets: subnets{"subnet-a": netip.MustParsePrefix("10.0.32.0/19")}, Errors: errs})
	require.NoError(t, err)
	assert.Equal(t, 1, h.setup)
	assert.Equal(t, id, got)
	ctx := context.Background()

	require.NoError(t, w.SetupENI(ctx, awsutils.ENI{ID: "eni-0", DeviceNumber: 0, PrimaryIP: netip.MustParseAddr("10.0.0.10")}))
	assert.Empty(t, h.enis, "the primary ENI needs no route table")
	require.NoError(t, w.SetupENI(ctx, secondary))
	assert.Equal(t, map[netip.Addr]networkutils.ENI{secondary.PrimaryIP: {MAC: secondary.MAC, DeviceNumber: 1,
		PrimaryIP: secondary.PrimaryIP, SubnetCIDR: netip.MustParsePrefix("10.0.32.0/19")}}, h.enis)
	assert.Error(t, w.SetupENI(ctx, awsutils.ENI{ID: "eni-2", DeviceNumber: 2, SubnetID: "subnet-gone"}), "no subnet CIDR, no setup")
	trunk := awsutils.ENI{ID: "eni-t", MAC: "02:00:00:00:00:09", DeviceNumber: 3, SubnetID: "subnet-a", InterfaceType: "trunk",
		PrimaryIP: netip.MustParseAddr("10.0.32.9")}
	require.NoError(t, w.SetupENI(ctx, trunk))
	assert.True(t, h.enis[trunk.PrimaryIP].Trunk, "the trunk is set up as one (no rule from its primary IP)")
	delete(h.enis, trunk.PrimaryIP)

	h.failTeardown = true
	w.TeardownENI(ctx, secondary.PrimaryIP)
	assert.Equal(t, 1.0, testutil.ToFloat64(errs.WithLabelValues("freeENIDeleteRulesFailed")))
	h.failTeardown = false
	w.TeardownENI(ctx, secondary.PrimaryIP)
	assert.Empty(t, h.enis, "a freed ENI's host rules are removed")

	vpc := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}
	require.NoError(t, w.UpdateSNATRules(ctx, vpc))
	assert.Equal(t, [][]netip.Prefix{vpc}, h.snat)
}

// Without a Host (or without a Wiring) nothing is touched and nothing fails.
func TestUnmanagedHostIsLeftAlone(t *testing.T) {
	w, err := Setup(context.Background(), nil, awsutils.Identity{}, Config{})
	require.NoError(t, err)
	for _, w := range []*Wiring{w, nil} {
		require.NoError(t, w.SetupENI(context.Background(), secondary))
		w.TeardownENI(context.Background(), secondary.PrimaryIP)
		require.NoError(t, w.UpdateSNATRules(context.Background(), nil))
	}
}

// A Host that cannot be built fails the start.
func TestSetupFailureFailsTheStart(t *testing.T) {
	_, err := Setup(context.Background(), func(awsutils.Identity) (Host, error) { return nil, errors.New("no netlink") },
		awsutils.Identity{}, Config{})
	assert.ErrorContains(t, err, "host network: no netlink")
}

// TestEveryENIOfACardAboveZeroIsSetUpDeviceZeroToo: device indexes are per
// card, so device 0 of card 1 is a secondary ENI like any other and gets
// its card's table; only card 0's device 0 (the primary) is skipped.
func TestEveryENIOfACardAboveZeroIsSetUpDeviceZeroToo(t *testing.T) {
	h := &host{enis: map[netip.Addr]networkutils.ENI{}}
	w, err := Setup(context.Background(), func(awsutils.Identity) (Host, error) { return h, nil }, awsutils.Identity{},
		Config{Subnets: subnets{"subnet-a": netip.MustParsePrefix("10.0.32.0/19")}})
	require.NoError(t, err)
	onCard1 := awsutils.ENI{ID: "eni-c1", MAC: "02:00:00:00:01:00", NetworkCard: 1, DeviceNumber: 0, SubnetID: "subnet-a",
		PrimaryIP: netip.MustParseAddr("10.0.32.7")}
	require.NoError(t, w.SetupENI(context.Background(), onCard1))
	assert.Equal(t, networkutils.ENI{MAC: onCard1.MAC, NetworkCard: 1, DeviceNumber: 0, PrimaryIP: onCard1.PrimaryIP,
		SubnetCIDR: netip.MustParsePrefix("10.0.32.0/19")}, h.enis[onCard1.PrimaryIP])
}

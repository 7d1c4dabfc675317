package nodeinit

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// discard drops log lines.
var discard = slog.New(slog.DiscardHandler)

// maxPodsFile is the table the image ships.
var maxPodsFile = filepath.Join("..", "..", "..", "misc", "eni-max-pods.txt")

// node is a simulator and this node's awsutils client (the real SDK).
type node struct {
	sim    *ec2sim.Sim
	aws    *awsutils.Client
	errors *prometheus.CounterVec
}

func newNode(t *testing.T, cfg ec2sim.Config, ipv6 bool) *node {
	t.Helper()
	sim, c := testsupport.SimClient(t, cfg, awsutils.Options{IPv6: ipv6})
	return &node{sim: sim, aws: c, errors: testsupport.ErrorCount()}
}

// config is node init's configuration on this node, over upstream's defaults.
func (n *node) config() Config {
	return Config{Provisioning: true, MaxENI: -1, SubnetDiscovery: true, MaxPodsFile: maxPodsFile, Errors: n.errors}
}

// store is an empty datastore; setup is the host side (nil: always fine).
func (n *node) deps(t *testing.T, ipv6 bool, setup func(awsutils.ENI) error) (Deps, *datastore.DataStore) {
	t.Helper()
	store := datastore.New(datastore.Config{IPv6: ipv6, PrefixDelegation: ipv6})
	t.Cleanup(func() { _ = store.Close() })
	d := Deps{AWS: n.aws, Store: store, SetupENI: func(_ context.Context, e awsutils.ENI) error {
		if setup == nil {
			return nil
		}
		return setup(e)
	}}
	return d, store
}

func (n *node) limits(t *testing.T) Limits {
	t.Helper()
	l, err := InstanceLimits(context.Background(), n.aws, n.aws.InstanceIdentity().InstanceType)
	require.NoError(t, err)
	return l
}

// The managed ENIs and their addresses join the datastore, tagged as
// ipamd's; an ENI whose host setup fails is left out (and counted) until
// the ENI sync adds it. The pool is sized from the instance's limits,
// MAX_ENI and the max-pods table.
func TestIPv4FillsTheDatastore(t *testing.T) {
	n := newNode(t, ec2sim.Config{InstanceType: "m5.large"}, false)
	ctx := context.Background()
	e, err := n.aws.AllocENI(ctx, awsutils.AllocOptions{IPs: 4})
	require.NoError(t, err)
	_, err = n.aws.WaitAttached(ctx, e.ID)
	require.NoError(t, err)
	limits := n.limits(t)
	assert.Equal(t, Limits{ENIs: 3, IPv4PerENI: 10, PDSupported: true, CardENIs: []int{3}}, limits)

	deps, store := n.deps(t, false, func(e awsutils.ENI) error {
		if e.DeviceNumber == 0 {
			return nil // as hostnet: the primary ENI needs no setup
		}
		return errors.New("link not ready")
	})
	got, err := IPv4(ctx, n.config(), deps, limits)
	require.NoError(t, err)
	assert.Equal(t, []string{e.ID}, got.LeftOut)
	assert.Len(t, store.ENISummaries(), 1, "the primary ENI only")
	assert.Equal(t, 1.0, testutil.ToFloat64(n.errors.WithLabelValues("waitENIAttachedMaxRetryExceeded")))

	cfg := n.config()
	cfg.MaxENI = 2
	deps, store = n.deps(t, false, nil)
	got, err = IPv4(ctx, cfg, deps, limits)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{n.sim.PrimaryENI(): {"sg-0sim00000001"}, e.ID: {"sg-0sim00000001"}}, got.Groups,
		"each ENI's security groups as EC2 reported them")
	got.Groups = nil
	assert.Equal(t, Node{MaxENIs: 2, SlotsPerENI: 9, MaxPods: 29, MaxAddresses: 18}, got)
	require.Len(t, store.ENISummaries(), 2)
	for _, s := range store.ENISummaries() {
		if s.Info.ID == e.ID {
			assert.Len(t, s.SecondaryIPs, 4)
		}
	}
}

// Under custom networking the primary ENI gives pods no address: it is
// excluded, the pool counts one ENI less, and max pods is lowered.
func TestIPv4CustomNetworking(t *testing.T) {
	n := newNode(t, ec2sim.Config{InstanceType: "m5.large"}, false)
	cfg := n.config()
	cfg.CustomNetworking = true
	deps, store := n.deps(t, false, nil)
	got, err := IPv4(context.Background(), cfg, deps, n.limits(t))
	require.NoError(t, err)
	got.Groups = nil // TestIPv4FillsTheDatastore checks them
	assert.Equal(t, Node{MaxENIs: 3, SlotsPerENI: 9, MaxPods: 20, MaxAddresses: 18}, got)
	require.Len(t, store.ENISummaries(), 1)
	assert.True(t, store.ENISummaries()[0].Excluded)
}

// The node object's max pods wins over the table; without either, max
// pods is unknown (0: no clamp).
func TestMaxPods(t *testing.T) {
	assert.Equal(t, 58, maxPods(Config{MaxPods: 58, Log: discard}, "m5.large", Limits{}))
	assert.Equal(t, 29, maxPods(Config{MaxPodsFile: maxPodsFile, Log: discard}, "m5.large", Limits{}))
	assert.Equal(t, 0, maxPods(Config{MaxPodsFile: filepath.Join(t.TempDir(), "none"), Log: discard}, "m5.large", Limits{}))
	assert.Equal(t, 0, maxPods(Config{MaxPodsFile: maxPodsFile, Log: discard}, "x9.nosuch", Limits{}))
}

func TestCustomNetworkingMaxPods(t *testing.T) {
	for _, tt := range []struct{ table, perENI, want int }{
		{29, 10, 20}, // m5.large: 3 x 9 + 2, less the primary ENI's 9
		{4, 2, 3},
		{3, 2, 2}, // never below the host-network pods
		{8, 0, 8},
	} {
		assert.Equal(t, tt.want, customNetworkingMaxPods(tt.table, tt.perENI), "%+v", tt)
	}
}

// In IPv6 mode the primary ENI's /80 joins the datastore; it is new only
// at the start that assigned it.
func TestIPv6PrimaryPrefix(t *testing.T) {
	n := newNode(t, ec2simtest.IPv6Node(ec2sim.Config{Seed: 42}), true)
	deps, store := n.deps(t, true, nil)
	fresh, err := IPv6(context.Background(), n.config(), deps)
	require.NoError(t, err)
	assert.True(t, fresh)
	require.Len(t, store.ENISummaries(), 1)
	assert.Len(t, store.ENISummaries()[0].IPv6Prefixes, 1)

	deps, _ = n.deps(t, true, nil)
	fresh, err = IPv6(context.Background(), n.config(), deps)
	require.NoError(t, err)
	assert.False(t, fresh, "the /80 was there already: pods may hold addresses in it")
}

// A primary subnet tagged out of pod addresses stops an IPv6 start while
// subnet discovery is on, and assigns nothing.
func TestIPv6ExcludedPrimarySubnet(t *testing.T) {
	n := newNode(t, ec2simtest.IPv6Node(ec2sim.Config{Seed: 42, Subnets: []ec2sim.SubnetConfig{
		{ID: "subnet-0primary", CIDR: "10.0.0.0/20", Tags: map[string]string{awsutils.TagSubnetCNIRole: "0"}},
	}}), true)
	deps, store := n.deps(t, true, nil)
	_, err := IPv6(context.Background(), n.config(), deps)
	require.ErrorContains(t, err, "ENABLE_SUBNET_DISCOVERY=false")
	assert.Empty(t, store.ENISummaries())

	cfg := n.config()
	cfg.SubnetDiscovery = false
	_, err = IPv6(context.Background(), cfg, deps)
	require.NoError(t, err)
}

// Prefix delegation as asked where the instance type takes prefixes;
// elsewhere IPv4 falls back to secondary IPs and IPv6 cannot start.
func TestPrefixDelegation(t *testing.T) {
	nitro, xen := Limits{PDSupported: true}, Limits{}
	for _, tt := range []struct {
		l          Limits
		want, ipv6 bool
		pd         bool
		fails      bool
	}{
		{nitro, true, false, true, false},
		{nitro, false, false, false, false},
		{xen, false, false, false, false},
		{xen, true, false, false, false},
		{xen, true, true, false, true},
		{nitro, true, true, true, false},
	} {
		pd, err := tt.l.PrefixDelegation(tt.want, tt.ipv6, "m4.large", discard)
		assert.Equal(t, tt.pd, pd, "%+v", tt)
		assert.Equal(t, tt.fails, err != nil, "%+v: %v", tt, err)
	}
}

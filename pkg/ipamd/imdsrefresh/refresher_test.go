package imdsrefresh

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

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

// node is a simulator, this node's awsutils client (the real SDK) and the
// sets node init seeds from the instance's identity.
type node struct {
	sim        *ec2sim.Sim
	aws        *awsutils.Client
	errors     *prometheus.CounterVec
	ipv4, ipv6 CIDRSet
}

func newNode(t *testing.T, cfg ec2sim.Config, ipv6 bool) *node {
	t.Helper()
	sim, c := testsupport.SimClient(t, cfg, awsutils.Options{IPv6: ipv6})
	n := &node{sim: sim, aws: c, errors: testsupport.ErrorCount()}
	id := c.InstanceIdentity()
	n.ipv4.Set(id.VPCCIDRs)
	n.ipv6.Set(id.VPCIPv6CIDRs)
	return n
}

// refresher builds a refresh on the node; aws, when set, stands in for
// the client.
func (n *node) refresher(cfg Config, aws AWS, store Store, snat SNAT) *Refresher {
	if aws == nil {
		aws = n.aws
	}
	return New(cfg, Deps{AWS: aws, Store: store, SNAT: snat, IPv4CIDRs: &n.ipv4, IPv6CIDRs: &n.ipv6, Errors: n.errors})
}

func (n *node) errorCount(fn string) float64 { return testutil.ToFloat64(n.errors.WithLabelValues(fn)) }

// failingVPCBlocks is the real client on the simulator, except that
// re-reading the VPC's IPv4 CIDR blocks fails while fail is set.
type failingVPCBlocks struct {
	AWS
	mu   sync.Mutex
	fail bool
}

func (v *failingVPCBlocks) VPCIPv4CIDRs(ctx context.Context) ([]netip.Prefix, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.fail {
		return nil, errors.New("imds unreachable")
	}
	return v.AWS.VPCIPv4CIDRs(ctx)
}

func (v *failingVPCBlocks) setFail(on bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.fail = on
}

// snatRules keeps the VPC CIDR sets the host's SNAT rules were updated
// for; updates fail while fail is set.
type snatRules struct {
	mu      sync.Mutex
	fail    bool
	updates [][]netip.Prefix
}

func (s *snatRules) UpdateSNATRules(_ context.Context, vpc []netip.Prefix) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("iptables: resource busy")
	}
	s.updates = append(s.updates, vpc)
	return nil
}

// listed is the datastore's list of ENIs.
type listed []datastore.ENISummary

func (l listed) ENISummaries() []datastore.ENISummary { return l }

func summary(id string, primary bool) datastore.ENISummary {
	return datastore.ENISummary{Info: datastore.ENIInfo{ID: id, Primary: primary}}
}

// A CIDR block associated with the VPC while the node runs (in the
// simulator, as an operator would in EC2) reaches the host's SNAT
// exclusions and the AddNetwork replies at the next refresh; an unchanged
// set changes nothing, and a failed read keeps the known set.
func TestVPCCIDRBlocksRefreshed(t *testing.T) {
	n := newNode(t, ec2sim.Config{}, false)
	blocks := &failingVPCBlocks{AWS: n.aws}
	snat := &snatRules{}
	r := n.refresher(Config{}, blocks, listed{}, snat)
	ctx := context.Background()
	assert.Equal(t, []string{"10.0.0.0/16"}, n.ipv4.Strings())

	r.RefreshVPCCIDRs(ctx)
	assert.Empty(t, snat.updates, "the same blocks: no SNAT update")

	require.NoError(t, n.sim.AssociateVPCCIDR("100.64.0.0/16"))
	r.RefreshVPCCIDRs(ctx)
	require.Len(t, snat.updates, 1)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")}, snat.updates[0])
	assert.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16"}, n.ipv4.Strings(), "AddNetwork replies carry the new block")

	blocks.setFail(true)
	r.RefreshVPCCIDRs(ctx)
	assert.Len(t, snat.updates, 1)
	assert.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16"}, n.ipv4.Strings(), "a failed read keeps the known blocks")
	assert.Equal(t, 1.0, n.errorCount("refreshVPCCIDRsFailed"))
}

// A SNAT update that fails is counted under upstream's reason; the new
// blocks still reach the replies. Without a managed host there is nothing
// to update.
func TestVPCCIDRBlocksSNATUpdate(t *testing.T) {
	n := newNode(t, ec2sim.Config{}, false)
	snat := &snatRules{fail: true}
	r := n.refresher(Config{}, nil, listed{}, snat)
	require.NoError(t, n.sim.AssociateVPCCIDR("100.64.0.0/16"))
	r.RefreshVPCCIDRs(context.Background())
	assert.Equal(t, 1.0, n.errorCount("updateSNATRulesFailed"))
	assert.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16"}, n.ipv4.Strings())

	require.NoError(t, n.sim.AssociateVPCCIDR("100.65.0.0/16"))
	n.refresher(Config{}, nil, listed{}, nil).RefreshVPCCIDRs(context.Background())
	assert.Equal(t, []string{"10.0.0.0/16", "100.64.0.0/16", "100.65.0.0/16"}, n.ipv4.Strings())
	assert.Equal(t, 1.0, n.errorCount("updateSNATRulesFailed"))
}

// A SNAT update that failed is tried again at the next refresh, although
// the blocks did not change again, until the host's exclusions follow
// them; after that an unchanged set changes nothing.
func TestAFailedSNATUpdateIsRetried(t *testing.T) {
	n := newNode(t, ec2sim.Config{}, false)
	snat := &snatRules{fail: true}
	r := n.refresher(Config{}, nil, listed{}, snat)
	ctx := context.Background()
	require.NoError(t, n.sim.AssociateVPCCIDR("100.64.0.0/16"))
	r.RefreshVPCCIDRs(ctx)
	r.RefreshVPCCIDRs(ctx)
	assert.Equal(t, 2.0, n.errorCount("updateSNATRulesFailed"), "tried again while failing")
	assert.Empty(t, snat.updates)

	snat.mu.Lock()
	snat.fail = false
	snat.mu.Unlock()
	r.RefreshVPCCIDRs(ctx)
	require.Len(t, snat.updates, 1, "the retry reaches the host")
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")}, snat.updates[0])
	r.RefreshVPCCIDRs(ctx)
	assert.Len(t, snat.updates, 1, "done: nothing more to update")
}

// In IPv6 mode a block associated with the VPC reaches the AddNetwork
// replies at the next refresh; the IPv4 blocks, unused in IPv6 mode, are
// not re-read, and there is no SNAT for pod addresses.
func TestIPv6VPCCIDRBlocksRefreshed(t *testing.T) {
	n := newNode(t, ec2simtest.IPv6Node(ec2sim.Config{Seed: 42}), true)
	snat := &snatRules{}
	r := n.refresher(Config{IPv6: true}, nil, listed{}, snat)
	ctx := context.Background()
	assert.Equal(t, []string{ec2simtest.IPv6VPCCIDR}, n.ipv6.Strings())

	r.RefreshVPCCIDRs(ctx)
	assert.Equal(t, []string{ec2simtest.IPv6VPCCIDR}, n.ipv6.Strings(), "the same blocks")

	const second = "2600:1f14:abc:df00::/56"
	require.NoError(t, n.sim.AssociateVPCIPv6CIDR(second))
	require.NoError(t, n.sim.AssociateVPCCIDR("100.64.0.0/16"))
	r.RefreshVPCCIDRs(ctx)
	assert.ElementsMatch(t, []string{ec2simtest.IPv6VPCCIDR, second}, n.ipv6.Strings())
	assert.Equal(t, []string{"10.0.0.0/16"}, n.ipv4.Strings(), "IPv4 blocks are not re-read in IPv6 mode")
	assert.Empty(t, snat.updates, "no SNAT in IPv6 mode")
}

// secondaryENIs attaches count ENIs to the instance, as the pool manager
// would (with the primary ENI's groups), and lists them with the primary
// one as the datastore would.
func (n *node) secondaryENIs(t *testing.T, count int) (listed, []string) {
	t.Helper()
	ctx := context.Background()
	l := listed{summary(n.sim.PrimaryENI(), true)}
	var ids []string
	for range count {
		e, err := n.aws.AllocENI(ctx, awsutils.AllocOptions{IPs: 1})
		require.NoError(t, err)
		_, err = n.aws.WaitAttached(ctx, e.ID)
		require.NoError(t, err)
		l = append(l, summary(e.ID, false))
		ids = append(ids, e.ID)
	}
	return l, ids
}

func (n *node) groupsOf(t *testing.T, id string) []string {
	t.Helper()
	for _, e := range n.sim.ENIs() {
		if e.ID == id {
			return e.SecurityGroupIDs
		}
	}
	t.Fatalf("no ENI %s", id)
	return nil
}

// The primary ENI's security groups reach every secondary ENI: when they
// change, and at the first refresh for ENIs that drifted while ipamd was
// down. An unchanged set costs no EC2 call; an ENI that could not be
// updated is retried at the next refresh.
func TestSecurityGroupsFollowThePrimaryENI(t *testing.T) {
	n := newNode(t, ec2sim.Config{Seed: 42, SecurityGroupIDs: []string{"sg-0sim00000001", "sg-0sim00000002", "sg-0sim00000003"}}, false)
	store, enis := n.secondaryENIs(t, 2)
	ctx := context.Background()
	r := n.refresher(Config{SecurityGroups: true}, nil, store, nil)
	r.RefreshSecurityGroups(ctx) // at start

	calls := n.sim.Calls()["ModifyNetworkInterfaceAttribute"]
	r.RefreshSecurityGroups(ctx)
	assert.Equal(t, calls, n.sim.Calls()["ModifyNetworkInterfaceAttribute"], "unchanged groups: no EC2 call")

	require.NoError(t, n.aws.SetENISecurityGroups(ctx, n.sim.PrimaryENI(), []string{"sg-0sim00000003", "sg-0sim00000001"}))
	n.sim.SetUnauthorized("ModifyNetworkInterfaceAttribute", true)
	r.RefreshSecurityGroups(ctx)
	assert.Equal(t, 2.0, n.errorCount("refreshSGIDsFailed"), "each ENI's failure counted")
	n.sim.SetUnauthorized("ModifyNetworkInterfaceAttribute", false)
	r.RefreshSecurityGroups(ctx)
	for _, id := range enis {
		assert.Equal(t, []string{"sg-0sim00000001", "sg-0sim00000003"}, n.groupsOf(t, id), "ENI %s follows the primary ENI", id)
	}

	// ipamd restarts after an ENI drifted: the first refresh puts it back.
	require.NoError(t, n.aws.SetENISecurityGroups(ctx, enis[0], []string{"sg-0sim00000002"}))
	n.refresher(Config{SecurityGroups: true}, nil, store, nil).RefreshSecurityGroups(ctx)
	assert.Equal(t, []string{"sg-0sim00000001", "sg-0sim00000003"}, n.groupsOf(t, enis[0]))
}

// At start, an ENI that EC2 says (SeedGroups, node init's read) already
// carries the primary ENI's groups, in whatever order, costs no EC2 call;
// one that drifted is put back; an ENI the refresh gave the groups is not
// asked again when they change back and forth, only when they differ.
func TestSecurityGroupsSeededFromNodeInit(t *testing.T) {
	n := newNode(t, ec2sim.Config{Seed: 42, InstanceType: "m5.xlarge", SecurityGroupIDs: []string{"sg-0sim00000001", "sg-0sim00000002", "sg-0sim00000003"}}, false)
	store, enis := n.secondaryENIs(t, 3)
	ctx := context.Background()
	require.NoError(t, n.aws.SetENISecurityGroups(ctx, n.sim.PrimaryENI(), []string{"sg-0sim00000002", "sg-0sim00000001"}))
	for _, id := range enis[:2] {
		require.NoError(t, n.aws.SetENISecurityGroups(ctx, id, []string{"sg-0sim00000001", "sg-0sim00000002"}))
	}
	require.NoError(t, n.aws.SetENISecurityGroups(ctx, enis[2], []string{"sg-0sim00000003"}))
	seen, err := n.aws.DescribeENIs(ctx, enis)
	require.NoError(t, err)
	seed := map[string][]string{}
	for _, e := range seen {
		seed[e.ID] = e.Groups
	}

	r := n.refresher(Config{SecurityGroups: true}, nil, store, nil)
	r.SeedGroups(seed)
	calls := n.sim.Calls()["ModifyNetworkInterfaceAttribute"]
	r.RefreshSecurityGroups(ctx) // at start
	assert.Equal(t, calls+1, n.sim.Calls()["ModifyNetworkInterfaceAttribute"], "only the drifted ENI is changed")
	for _, id := range enis {
		assert.ElementsMatch(t, []string{"sg-0sim00000001", "sg-0sim00000002"}, n.groupsOf(t, id), "ENI %s carries the primary ENI's groups", id)
	}

	// The node's groups change: every secondary ENI follows, once.
	require.NoError(t, n.aws.SetENISecurityGroups(ctx, n.sim.PrimaryENI(), []string{"sg-0sim00000003"}))
	calls = n.sim.Calls()["ModifyNetworkInterfaceAttribute"]
	r.RefreshSecurityGroups(ctx)
	r.RefreshSecurityGroups(ctx)
	assert.Equal(t, calls+3, n.sim.Calls()["ModifyNetworkInterfaceAttribute"])
	for _, id := range enis {
		assert.Equal(t, []string{"sg-0sim00000003"}, n.groupsOf(t, id))
	}

	// An ENI that left the node is forgotten; what is known stays as
	// small as the node's ENIs.
	r.RefreshSecurityGroups(ctx)
	require.NoError(t, n.aws.SetENISecurityGroups(ctx, n.sim.PrimaryENI(), []string{"sg-0sim00000001"}))
	r.Store = store[:2]
	r.RefreshSecurityGroups(ctx)
	assert.Len(t, r.known, 1, "the two ENIs gone are forgotten (the primary ENI is never given groups)")
}

// Told not to (custom networking, no provisioning), the refresh leaves
// every ENI's groups alone.
func TestSecurityGroupsNotRefreshedWhenOff(t *testing.T) {
	n := newNode(t, ec2sim.Config{Seed: 42, SecurityGroupIDs: []string{"sg-0sim00000001", "sg-0sim00000002"}}, false)
	store, enis := n.secondaryENIs(t, 1)
	ctx := context.Background()
	before := n.groupsOf(t, enis[0])
	require.NoError(t, n.aws.SetENISecurityGroups(ctx, n.sim.PrimaryENI(), []string{"sg-0sim00000002"}))
	calls := n.sim.Calls()["ModifyNetworkInterfaceAttribute"]
	n.refresher(Config{}, nil, store, nil).Pass(ctx)
	assert.Equal(t, calls, n.sim.Calls()["ModifyNetworkInterfaceAttribute"])
	assert.Equal(t, before, n.groupsOf(t, enis[0]))
}

// Run refreshes every interval until its context ends.
func TestRunRefreshesEveryInterval(t *testing.T) {
	n := newNode(t, ec2sim.Config{}, false)
	snat := &snatRules{}
	r := n.refresher(Config{Interval: 10 * time.Millisecond}, nil, listed{}, snat)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	require.NoError(t, n.sim.AssociateVPCCIDR("100.64.0.0/16"))
	require.Eventually(t, func() bool { return len(n.ipv4.Get()) == 2 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	<-done
}

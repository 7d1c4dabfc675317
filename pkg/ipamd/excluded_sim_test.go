package ipamd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// twoPodSubnets: a primary subnet with 10 free addresses and two subnets
// tagged for pod ENIs, the bigger one chosen first.
func twoPodSubnets() ec2sim.Config {
	return ec2sim.Config{InstanceType: "m5.xlarge", Seed: 13, Subnets: []ec2sim.SubnetConfig{
		{ID: "subnet-0primary", CIDR: "10.0.0.0/28"},
		{ID: "subnet-0pods", CIDR: "10.0.64.0/24", Tags: map[string]string{awsutils.TagSubnetCNIRole: "1"}},
		{ID: "subnet-0pods2", CIDR: "10.0.65.0/25", Tags: map[string]string{awsutils.TagSubnetCNIRole: "1"}},
	}}
}

// tagSubnet sets the kubernetes.io/role/cni tag of a subnet, as an operator would.
func tagSubnet(t *testing.T, n *simNode, subnetID, role string) {
	t.Helper()
	_, err := rawEC2(n).CreateTags(context.Background(), &ec2.CreateTagsInput{Resources: []string{subnetID},
		Tags: []types.Tag{{Key: aws.String(awsutils.TagSubnetCNIRole), Value: aws.String(role)}}})
	require.NoError(t, err)
}

// storeENIIn returns the datastore's ENI in the subnet.
func storeENIIn(t *testing.T, n *simNode, subnetID string) datastore.ENISummary {
	t.Helper()
	for _, s := range n.agent.store.ENISummaries() {
		if s.Info.SubnetID == subnetID {
			return s
		}
	}
	require.FailNow(t, "no ENI in the datastore is in "+subnetID)
	return datastore.ENISummary{}
}

// drain assigns until no address is left (without letting the pool grow).
func drain(t *testing.T, n *simNode, prefix string) []datastore.Allocation {
	t.Helper()
	var out []datastore.Allocation
	for i := 0; ; i++ {
		a, err := n.agent.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("%s-%d", prefix, i), IfName: "eth0"}, datastore.IPAMMetadata{})
		if errors.Is(err, datastore.ErrNoAvailableIP) {
			return out
		}
		require.NoError(t, err)
		out = append(out, a)
	}
}

// TestSubnetTaggedExcludedLater: an ENI's subnet is tagged
// kubernetes.io/role/cni=0 while pods run on it. After the next ENI sync the
// ENI is excluded: no new pod gets an address from it, its idle addresses
// go back to EC2, its pods keep theirs, /v1/enis shows it, and growth goes
// to another tagged subnet. Tagged back, it is used again; excluded and
// idle, it is freed.
func TestSubnetTaggedExcludedLater(t *testing.T) {
	ctx := context.Background()
	// The subnets' tags are re-read with the forced EC2 check (hourly);
	// here every sync is one.
	n := startSimNode(t, twoPodSubnets(), nil, everySyncReadsEC2)
	n.settle(t, 40)
	eniA := storeENIIn(t, n, "subnet-0pods").Info.ID
	all := n.assign(t, 24, "pod")
	var onA []datastore.Allocation
	for _, a := range all {
		if a.ENIID == eniA {
			onA = append(onA, a)
		}
	}
	require.Len(t, onA, 14, "the primary subnet gives 10, the rest is on the ENI in subnet-0pods")
	n.release(t, onA[3:]) // three pods stay on it
	onA = onA[:3]

	tagSubnet(t, n, "subnet-0pods", "0")
	n.agent.pool.SyncENIs(ctx)
	assert.True(t, n.agent.store.ENIInfos().ENIs[eniA].IsExcludedForPodIPs, "/v1/enis shows the ENI excluded")
	s := n.agent.store.Stats()
	assert.Equal(t, 10, s.TotalIPs, "the excluded ENI's addresses leave the pool figures")
	assert.Equal(t, 10, s.AssignedIPs)

	n.settle(t, 40)
	a := mustENI(t, n.sim, eniA)
	assert.Len(t, a.SecondaryIPs, 3, "only the addresses pods hold stay on the excluded ENI")
	by := enisBySubnet(n.sim)
	require.Len(t, by["subnet-0pods2"], 1, "growth went to the other tagged subnet")
	assert.Len(t, by["subnet-0pods"], 1, "no new ENI in the excluded subnet")
	for _, al := range onA {
		got, ok := n.agent.store.Find(al.Key)
		require.True(t, ok, "a pod on the excluded ENI keeps its address")
		assert.Equal(t, al.IP, got.IP)
	}
	fresh := drain(t, n, "fresh")
	require.NotEmpty(t, fresh)
	for _, al := range fresh {
		assert.NotEqual(t, eniA, al.ENIID, "no new pod gets an address from the excluded ENI")
	}
	n.storeHasOnlyEC2Addresses(t)

	// A pod leaves: its address goes back to EC2 too.
	n.release(t, onA[:1])
	onA = onA[1:]
	n.agent.pool.Step(ctx)
	assert.Len(t, mustENI(t, n.sim, eniA).SecondaryIPs, 2)

	// The tag is set back: the ENI is used again.
	tagSubnet(t, n, "subnet-0pods", "1")
	n.agent.pool.SyncENIs(ctx)
	assert.False(t, n.agent.store.ENIInfos().ENIs[eniA].IsExcludedForPodIPs)
	n.release(t, onA[:1])
	onA = onA[1:]
	again := drain(t, n, "again")
	var landed bool
	for _, al := range again {
		landed = landed || al.ENIID == eniA
	}
	assert.True(t, landed, "the freed address of the no longer excluded ENI is handed out")
	for _, al := range again {
		if al.ENIID == eniA {
			onA = append(onA, al)
		}
	}

	// Excluded again and idle: the ENI is freed, its slot reused.
	tagSubnet(t, n, "subnet-0pods", "0")
	n.agent.pool.SyncENIs(ctx)
	n.release(t, onA)
	n.outliveMinENILifetime()
	n.agent.pool.Step(ctx)
	for _, e := range n.sim.ENIs() {
		assert.NotEqual(t, eniA, e.ID, "the idle excluded ENI is freed")
	}
	_, still := n.agent.store.ENIInfos().ENIs[eniA]
	assert.False(t, still)
}

// TestExcludedSubnetAtStart: ipamd starts on a node whose secondary ENI is
// in a subnet tagged excluded since: before serving, the ENI is marked (no
// ADD gets one of its addresses), and its idle addresses go back to EC2 at
// the pool manager's first step (the node has addresses to serve from, so
// that step comes once ipamd serves); the primary ENI is never marked.
func TestExcludedSubnetAtStart(t *testing.T) {
	first := startSimNode(t, twoPodSubnets(), nil)
	first.settle(t, 40)
	eniA := storeENIIn(t, first, "subnet-0pods").Info.ID
	require.Len(t, mustENI(t, first.sim, eniA).SecondaryIPs, 14)
	tagSubnet(t, first, "subnet-0pods", "0")
	tagSubnet(t, first, "subnet-0primary", "0")

	n := nodeOnSim(t, first.sim, nil, func(o *Options) { o.Timings.MinENILifetime = time.Hour })
	infos := n.agent.store.ENIInfos()
	assert.True(t, infos.ENIs[eniA].IsExcludedForPodIPs)
	assert.False(t, infos.ENIs[first.sim.PrimaryENI()].IsExcludedForPodIPs, "the primary ENI is never marked from subnet tags")
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { n.agent.pool.Run(ctx); close(stopped) }()
	assert.Eventually(t, func() bool { return len(mustENI(t, n.sim, eniA).SecondaryIPs) == 0 }, 10*time.Second, 5*time.Millisecond,
		"its idle addresses went back to EC2 at the first step")
	cancel()
	<-stopped
	n.storeHasOnlyEC2Addresses(t)
}

// TestExcludedSubnetCheckFailureKeepsMarks: DescribeSubnets failing at an
// ENI sync changes no mark and is counted.
func TestExcludedSubnetCheckFailureKeepsMarks(t *testing.T) {
	ctx := context.Background()
	n := startSimNode(t, twoPodSubnets(), nil, everySyncReadsEC2)
	n.settle(t, 40)
	eniA := storeENIIn(t, n, "subnet-0pods").Info.ID
	tagSubnet(t, n, "subnet-0pods", "0")
	n.agent.pool.SyncENIs(ctx)
	require.True(t, n.agent.store.ENIInfos().ENIs[eniA].IsExcludedForPodIPs)

	tagSubnet(t, n, "subnet-0pods", "1")
	n.sim.SetUnauthorized("DescribeSubnets", true)
	n.agent.pool.SyncENIs(ctx)
	assert.True(t, n.agent.store.ENIInfos().ENIs[eniA].IsExcludedForPodIPs, "the mark stays while EC2 cannot be asked")
	assert.Equal(t, 1.0, testutil.ToFloat64(n.agent.metrics.errors.WithLabelValues("checkSubnetExclusionFailed")))

	n.sim.SetUnauthorized("DescribeSubnets", false)
	n.agent.pool.SyncENIs(ctx)
	assert.False(t, n.agent.store.ENIInfos().ENIs[eniA].IsExcludedForPodIPs)
}

// TestExcludedSubnetWithoutDiscovery: ENABLE_SUBNET_DISCOVERY=false marks
// nothing, whatever the subnet tags say.
func TestExcludedSubnetWithoutDiscovery(t *testing.T) {
	ctx := context.Background()
	cfg := twoPodSubnets()
	cfg.Subnets[0].CIDR = "10.0.0.0/24"
	n := startSimNode(t, cfg, map[string]string{"ENABLE_SUBNET_DISCOVERY": "false"})
	n.assign(t, 1, "pod") // the pool wants a second ENI, in the primary subnet
	n.settle(t, 10)
	require.Len(t, n.agent.store.ENISummaries(), 2)
	before := n.agent.store.Stats()

	tagSubnet(t, n, "subnet-0primary", "0")
	n.agent.pool.SyncENIs(ctx)
	for id, e := range n.agent.store.ENIInfos().ENIs {
		assert.False(t, e.IsExcludedForPodIPs, id)
	}
	assert.Equal(t, before.TotalIPs, n.agent.store.Stats().TotalIPs)
}

func everySyncReadsEC2(o *Options) { o.Timings.EC2VerifyInterval = time.Nanosecond }

// TestSubnetTagsAreReadOnlyWhenDue: a sync that IMDS agrees with asks EC2
// nothing, about ENIs or subnets, until the hourly subnet re-check is due;
// then one DescribeSubnets, and no DescribeNetworkInterfaces. A node whose
// ENIs are all in the primary ENI's subnet never re-checks.
func TestSubnetTagsAreReadOnlyWhenDue(t *testing.T) {
	ctx := context.Background()
	n := startSimNode(t, twoPodSubnets(), nil, func(o *Options) { o.Timings.EC2VerifyInterval = 0 })
	n.settle(t, 40)
	n.agent.pool.SyncENIs(ctx) // settles whatever the start left for the sync
	n.sim.ResetCalls()
	for range 3 {
		n.agent.pool.SyncENIs(ctx)
	}
	assert.Empty(t, n.sim.Calls(), "IMDS agrees and no re-check is due: no EC2 call")

	due := startSimNode(t, twoPodSubnets(), nil, func(o *Options) {
		o.Timings.EC2VerifyInterval, o.Timings.SubnetRecheckInterval = 0, time.Nanosecond
	})
	due.settle(t, 40)
	due.agent.pool.SyncENIs(ctx)
	due.sim.ResetCalls()
	due.agent.pool.SyncENIs(ctx)
	due.agent.pool.SyncENIs(ctx)
	assert.Equal(t, map[string]int{"DescribeSubnets": 2}, due.sim.Calls(), "one DescribeSubnets per due re-check, nothing else")

	one := startSimNode(t, ec2sim.Config{}, nil, func(o *Options) {
		o.Timings.EC2VerifyInterval, o.Timings.SubnetRecheckInterval = 0, time.Nanosecond
	})
	one.settle(t, 20)
	one.agent.pool.SyncENIs(ctx)
	one.sim.ResetCalls()
	one.agent.pool.SyncENIs(ctx)
	assert.Empty(t, one.sim.Calls(), "every ENI in the primary subnet: nothing to re-check")
}

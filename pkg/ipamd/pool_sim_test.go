package ipamd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func TestNodeInitFreshInstance(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, nil)
	p := n.agent.pool
	require.NotNil(t, p)
	assert.Equal(t, 3, p.Config().MaxENIs)
	assert.Equal(t, 9, p.Config().SlotsPerENI)
	assert.Equal(t, 29, p.Config().Targets.MaxPods, "from the max-pods table")
	// NewAgent sized the pool once: WARM_ENI_TARGET=1 puts 9 IPs on the primary.
	enis, ips, _ := n.ec2Totals()
	assert.Equal(t, 1, enis)
	assert.Equal(t, 9, ips)
	assert.Equal(t, 9, n.agent.store.Stats().TotalIPs)
	n.storeHasOnlyEC2Addresses(t)
}

func TestWarmENITargetDefault(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, nil)
	n.settle(t, 10)
	pods := n.assign(t, 1, "pod")
	n.settle(t, 10)
	enis, ips, _ := n.ec2Totals()
	assert.Equal(t, 2, enis, "one spare ENI's worth of IPs is kept")
	assert.Equal(t, 18, ips)
	n.storeHasOnlyEC2Addresses(t)

	n.release(t, pods)
	n.outliveMinENILifetime()
	n.settle(t, 10)
	enis, ips, _ = n.ec2Totals()
	assert.Equal(t, 1, enis, "the idle ENI is freed once it is not needed")
	assert.Equal(t, 9, ips)
	assert.Equal(t, 9, n.agent.store.Stats().TotalIPs)
}

func TestWarmIPAndMinimumIPTarget(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"WARM_IP_TARGET": "5", "MINIMUM_IP_TARGET": "10"})
	n.settle(t, 10)
	enis, ips, _ := n.ec2Totals()
	assert.Equal(t, 10, ips, "minimum 10 addresses")
	assert.Equal(t, 2, enis, "9 fit on the primary, the tenth needs a new ENI")

	pods := n.assign(t, 8, "pod")
	n.settle(t, 10)
	s := n.agent.store.Stats()
	assert.Equal(t, 13, s.TotalIPs, "8 used + 5 warm")
	n.release(t, pods)
	n.settle(t, 10)
	assert.Equal(t, 10, n.agent.store.Stats().TotalIPs, "shrinks back to the minimum")
	_, ips, _ = n.ec2Totals()
	assert.Equal(t, 10, ips)
	n.storeHasOnlyEC2Addresses(t)
}

func TestPrefixDelegationWarmPrefixTarget(t *testing.T) {
	// m5.large's max pods (29) would stop growth at two prefixes; an
	// m5.4xlarge has room.
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.4xlarge"}, map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "1"})
	n.settle(t, 10)
	_, ips, prefixes := n.ec2Totals()
	assert.Equal(t, 0, ips)
	assert.Equal(t, 1, prefixes)
	pods := n.assign(t, 17, "pod")
	n.settle(t, 10)
	s := n.agent.store.Stats()
	assert.Equal(t, 3, s.TotalPrefixes, "two in use, one free")
	assert.Equal(t, 1, s.FreePrefixes)
	n.release(t, pods)
	n.settle(t, 10)
	_, _, prefixes = n.ec2Totals()
	assert.Equal(t, 1, prefixes, "free prefixes beyond the target go back")
	n.storeHasOnlyEC2Addresses(t)
}

func TestPrefixDelegationWarmIPTarget(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "WARM_IP_TARGET": "5"})
	n.settle(t, 10)
	_, _, prefixes := n.ec2Totals()
	assert.Equal(t, 1, prefixes)
	n.assign(t, 14, "pod")
	n.settle(t, 10)
	_, _, prefixes = n.ec2Totals()
	assert.Equal(t, 2, prefixes, "14 used + 5 warm needs a second /28")
}

func TestMaxENI(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"MAX_ENI": "1"})
	n.settle(t, 10)
	n.assign(t, 9, "pod")
	for range 5 {
		n.agent.pool.Step(context.Background())
	}
	enis, ips, _ := n.ec2Totals()
	assert.Equal(t, 1, enis, "MAX_ENI=1 never attaches a second ENI")
	assert.Equal(t, 9, ips)
	_, err := n.agent.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "x", IfName: "eth0"}, datastore.IPAMMetadata{})
	assert.ErrorIs(t, err, datastore.ErrNoAvailableIP)
}

func TestMaxPodsClampAndLeakHook(t *testing.T) {
	var hooks []warmpool.Decision
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"WARM_IP_TARGET": "5"},
		func(o *Options) {
			o.MaxPods = 12
			o.OnLeak = func(d warmpool.Decision, _ datastore.Stats) { hooks = append(hooks, d) }
		})
	n.settle(t, 10)
	n.assign(t, 10, "pod")
	n.settle(t, 10)
	assert.Equal(t, 12, n.agent.store.Stats().TotalIPs, "growth is clamped to max pods")
	assert.Empty(t, hooks, "at max pods with free addresses is not a leak")

	n.assign(t, 2, "more")
	time.Sleep(2 * fastTimings.LeakHookInterval)
	warnings := gathered(t, n.agent, "awscni_ipamd_leak_reconcile_triggers_total")
	start := time.Now()
	d := n.agent.pool.Step(context.Background())
	assert.True(t, d.AtMaxPods)
	assert.True(t, d.LeakSuspected)
	require.Len(t, hooks, 1, "the reconciler is asked to run")
	assert.Equal(t, warnings+1, gathered(t, n.agent, "awscni_ipamd_leak_reconcile_triggers_total"))
	n.agent.pool.Step(context.Background())
	assert.Len(t, hooks, 2, "asked again: the reconciler's trigger spaces its passes")
	if time.Since(start) < fastTimings.LeakHookInterval { // else a busy machine let the interval end
		assert.Equal(t, warnings+1, gathered(t, n.agent, "awscni_ipamd_leak_reconcile_triggers_total"),
			"the warning is rate-limited")
	}
	_, ips, _ := n.ec2Totals()
	assert.Equal(t, 12, ips)
}

func TestSubnetExhaustionThenRecovery(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, nil)
	n.settle(t, 10)
	n.sim.SetSubnetExhausted(n.sim.SubnetIDs()[0], true)
	n.sim.ResetCalls()
	n.assign(t, 1, "pod")
	for range 20 {
		n.agent.pool.Step(context.Background())
	}
	calls := n.sim.Calls()
	assert.LessOrEqual(t, calls["CreateNetworkInterface"], 1, "growth pauses after exhaustion instead of hammering EC2")
	enis, _, _ := n.ec2Totals()
	assert.Equal(t, 1, enis)

	n.sim.SetSubnetExhausted(n.sim.SubnetIDs()[0], false)
	time.Sleep(fastTimings.SubnetCooldown + 50*time.Millisecond)
	n.settle(t, 10)
	enis, ips, _ := n.ec2Totals()
	assert.Equal(t, 2, enis, "growth resumes after the cool-down")
	assert.Equal(t, 18, ips)
}

func TestThrottlingStormConverges(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"WARM_IP_TARGET": "5", "MINIMUM_IP_TARGET": "20"})
	n.sim.SetThrottle(0.5)
	n.sim.ResetCalls()
	n.settle(t, 40)
	n.sim.SetThrottle(0)
	n.settle(t, 10)
	assert.Equal(t, 20, n.agent.store.Stats().TotalIPs)
	total := 0
	for _, c := range n.sim.Calls() {
		total += c
	}
	assert.Less(t, total, 200, "the number of EC2 calls stays bounded")
	n.storeHasOnlyEC2Addresses(t)
}

func TestStaleIMDSNeverDropsOrInventsAddresses(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"WARM_IP_TARGET": "5", "MINIMUM_IP_TARGET": "5"})
	n.settle(t, 10)
	n.sim.SetIMDSLag(time.Hour) // IMDS freezes at this view
	before := n.agent.store.Stats().TotalIPs

	// Grow while IMDS lags: EC2 has the new addresses, IMDS does not.
	pods := n.assign(t, 5, "pod")
	n.settle(t, 10)
	grown := n.agent.store.Stats().TotalIPs
	require.Greater(t, grown, before)
	n.agent.pool.SyncENIs(context.Background())
	assert.Equal(t, grown, n.agent.store.Stats().TotalIPs, "an address missing from IMDS but in EC2 is kept")

	// Shrink while IMDS lags: IMDS still shows the returned addresses.
	n.release(t, pods)
	n.settle(t, 10)
	shrunk := n.agent.store.Stats().TotalIPs
	require.Less(t, shrunk, grown)
	time.Sleep(fastTimings.ENISyncInterval + 20*time.Millisecond) // the release cache expires: EC2 alone must decide
	n.agent.pool.SyncENIs(context.Background())
	assert.Equal(t, shrunk, n.agent.store.Stats().TotalIPs, "an address IMDS shows but EC2 does not is never added")
	n.storeHasOnlyEC2Addresses(t)
}

func TestOutOfBandRemovalCaughtByEC2Verify(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, nil, func(o *Options) { o.Timings.EC2VerifyInterval = time.Nanosecond })
	n.settle(t, 10)
	n.sim.SetIMDSLag(time.Hour)
	s := n.agent.store.ENISummaries()[0]
	victim := s.SecondaryIPs[0].Addr()
	require.NoError(t, n.sim.RemoveSecondaryIP(s.Info.ID, victim))
	n.agent.pool.SyncENIs(context.Background())
	n.storeHasOnlyEC2Addresses(t)
}

func TestNodeInitWithExistingENIsAndCheckpoint(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"WARM_IP_TARGET": "3", "MINIMUM_IP_TARGET": "12"})
	n.settle(t, 10)
	pods := n.assign(t, 6, "pod")
	require.NoError(t, n.agent.store.Close())

	// A new ipamd on the same instance and checkpoint.
	cfg := n.agent.opts
	a2, err := NewAgent(context.Background(), cfg)
	require.NoError(t, err)
	defer a2.store.Close()
	assert.Equal(t, 2, len(a2.store.ENISummaries()), "existing ENIs are found in EC2")
	for _, p := range pods {
		got, ok := a2.store.Find(p.Key)
		require.True(t, ok)
		assert.Equal(t, p.IP, got.IP, "allocations are restored onto the discovered addresses")
		assert.Equal(t, p.AssignedAt.UnixNano(), got.AssignedAt.UnixNano())
	}
}

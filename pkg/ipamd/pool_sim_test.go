package ipamd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
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

// Upstream's 3685 configuration (prefix delegation, MINIMUM_IP_TARGET):
// with 30 of 32 addresses assigned and the other 2 cooling, a new pod is
// refused until the pool grows. Counting the cooling addresses as
// available, upstream's target math finds nothing short and refuses pods
// for the whole cooldown (its 2896); here the next step adds a prefix.
func TestPodAboutToWaitGrowsThePoolDespiteCoolingAddresses(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"},
		map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "MINIMUM_IP_TARGET": "32", "IP_COOLDOWN_PERIOD": "30"},
		func(o *Options) { o.MaxPods = 110 })
	n.settle(t, 10)
	_, _, prefixes := n.ec2Totals()
	require.Equal(t, 2, prefixes, "MINIMUM_IP_TARGET 32: two /28s")
	pods := n.fillPool(t, "pod")
	require.Len(t, pods, 32)
	n.release(t, pods[:2])
	s := n.agent.store.Stats()
	require.Equal(t, []int{32, 30, 2}, []int{s.TotalIPs, s.AssignedIPs, s.CooldownIPs})
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "next", IfName: "eth0"}
	_, err := n.agent.store.Assign(key, datastore.IPAMMetadata{})
	require.ErrorIs(t, err, datastore.ErrNoAvailableIP, "the two free addresses are cooling")

	d := n.agent.pool.Step(context.Background())
	assert.Equal(t, warmpool.Decision{Unit: warmpool.UnitPrefix, Short: 1}, d, "a pod is about to wait: the cooling addresses are not counted")
	_, _, prefixes = n.ec2Totals()
	assert.Equal(t, 3, prefixes, "one more /28 within one step")
	_, err = n.agent.store.Assign(key, datastore.IPAMMetadata{})
	require.NoError(t, err, "the pod gets an address without waiting out the cooldown")
	n.storeHasOnlyEC2Addresses(t)

	// The growth is not given back while the two addresses cool.
	d = n.agent.pool.Step(context.Background())
	assert.Zero(t, d.Over, "cooling addresses never make the new prefix look spare")
	_, _, prefixes = n.ec2Totals()
	assert.Equal(t, 3, prefixes)
}

// A fresh m5.large with WARM_ENI_TARGET=1 (one ENI, 9 addresses) under
// churn, time scaled 50x: a pod a second becomes one every 20 ms, the
// 5 s pool interval 100 ms, a pod's life of 2-4 s 40-80 ms, a cooldown of
// 10 s 200 ms (so that the churn needs about 13 addresses: more than the
// first ENI, less than two). Upstream attaches its spare ENI as soon as
// the first pods take addresses, and no ADD finds the pool empty. So must
// ipamd: pods keep arriving (about 5 a step), so they are about to wait
// once fewer addresses are assignable than arrived in the last step plus
// two, WARM_POOL_START_SPREAD (default 10m) does not hold the second ENI
// back, and no ADD is refused while the pool could grow. (Before, the
// spare waited until nothing was assignable and the ADDs of the following
// step were refused, cooling_down.)
func TestFreshNodeChurnIsNeverRefusedForWantOfASpare(t *testing.T) {
	timings := fastTimings
	timings.PoolInterval = 100 * time.Millisecond
	timings.ENISyncInterval = time.Second
	timings.DecreaseInterval = 1500 * time.Millisecond
	timings.MinENILifetime = 3 * time.Second
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, nil, func(o *Options) {
		o.Timings = timings
		o.Config.IPCooldown = 200 * time.Millisecond
	})
	require.Equal(t, 10*time.Minute, n.agent.pool.Config().WarmStartSpread, "the default spread is on")
	require.Equal(t, 9, n.agent.store.Stats().TotalIPs, "a fresh node starts with one ENI's 9 addresses")
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { n.agent.pool.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	const pods = 100
	var (
		mu      sync.Mutex
		refused []string
		wg      sync.WaitGroup
	)
	rng := rand.New(rand.NewPCG(36, 5))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := range pods {
		<-tick.C
		life := 40*time.Millisecond + time.Duration(rng.IntN(40))*time.Millisecond
		key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprint("churn-", i), IfName: "eth0"}
		if _, err := n.agent.store.Assign(key, datastore.IPAMMetadata{}); err != nil {
			s := n.agent.store.Stats()
			mu.Lock()
			refused = append(refused, fmt.Sprintf("pod %d: %v (%d of %d assigned, %d cooling)", i, err, s.AssignedIPs, s.TotalIPs, s.CooldownIPs))
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(life)
			_, _ = n.agent.store.Release(key)
		}()
	}
	wg.Wait()
	assert.Empty(t, refused, "no ADD is refused for want of a spare while the pool could grow")
	enis, _, _ := n.ec2Totals()
	assert.GreaterOrEqual(t, enis, 2, "the spare ENI was attached")
}

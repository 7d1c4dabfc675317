package ipamd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// clientFromConfig replaces the test client with one built from the
// agent's own settings, as the agent builds it in production.
func clientFromConfig(t *testing.T) func(*Options) {
	return func(o *Options) {
		c, err := awsutils.New(context.Background(), o.Config.AWSOptions(nil))
		require.NoError(t, err)
		o.AWS = c
	}
}

// imdsAddresses lists the secondary addresses IMDS shows, per ENI.
func imdsAddresses(t *testing.T, c *awsutils.Client) map[netip.Addr]string {
	t.Helper()
	md, err := c.AttachedENIs(context.Background())
	require.NoError(t, err)
	out := map[netip.Addr]string{}
	for _, e := range md {
		for _, ip := range e.SecondaryIPs {
			out[ip] = e.ENIID
		}
	}
	return out
}

// assignUntilEmpty hands out addresses until the datastore has none left.
func assignUntilEmpty(t *testing.T, n *simNode, prefix string) []datastore.Allocation {
	t.Helper()
	var out []datastore.Allocation
	for i := 0; ; i++ {
		key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("%s-%d", prefix, i), IfName: "eth0"}
		a, err := n.agent.store.Assign(key, datastore.IPAMMetadata{})
		if errors.Is(err, datastore.ErrNoAvailableIP) {
			return out
		}
		require.NoError(t, err)
		out = append(out, a)
	}
}

// runPool runs the pool manager's own loop (steps and ENI syncs) for d.
func runPool(n *simNode, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	n.agent.pool.Run(ctx)
}

func TestIMDSOnlyModeBuildsThePoolFromIMDSWithoutChangingEC2(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	// The node as something else provisioned it: addresses on the primary
	// ENI, an ENI of ours and an untagged one.
	_, err := sim.AddSecondaryIPs(sim.PrimaryENI(), 4)
	require.NoError(t, err)
	_, err = sim.CreateAttachedENI(map[string]string{awsutils.TagInstanceID: sim.InstanceID()}, 3)
	require.NoError(t, err)
	other, err := sim.CreateAttachedENI(nil, 2)
	require.NoError(t, err)
	sim.ResetCalls()
	before := sim.ENIs()

	n := nodeOnSim(t, sim, map[string]string{"ENABLE_IMDS_ONLY_MODE": "true"}, clientFromConfig(t))
	client := n.agent.aws.(*awsutils.Client)
	shown := imdsAddresses(t, client)
	require.Len(t, shown, 9)
	assert.Equal(t, 9, n.agent.store.Stats().TotalIPs, "the pool is what IMDS shows")
	assert.False(t, n.agent.pool.Config().Provisioning, "IMDS-only mode implies no provisioning")

	// Pods get exactly the addresses IMDS shows, and the pool does not grow.
	allocs := assignUntilEmpty(t, n, "pod")
	require.Len(t, allocs, 9)
	for _, a := range allocs {
		assert.Contains(t, shown, a.IP, "address %s is one IMDS shows", a.IP)
	}
	runPool(n, 300*time.Millisecond)

	// Addresses that appear later (assigned by whoever provisions the node)
	// join through the ENI sync, from IMDS alone.
	added, err := sim.AddSecondaryIPs(other, 2)
	require.NoError(t, err)
	runPool(n, 300*time.Millisecond)
	more := assignUntilEmpty(t, n, "late")
	require.Len(t, more, 2)
	for _, a := range more {
		assert.Contains(t, added, a.IP)
	}
	n.release(t, append(allocs, more...))
	runPool(n, 300*time.Millisecond)

	for _, c := range sim.CallLog() {
		assert.True(t, strings.HasPrefix(c.Action, "Describe") && c.Action != "DescribeNetworkInterfaces",
			"EC2 %s called in IMDS-only mode", c.Action)
	}
	t.Logf("EC2 calls in IMDS-only mode: %v", sim.Calls())
	after := sim.ENIs()
	require.Len(t, after, len(before), "no ENI created or deleted")
	for i := range before {
		assert.Equal(t, before[i].Tags, after[i].Tags, "no ENI tagged")
	}
}

func TestManageUntaggedENI(t *testing.T) {
	tests := []struct {
		env          map[string]string
		wantENIs     int // in the datastore
		wantMaxENIs  float64
		wantAddrs    int
		untaggedUsed bool
	}{
		// Default: the untagged ENI is used; the no_manage one never.
		// (It is ipamd's then: the pool grows onto it, and it could be
		// freed when idle, as upstream.)
		{env: nil, wantENIs: 2, wantMaxENIs: 2, wantAddrs: 9 + 9, untaggedUsed: true},
		{env: map[string]string{"MANAGE_UNTAGGED_ENI": "false"}, wantENIs: 1, wantMaxENIs: 1, wantAddrs: 9},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
			untagged, err := sim.CreateAttachedENI(map[string]string{"team": "db"}, 3)
			require.NoError(t, err)
			noManage, err := sim.CreateAttachedENI(map[string]string{awsutils.TagNoManage: "true", awsutils.TagInstanceID: sim.InstanceID()}, 2)
			require.NoError(t, err)
			leftAlone := func() map[string]ec2sim.ENIState {
				out := map[string]ec2sim.ENIState{}
				for _, e := range sim.ENIs() {
					if e.ID == noManage || (e.ID == untagged && !tt.untaggedUsed) {
						out[e.ID] = e
					}
				}
				return out
			}
			before := leftAlone()

			keepENIs := func(o *Options) { o.Timings.MinENILifetime = time.Hour }
			n := nodeOnSim(t, sim, tt.env, clientFromConfig(t), keepENIs)
			p := n.agent.pool
			assert.Equal(t, 3, p.Config().MaxENIs, "the instance's limit")
			assert.Equal(t, tt.wantMaxENIs, gathered(t, n.agent, "awscni_eni_max"), "limit less the ENIs left alone")
			assert.Equal(t, tt.wantMaxENIs*9, gathered(t, n.agent, "awscni_ip_max"))

			n.settle(t, 10)
			allocs := assignUntilEmpty(t, n, "pod")
			for range 5 {
				p.Step(context.Background())
				p.SyncENIs(context.Background())
			}
			allocs = append(allocs, assignUntilEmpty(t, n, "more")...)
			assert.Len(t, allocs, tt.wantAddrs, "pods got every address of the managed ENIs and no other")
			assert.Len(t, n.agent.store.ENISummaries(), tt.wantENIs)
			for _, s := range n.agent.store.ENISummaries() {
				assert.NotEqual(t, noManage, s.Info.ID)
				if !tt.untaggedUsed {
					assert.NotEqual(t, untagged, s.Info.ID)
				}
			}
			assert.Zero(t, sim.Calls()["CreateNetworkInterface"], "the ENIs left alone use up the node's ENI limit")

			n.release(t, allocs)
			n.settle(t, 10)
			p.SyncENIs(context.Background())
			assert.Equal(t, before, leftAlone(), "ENIs left alone are not used, freed, shrunk or tagged")
		})
	}
}

func TestManageUntaggedENIFollowsTagChanges(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	eni, err := sim.CreateAttachedENI(map[string]string{awsutils.TagInstanceID: sim.InstanceID()}, 3)
	require.NoError(t, err)
	n := nodeOnSim(t, sim, map[string]string{"WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "1"}, clientFromConfig(t))
	p := n.agent.pool
	require.Len(t, n.agent.store.ENISummaries(), 2)
	assert.Equal(t, float64(3), gathered(t, n.agent, "awscni_eni_max"))

	// An operator marks the ENI no_manage: the next ENI sync (which reads
	// EC2 because the datastore and EC2 now differ, or on its periodic
	// check) drops it and the limit shrinks.
	require.NoError(t, n.aws.TagENI(context.Background(), eni, map[string]string{awsutils.TagNoManage: "true"}))
	_, err = sim.AddSecondaryIPs(eni, 1) // makes IMDS differ, so the sync asks EC2
	require.NoError(t, err)
	held := len(mustENI(t, sim, eni).SecondaryIPs)
	p.SyncENIs(context.Background())
	require.Len(t, n.agent.store.ENISummaries(), 1)
	assert.Equal(t, float64(2), gathered(t, n.agent, "awscni_eni_max"))
	assert.Equal(t, float64(18), gathered(t, n.agent, "awscni_ip_max"))
	assert.Len(t, mustENI(t, sim, eni).SecondaryIPs, held, "its addresses are left where they are")
}

func mustENI(t *testing.T, sim *ec2sim.Sim, id string) ec2sim.ENIState {
	t.Helper()
	for _, e := range sim.ENIs() {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("ENI %s not in the simulator", id)
	return ec2sim.ENIState{}
}

// cordon sets or clears the node's unschedulable taint and waits until the
// agent has seen it.
func cordon(t *testing.T, c *fake.Clientset, n *simNode, on bool) {
	t.Helper()
	ctx := context.Background()
	node, err := c.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	require.NoError(t, err)
	node.Spec.Taints = nil
	if on {
		node.Spec.Taints = []corev1.Taint{{Key: k8sapi.UnschedulableTaintKey, Effect: corev1.TaintEffectNoSchedule}}
	}
	_, err = c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return n.agent.sched.Schedulable() == !on }, 10*time.Second, 5*time.Millisecond)
}

func TestUnschedulableNodePausesGrowthAndENIRelease(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	existing, err := sim.AddSecondaryIPs(sim.PrimaryENI(), 2)
	require.NoError(t, err)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: k8sapi.UnschedulableTaintKey, Effect: corev1.TaintEffectNoSchedule}}}}
	k8s := fake.NewClientset(node)
	sim.ResetCalls()
	n := nodeOnSim(t, sim, map[string]string{"MY_NODE_NAME": "node-1"}, func(o *Options) { o.K8s = k8s; o.MaxPods = 29 })
	t.Cleanup(n.agent.closeClients)
	require.NotNil(t, n.agent.sched)
	mutating := func() int {
		c := sim.Calls()
		return c["AssignPrivateIpAddresses"] + c["CreateNetworkInterface"] + c["AttachNetworkInterface"] +
			c["DetachNetworkInterface"] + c["DeleteNetworkInterface"] + c["UnassignPrivateIpAddresses"]
	}

	// Cordoned from the start: the pool is not grown, but what it has is
	// handed out.
	n.settle(t, 5)
	assert.Zero(t, mutating(), "no ENI or address added while unschedulable")
	pods := assignUntilEmpty(t, n, "pod")
	require.Len(t, pods, 2)
	assert.ElementsMatch(t, existing, []netip.Addr{pods[0].IP, pods[1].IP})
	n.settle(t, 5)
	assert.Zero(t, mutating())

	// Uncordoned: growth resumes (WARM_ENI_TARGET=1 with two pods: a full
	// primary and a second ENI).
	cordon(t, k8s, n, false)
	n.settle(t, 10)
	enis, _, _ := n.ec2Totals()
	assert.Equal(t, 2, enis)
	assert.Equal(t, 18, n.agent.store.Stats().TotalIPs)

	// Cordoned again with the pods gone: the idle ENI is kept...
	cordon(t, k8s, n, true)
	n.release(t, pods)
	sim.ResetCalls()
	n.settle(t, 10)
	enis, _, _ = n.ec2Totals()
	assert.Equal(t, 2, enis, "no ENI freed while unschedulable")
	assert.Zero(t, mutating())

	// ...and freed once the node is schedulable.
	cordon(t, k8s, n, false)
	n.settle(t, 10)
	enis, _, _ = n.ec2Totals()
	assert.Equal(t, 1, enis)
}

func TestManageENIsNonSchedulableTrueIgnoresTheTaint(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: k8sapi.UnschedulableTaintKey, Effect: corev1.TaintEffectNoSchedule}}}}
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"},
		map[string]string{"MY_NODE_NAME": "node-1", "AWS_MANAGE_ENIS_NON_SCHEDULABLE": "true"},
		func(o *Options) { o.K8s = fake.NewClientset(node); o.MaxPods = 29 })
	t.Cleanup(n.agent.closeClients)
	assert.Nil(t, n.agent.sched)
	assert.Equal(t, 9, n.agent.store.Stats().TotalIPs, "the pool is sized although the node is cordoned")
}

func TestLimitGaugesCountAddressesWithPrefixDelegation(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"ENABLE_PREFIX_DELEGATION": "true"})
	assert.Equal(t, float64(3), gathered(t, n.agent, "awscni_eni_max"))
	assert.Equal(t, float64(3*9*16), gathered(t, n.agent, "awscni_ip_max"), "as upstream: 16 addresses per prefix slot")
}

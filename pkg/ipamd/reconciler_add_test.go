package ipamd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// A default m5.large in secondary-IP mode holds at most 27 addresses while
// the EKS formula gives it 29 max pods: the pool can never reach max pods,
// so the leak signal must come from the address capacity. With all 27 held
// by dead pods, the signal fires, the reconciler runs and a new pod starts.
func TestStandardNodeAtCapacityRaisesLeakSignal(t *testing.T) {
	_, client := testsupport.StartFakeCRI(t)
	rc := podip.Config{Mode: podip.Enforce, Interval: time.Hour, StartDelay: time.Hour, Grace: 50 * time.Millisecond,
		MinTriggerGap: time.Millisecond}
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, nil,
		func(o *Options) { o.CRI = podip.CRISource(client); o.Config.Reconciler = rc })
	require.Equal(t, 29, n.agent.pool.Config().Targets.MaxPods)
	require.Equal(t, 27, n.agent.pool.Config().Targets.MaxAddresses)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.agent.recon.Run(ctx)

	n.assign(t, 27, "dead") // their sandboxes are gone: lost DELs
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "new", IfName: "eth0"}
	_, err := n.agent.store.Assign(key, datastore.IPAMMetadata{})
	require.ErrorIs(t, err, datastore.ErrNoAvailableIP, "the node is full")
	time.Sleep(rc.Grace)

	triggers := gathered(t, n.agent, "awscni_ipamd_leak_reconcile_triggers_total")
	d := n.agent.pool.Step(context.Background())
	require.True(t, d.AtCapacity && d.LeakSuspected && !d.AtMaxPods, d.String())
	assert.Equal(t, triggers+1, gathered(t, n.agent, "awscni_ipamd_leak_reconcile_triggers_total"))
	assert.Equal(t, 1.0, gathered(t, n.agent, "awscni_ipamd_pool_leak_suspected"))
	require.Eventually(t, func() bool {
		_, err := n.agent.store.Assign(key, datastore.IPAMMetadata{})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "the triggered reconciler frees the leaks")
}

// An ADD that finds the pool exhausted on a node full of leaks past their
// grace period is served at once: it takes a fresh list, the runtime says
// by ID that the sandbox is gone, and the leak is reclaimed inline (its
// address rested for the cooldown while the leak waited). The reclaim
// frees one address per ADD; the others wait for the next ADD or pass.
func TestExhaustedADDReclaimsALeakInline(t *testing.T) {
	_, client := testsupport.StartFakeCRI(t)
	rc := podip.Config{Mode: podip.Enforce, Interval: time.Hour, StartDelay: time.Hour, Grace: 100 * time.Millisecond}
	n := startNodeOpts(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 4}, func(o *Options) {
		o.CRI = podip.CRISource(client)
		o.Config.Reconciler = rc
		o.Config.IPCooldown = 50 * time.Millisecond
	})
	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	for _, id := range []string{"dead1", "dead2", "dead3", "dead4"} {
		r, err := c.AddNetwork(context.Background(), addReq(id))
		require.NoError(t, err)
		require.True(t, r.Success)
	}
	time.Sleep(rc.Grace + 20*time.Millisecond)

	r, err := c.AddNetwork(context.Background(), addReq("first"))
	require.NoError(t, err)
	assert.False(t, r.Success, "the leaks were first seen by this ADD's list: none has rested for the cooldown yet")
	st := n.agent.recon.Status()
	require.Len(t, st.Candidates, 4, "the ADD's list made them candidates")
	time.Sleep(n.agent.store.Cooldown() + 20*time.Millisecond)

	before := gathered(t, n.agent, "awscni_ipamd_pod_ip_reconcile_reclaimed_for_add_total")
	r, err = c.AddNetwork(context.Background(), addReq("second"))
	require.NoError(t, err)
	require.True(t, r.Success, "a leak that rested is reclaimed for this ADD, which is served")
	assert.Equal(t, before+1, gathered(t, n.agent, "awscni_ipamd_pod_ip_reconcile_reclaimed_for_add_total"))
	assert.Len(t, n.agent.store.Allocations(), 4, "three leaks left, one new pod")
	st = n.agent.recon.Status()
	assert.Equal(t, 3, len(st.Candidates))
}

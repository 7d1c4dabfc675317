package ipamd

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2fault"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// A checkpoint entry whose address the ENIs read at start leave out stays
// in the checkpoint until evidence ends it (datastore/unplaced.go): no
// restart, however many, makes ipamd forget a running pod's address.

// checkpointed reads the checkpoint file: key → address.
func (n *faultNode) checkpointed(t *testing.T) map[datastore.IPAMKey]netip.Addr {
	t.Helper()
	cp, err := datastore.NewFileCheckpointer(n.agent.opts.Config.CheckpointPath)
	require.NoError(t, err)
	entries, err := cp.Read()
	require.NoError(t, err)
	out := map[datastore.IPAMKey]netip.Addr{}
	for _, e := range entries {
		out[e.Key] = e.IP
	}
	return out
}

// requireAllCheckpointed: every placed pod's entry is in the file.
func (n *faultNode) requireAllCheckpointed(t *testing.T, when string) {
	t.Helper()
	in := n.checkpointed(t)
	for key, ip := range n.pods {
		require.Equal(t, ip, in[key], "%s: the checkpoint lost %s's address", when, key.ContainerID)
	}
}

// restartReading stops the agent and starts it again on the same
// checkpoint, with f corrupting the ENIs node init reads.
func (n *faultNode) restartReading(t *testing.T, f ec2fault.Fault) {
	t.Helper()
	require.NoError(t, n.agent.store.Close())
	before := n.proxy.Applied()
	n.proxy.Add(f)
	a, err := NewAgent(context.Background(), n.agent.opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.store.Close() })
	require.Greater(t, n.proxy.Applied(), before, "node init read the answer without it")
	n.agent = a
}

func TestACheckpointedPodAnAnswerLeftOutSurvivesEveryRestart(t *testing.T) {
	eachSetup(t, func(t *testing.T, as addressSetup, rs reconcilerSetup) {
		n, eni, cidr := withPodsOnAPrimaryCIDR(t, as, rs)
		for i, when := range []string{"after a restart on an answer without it", "after a second restart, the answer still without it"} {
			n.restartReading(t, dropCIDR(ec2fault.ByFilter, eni.Info.ID, cidr))
			for key := range n.pods {
				_, ok := n.agent.store.Find(key)
				require.False(t, ok, "restart %d: not restorable onto a CIDR the answer left out", i+1)
			}
			n.requireAllCheckpointed(t, when)
			n.requireNewPodsGetOthers(t, when)
		}

		n.pendingHolds = rs.mode == "report"
		n.agent.pool.SyncENIs(context.Background())
		n.verify(t)
		n.requirePodsSafe(t, "once the ENI sync finds it")
		n.requireAllCheckpointed(t, "once the ENI sync finds it")
		n.cycle(t, 3)
		n.requirePodsSafe(t, "after steps")
		n.requireAllCheckpointed(t, "after steps")
	})
}

// Two EC2 reads the dispute period apart, both without the address, end
// the entry: it leaves the checkpoint, and a read inside the period
// decides nothing.
func TestTwoReadsApartEndACheckpointEntryNoENIHas(t *testing.T) {
	for _, as := range addressSetups {
		for _, rs := range []reconcilerSetup{reconcilerSetups[0], reconcilerSetups[2]} {
			t.Run(as.name+"/"+rs.name, func(t *testing.T) {
				n, eni, cidr := withPodsOnAPrimaryCIDR(t, as, rs)
				const apart = 2 * time.Second
				n.agent.opts.Timings.DisputeConfirmAfter = apart
				if n.rt != nil {
					for key := range n.pods {
						n.rt.Remove(key.ContainerID) // the pods are gone too
					}
				}
				f := dropCIDR(ec2fault.ByFilter, eni.Info.ID, cidr)
				f.Times = 100 // EC2 keeps leaving it out
				n.restartReading(t, f)
				restored := time.Now()

				n.agent.pool.SyncENIs(context.Background())
				if time.Since(restored) < apart {
					n.requireAllCheckpointed(t, "a read inside the dispute period")
				}
				time.Sleep(time.Until(restored.Add(apart + 10*time.Millisecond)))
				n.agent.pool.SyncENIs(context.Background())
				in := n.checkpointed(t)
				for key := range n.pods {
					assert.NotContains(t, in, key, "two reads agree: %s leaves the checkpoint", key.ContainerID)
				}
				assert.Zero(t, n.agent.store.Unplaced())
				assert.Equal(t, len(n.pods), n.agent.store.RemovedByForce(), "still remembered in process")
			})
		}
	}
}

// With IMDS as the only source of ENIs no answer is evidence: an entry
// whose address IMDS no longer shows stays in the checkpoint until its
// pod's DEL.
func TestIMDSAnswersNeverEndACheckpointEntry(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	_, err := sim.AddSecondaryIPs(sim.PrimaryENI(), 4)
	require.NoError(t, err)
	n := nodeOnSim(t, sim, map[string]string{"ENABLE_IMDS_ONLY_MODE": "true", "DISABLE_NETWORK_RESOURCE_PROVISIONING": "true"})
	ip := n.agent.store.ENISummaries()[0].SecondaryIPs[0].Addr()
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "pod", IfName: "eth0"}
	_, err = n.agent.store.Adopt(ip, key, datastore.IPAMMetadata{})
	require.NoError(t, err)
	require.NoError(t, n.agent.store.Close())
	require.NoError(t, sim.RemoveSecondaryIP(sim.PrimaryENI(), ip))
	a, err := NewAgent(context.Background(), n.agent.opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.store.Close() })
	n.agent = a
	fn := &faultNode{simNode: n, pods: map[datastore.IPAMKey]netip.Addr{key: ip}}

	ctx := context.Background()
	for range 3 {
		a.pool.SyncENIs(ctx)
		time.Sleep(fastTimings.DisputeConfirmAfter + 5*time.Millisecond)
	}
	fn.requireAllCheckpointed(t, "after IMDS answers without it")
	assert.Equal(t, 1, a.store.Unplaced())

	_, err = a.store.Release(key)
	require.ErrorIs(t, err, datastore.ErrUnknownPod)
	assert.NotContains(t, fn.checkpointed(t), key, "its DEL ends it")
}

// An answer that lists the address is no evidence that its pod is gone,
// even when ipamd could not add the ENI that has it this time (its
// set-up failed): the entry stays, and after another restart the pod
// still has its address and no new pod gets it.
func TestAnAddressTheReadListsEndsNoEntryThoughItsENIFailedToJoin(t *testing.T) {
	for _, rs := range reconcilerSetups[:3] {
		t.Run(rs.name, func(t *testing.T) {
			n := startFaultNode(t, rs, map[string]string{"WARM_IP_TARGET": "2", "MINIMUM_IP_TARGET": "12"})
			sec := n.eniWith(t, false)
			n.placePods(t, sec.SecondaryIPs[0], 1)
			n.cycle(t, 2)
			n.requirePodsSafe(t, "before")
			n.restartReading(t, ec2fault.Fault{Match: ec2fault.AnyDescribe, ENI: sec.Info.ID, DropENI: true})
			require.Equal(t, 1, n.agent.store.Unplaced())
			n.agent.pool.SetupENI = func(context.Context, awsutils.ENI) error { return errors.New("link not up yet") }
			time.Sleep(fastTimings.DisputeConfirmAfter + 10*time.Millisecond)
			n.agent.pool.SyncENIs(context.Background()) // EC2 lists the ENI and the pod's address
			n.requireAllCheckpointed(t, "after a read that lists it")

			require.NoError(t, n.agent.store.Close())
			a, err := NewAgent(context.Background(), n.agent.opts)
			require.NoError(t, err)
			t.Cleanup(func() { _ = a.store.Close() })
			n.agent = a
			n.requireNewPodsGetOthers(t, "after the next restart")
		})
	}
}

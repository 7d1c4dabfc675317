package ipamd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

var multiNICEnv = withEnv(quietListeners, map[string]string{"ENABLE_MULTI_NIC": "true"})

// multiNICAdd is a pod annotated for one interface per card.
func multiNICAdd(id string) *rpc.AddNetworkRequest {
	r := addReq(id)
	r.RequiresMultiNICAttachment = true
	return r
}

// With ENABLE_MULTI_NIC every network card of the instance gets its own
// datastore with an ENI attached on that card (upstream's route table
// 10000+device+100*card), and a multi-NIC pod gets one address per card,
// in card order, each card's checkpoint holding its entry.
func TestAMultiNICNodeGivesAPodOneAddressPerCard(t *testing.T) {
	for _, tc := range []struct {
		instanceType string
		cards        int
	}{{"c6in.32xlarge", 2}, {"p4d.24xlarge", 4}} {
		t.Run(tc.instanceType, func(t *testing.T) {
			n := startSimNode(t, ec2sim.Config{InstanceType: tc.instanceType}, multiNICEnv)
			require.Len(t, n.agent.cards, tc.cards-1, "a datastore per card above 0")
			onCard := map[string]int{}
			for _, e := range n.sim.ENIs() {
				if e.Attached {
					onCard[e.ID] = e.NetworkCardIndex
				}
			}
			for _, c := range n.agent.cards {
				enis := c.store.ENISummaries()
				require.NotEmpty(t, enis, "card %d has an ENI at start", c.index)
				for _, e := range enis {
					assert.Equal(t, c.index, onCard[e.Info.ID], "card %d's store holds only its card's ENIs", c.index)
					assert.Equal(t, 10000+e.Info.DeviceNumber+100*c.index, e.Info.RouteTableID)
				}
			}
			for _, e := range n.agent.store.ENISummaries() {
				assert.Zero(t, onCard[e.Info.ID], "card 0's store holds only card 0's ENIs")
			}
			for _, c := range n.agent.cards {
				n.settleCard(t, c, 5) // cards above 0 keep one warm address
			}

			conn := serveSimNode(t, n)
			c := rpc.NewCNIBackendClient(conn)
			ctx := context.Background()
			r, err := c.AddNetwork(ctx, multiNICAdd("m1"))
			require.NoError(t, err)
			require.True(t, r.Success)
			require.Len(t, r.IPAllocationMetadata, tc.cards, "one address per card")
			for i, md := range r.IPAllocationMetadata {
				card := 0
				if i > 0 {
					card = n.agent.cards[i-1].index
				}
				store, ok := n.agent.CardStore(card)
				require.True(t, ok)
				a, found := store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "m1", IfName: "eth0"})
				require.True(t, found, "card %d holds the pod under its key", card)
				assert.Equal(t, a.IP.String(), md.IPv4Addr)
				assert.EqualValues(t, a.RouteTableID, md.RouteTableId)
				assert.EqualValues(t, a.DeviceNumber, md.DeviceNumber)
				assert.Equal(t, tc.cards, a.Metadata.InterfacesCount)
				path := datastore.CheckpointPathForCard(n.agent.opts.Config.CheckpointPath, card)
				raw, err := os.ReadFile(path)
				require.NoError(t, err, "card %d's checkpoint", card)
				assert.Contains(t, string(raw), `"ipv4":"`+md.IPv4Addr+`"`, "card %d's checkpoint holds its entry", card)
			}

			single, err := c.AddNetwork(ctx, addReq("s1"))
			require.NoError(t, err)
			require.Len(t, single.IPAllocationMetadata, 1, "a pod without the annotation gets one address")

			d, err := c.DelNetwork(ctx, delReq("m1"))
			require.NoError(t, err)
			require.True(t, d.Success)
			assert.Len(t, d.IPAllocationMetadata, tc.cards, "DEL frees the address on every card")
			for _, c := range n.agent.cards {
				_, found := c.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "m1", IfName: "eth0"})
				assert.False(t, found, "card %d released", c.index)
			}

			pc, err := rpc.NewConfigServerBackendClient(conn).GetNetworkPolicyConfigs(ctx, &emptypb.Empty{})
			require.NoError(t, err)
			assert.True(t, pc.MultiNICEnabled)
		})
	}
}

// settleCard steps a card's pool until it asks for nothing.
func (n *simNode) settleCard(t *testing.T, c *cardState, maxSteps int) {
	t.Helper()
	require.NotNil(t, c.pool, "card %d has a pool manager", c.index)
	for range maxSteps {
		if d := c.pool.Step(context.Background()); d.Short == 0 && d.Over == 0 {
			return
		}
	}
}

// Without the setting only card 0 is managed, whatever the instance.
func TestWithoutMultiNICOnlyCardZeroIsManaged(t *testing.T) {
	n := startSimNode(t, ec2sim.Config{InstanceType: "c6in.32xlarge"}, quietListeners)
	assert.Empty(t, n.agent.cards)
	for _, e := range n.sim.ENIs() {
		if e.Attached {
			assert.Zero(t, e.NetworkCardIndex, "no ENI attached on another card")
		}
	}
	r, err := rpc.NewCNIBackendClient(serveSimNode(t, n)).AddNetwork(context.Background(), multiNICAdd("m"))
	require.NoError(t, err)
	assert.False(t, r.Success, "a multi-NIC pod is refused with the setting off, as upstream")
}

// A multi-NIC pod whose DEL was lost is reclaimed on every card: each
// card's reconciler finds its sandbox gone.
func TestALostMultiNICDELIsReclaimedOnEveryCard(t *testing.T) {
	rt, client := testsupport.StartFakeCRI(t)
	rt.Add(fakecri.Sandbox{ID: "aws-node-sandbox", Name: testsupport.AgentPodName, Namespace: "kube-system", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	rc := podip.Config{Mode: podip.Enforce, Interval: time.Hour, StartDelay: time.Hour, Grace: 20 * time.Millisecond}
	n := startSimNode(t, ec2sim.Config{InstanceType: "p4d.24xlarge"}, multiNICEnv,
		func(o *Options) { o.CRI = podip.CRISource(client); o.Config.Reconciler = rc })
	require.Len(t, n.agent.cards, 3)
	grow := func() { // as the cards' pool managers and reconcilers would between pods
		for _, c := range n.agent.cards {
			require.NotNil(t, c.recon, "card %d has a reconciler", c.index)
			n.settleCard(t, c, 5)
			_, _ = c.recon.VerifyNow(context.Background())
		}
		_, _ = n.agent.recon.VerifyNow(context.Background())
	}
	grow()

	set := n.agent.cardSet()
	live := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("%064s", "live"), IfName: "eth0"}
	gone := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("%064s", "gone"), IfName: "eth0"}
	liveAllocs, err := set.AssignEach(live, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "live"})
	require.NoError(t, err)
	grow()
	_, err = set.AssignEach(gone, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "gone"})
	require.NoError(t, err)
	rt.Add(fakecri.Sandbox{ID: live.ContainerID, Name: "live", Namespace: "prod", IP: liveAllocs[0].IP.String(), State: runtimeapi.PodSandboxState_SANDBOX_READY})
	time.Sleep(rc.Grace) // past the grace of an ADD in flight

	for _, r := range n.agent.reconcilers() {
		r.Pass(context.Background(), true)
	}
	assert.Empty(t, set.FindDELTargets(gone), "the gone pod's address is freed on every card")
	assert.Len(t, set.FindDELTargets(live), 4, "the live pod keeps its address on every card")
	st, ok := n.agent.reconcilerIntrospection().(podip.NodeStatus)
	require.True(t, ok, "/v1/reconciler merges every card")
	assert.Equal(t, 4, st.Totals.Reclaimed, "one reclaim per card")
}

// Each card's checkpoint survives a restart: the restarted agent restores
// a multi-NIC pod's address on every card.
func TestAMultiNICPodsAddressesSurviveARestart(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "c6in.32xlarge"})
	dir := t.TempDir()
	env := withEnv(multiNICEnv, map[string]string{"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json")})
	first := nodeOnSim(t, sim, env)
	require.Len(t, first.agent.cards, 1)
	first.settleCard(t, first.agent.cards[0], 5)
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "m", IfName: "eth0"}
	allocs, err := first.agent.cardSet().AssignEach(key, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "m"})
	require.NoError(t, err)
	require.NoError(t, first.agent.store.Close())
	require.NoError(t, first.agent.closeCardStores())
	_, err = os.Stat(filepath.Join(dir, "ipam-nic-1.json"))
	require.NoError(t, err, "card 1's checkpoint is upstream's ipam-nic-1.json")

	again := nodeOnSim(t, sim, env)
	got := again.agent.cardSet().FindDELTargets(key)
	require.Len(t, got, 2)
	for i := range got {
		assert.Equal(t, allocs[i].IP, got[i].IP, "card %d keeps the address", i)
		assert.Equal(t, 2, got[i].Metadata.InterfacesCount)
	}
}

// committers counts the datastores' checkpoint writers running now.
func committers() int {
	buf := make([]byte, 1<<22)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "datastore.(*committer).loop")
}

// A start that fails on a card above 0 (here: tagging its ENI is refused)
// leaves no datastore of any card running.
func TestAFailedCardStartLeavesNoStoreRunning(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "c6in.32xlarge"})
	first := nodeOnSim(t, sim, quietListeners) // tags the primary ENI
	require.NoError(t, first.agent.store.Close())
	_, err := sim.CreateAttachedENIOnCard(1, nil, 2)
	require.NoError(t, err)
	before := committers()
	opts, _ := simOptions(t, sim, multiNICEnv)
	sim.SetUnauthorized("CreateTags", true)
	_, err = NewAgent(context.Background(), opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "network card 1")
	require.Eventually(t, func() bool { return committers() == before }, 5*time.Second, 10*time.Millisecond,
		"no checkpoint writer left running after NewAgent failed")
}

package ipamd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// The runtime reports a multi-NIC pod's first interface only (containerd
// takes a sandbox's IPs from eth0), so its address on card 1 is evidence
// the runtime never gives. When card 1's checkpoint (ipam-nic-1.json) is
// lost or corrupt while such a pod runs, card 1's rebuild keeps the card's
// addresses out of the pool (neither verified free nor handed to another
// pod) as long as the pod is listed; once the runtime no longer has it,
// they are verified free and handed out again.
func TestAMultiNICPodsCardAddressSurvivesALostCardCheckpoint(t *testing.T) {
	for name, lose := range map[string]func(path string) error{
		"missing": os.Remove,
		"corrupt": func(path string) error { return os.WriteFile(path, []byte("{garbage"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			rt, client := testsupport.StartFakeCRI(t)
			rt.Add(fakecri.Sandbox{ID: "aws-node-sandbox", Name: testsupport.AgentPodName, Namespace: "kube-system", State: runtimeapi.PodSandboxState_SANDBOX_READY})
			rc := podip.Config{Mode: podip.Enforce, Interval: time.Hour, StartDelay: time.Hour, Grace: 20 * time.Millisecond}
			sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "c6in.32xlarge"})
			dir := t.TempDir()
			env := withEnv(multiNICEnv, map[string]string{"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json")})
			withCRI := func(o *Options) { o.CRI = podip.CRISource(client); o.Config.Reconciler = rc }
			first := nodeOnSim(t, sim, env, withCRI)
			require.Len(t, first.agent.cards, 1)
			first.settleCard(t, first.agent.cards[0], 5)
			_, _ = first.agent.cards[0].recon.VerifyNow(context.Background())
			_, _ = first.agent.recon.VerifyNow(context.Background())
			key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "live-multinic", IfName: "eth0"}
			allocs, err := first.agent.cardSet().AssignEach(key, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "m"})
			require.NoError(t, err)
			require.Len(t, allocs, 2)
			card1IP := allocs[1].IP
			// What containerd reports: eth0's address only, and the pod's
			// annotations, which the kubelet passes on.
			rt.Add(fakecri.Sandbox{ID: key.ContainerID, Name: "m", Namespace: "prod", IP: allocs[0].IP.String(), State: runtimeapi.PodSandboxState_SANDBOX_READY,
				Annotations: map[string]string{cri.MultiNICAnnotation: cri.MultiNICAttachment}})
			require.NoError(t, first.agent.store.Close())
			require.NoError(t, first.agent.closeCardStores())
			require.NoError(t, lose(filepath.Join(dir, "ipam-nic-1.json")))

			again := nodeOnSim(t, sim, env, withCRI)
			require.Len(t, again.agent.cards, 1)
			c1 := again.agent.cards[0]
			res, err := c1.recon.VerifyNow(context.Background())
			require.NoError(t, err)
			assert.Equal(t, podip.WaitStatuses, res.Reason, "card 1's addresses wait on the multi-NIC pod")
			inPool, free := c1.store.Holds(card1IP)
			assert.True(t, inPool, "card 1's ENI is back with its addresses")
			assert.False(t, free, "the live pod's card-1 address is not free")
			// Another multi-NIC pod cannot be given it: card 1 has nothing
			// to hand out while its addresses wait.
			other := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "second-multinic", IfName: "eth0"}
			got, err := again.agent.cardSet().AssignEach(other, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "n"})
			if err == nil {
				assert.NotEqual(t, card1IP, got[1].IP, "the live pod's card-1 address went to another pod")
			}
			c1.recon.Pass(context.Background(), true)
			_, free = c1.store.Holds(card1IP)
			assert.False(t, free, "a pass does not free it either")

			// The pod is gone: the runtime's word covers card 1 again.
			rt.Remove(key.ContainerID)
			res, err = c1.recon.VerifyNow(context.Background())
			require.NoError(t, err)
			assert.Zero(t, res.Waiting, "nothing waits once the pod is gone")
			inPool, free = c1.store.Holds(card1IP)
			assert.True(t, inPool && free, "the card's addresses are usable again")
			_, err = again.agent.cardSet().AssignEach(other, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "n"})
			assert.NoError(t, err, "a multi-NIC pod gets an address on card 1 again")
		})
	}
}

// An address of card 1 that the datastore let go of while a multi-NIC
// pod's key held it (a forced removal, or a restore that found it on no
// ENI) joins again with that key as its last holder. The pod is listed
// and reports only its eth0 address, which says nothing of card 1: the
// address goes back to the pod's key rather than to the free pool.
func TestAMultiNICPodsCardAddressGoesBackToItWhenItJoinsAgain(t *testing.T) {
	rt, client := testsupport.StartFakeCRI(t)
	rt.Add(fakecri.Sandbox{ID: "aws-node-sandbox", Name: testsupport.AgentPodName, Namespace: "kube-system", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	rc := podip.Config{Mode: podip.Enforce, Interval: time.Hour, StartDelay: time.Hour, Grace: 20 * time.Millisecond}
	n := startSimNode(t, ec2sim.Config{InstanceType: "c6in.32xlarge"}, multiNICEnv,
		func(o *Options) { o.CRI = podip.CRISource(client); o.Config.Reconciler = rc })
	require.Len(t, n.agent.cards, 1)
	c1 := n.agent.cards[0]
	n.settleCard(t, c1, 5)
	_, _ = c1.recon.VerifyNow(context.Background())
	_, _ = n.agent.recon.VerifyNow(context.Background())
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "live-multinic", IfName: "eth0"}
	allocs, err := n.agent.cardSet().AssignEach(key, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "m"})
	require.NoError(t, err)
	require.Len(t, allocs, 2)
	rt.Add(fakecri.Sandbox{ID: key.ContainerID, Name: "m", Namespace: "prod", IP: allocs[0].IP.String(), State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Annotations: map[string]string{cri.MultiNICAnnotation: cri.MultiNICAttachment}})

	b := allocs[1]
	released, err := c1.store.RemoveCIDR(b.ENIID, b.CIDR, true)
	require.NoError(t, err)
	require.Len(t, released, 1)
	require.NoError(t, c1.store.AddCIDR(b.ENIID, b.CIDR))
	_, free := c1.store.Holds(b.IP)
	require.False(t, free, "it joins pending, checked against the runtime first")

	res, err := c1.recon.VerifyNow(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, res.Adopted)
	got, ok := c1.store.Find(key)
	assert.True(t, ok && got.IP == b.IP, "card 1's address is the multi-NIC pod's again")
}

package ipamd

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// setGroups changes an ENI's security groups in EC2, as an operator changing
// the node's groups would (IMDS shows them at once in the simulator).
func setGroups(t *testing.T, n *simNode, eniID string, groups ...string) {
	t.Helper()
	_, err := rawEC2(n).ModifyNetworkInterfaceAttribute(context.Background(),
		&ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String(eniID), Groups: groups})
	require.NoError(t, err)
}

// The agent's IMDS refresh gives the primary ENI's security groups to
// every secondary ENI, counting failures in upstream's
// awscni_ipamd_error_count, and ipamd applies them at start, before the
// pool grows, to ENIs that drifted while it was down (imdsrefresh tests
// the refresh itself: unchanged groups, retries).
func TestSecurityGroupsFollowThePrimaryENI(t *testing.T) {
	simCfg := ec2sim.Config{Seed: 42, SecurityGroupIDs: []string{"sg-0sim00000001", "sg-0sim00000002", "sg-0sim00000003"}}
	n := startSimNode(t, simCfg, map[string]string{"WARM_ENI_TARGET": "3"})
	n.settle(t, 40)
	enis := n.secondaryENIs()
	require.Len(t, enis, 2)
	ctx := context.Background()
	primary := n.aws.InstanceIdentity().PrimaryENIID

	setGroups(t, n, primary, "sg-0sim00000003", "sg-0sim00000001")
	n.sim.SetUnauthorized("ModifyNetworkInterfaceAttribute", true)
	n.agent.imds.RefreshSecurityGroups(ctx)
	assert.Equal(t, 2.0, testutil.ToFloat64(n.agent.metrics.errors.WithLabelValues("refreshSGIDsFailed")), "each ENI's failure counted")
	n.sim.SetUnauthorized("ModifyNetworkInterfaceAttribute", false)
	n.agent.imds.RefreshSecurityGroups(ctx)
	for _, e := range n.secondaryENIs() {
		assert.Equal(t, []string{"sg-0sim00000001", "sg-0sim00000003"}, e.SecurityGroupIDs, "ENI %s follows the primary ENI", e.ID)
	}

	// ipamd restarts after an ENI drifted: the first refresh puts it back.
	setGroups(t, n, enis[0].ID, "sg-0sim00000002")
	require.NoError(t, n.agent.store.Close())
	again := nodeOnSim(t, n.sim, map[string]string{"WARM_ENI_TARGET": "3",
		"AWS_VPC_K8S_CNI_BACKING_STORE": n.agent.opts.Config.CheckpointPath})
	assert.Equal(t, []string{"sg-0sim00000001", "sg-0sim00000003"}, mustENI(t, again.sim, enis[0].ID).SecurityGroupIDs)
}

// Under custom networking the ENIs keep their ENIConfig's groups.
func TestSecurityGroupsNotRefreshedUnderCustomNetworking(t *testing.T) {
	k := newCNKube(nil, nil, eniConfigObject("default", cnPodSubnet, cnPodSG))
	n := startCNNode(t, cnSim(), k, nil)
	n.settle(t, 40)
	setGroups(t, n, n.aws.InstanceIdentity().PrimaryENIID, cnHostSG)
	n.agent.imds.RefreshSecurityGroups(context.Background())
	for _, e := range n.secondaryENIs() {
		assert.Equal(t, []string{cnPodSG}, e.SecurityGroupIDs)
	}
}

package ipamd

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// smallPrimarySubnet: the instance's subnet has 10 free addresses; the VPC
// also has, in the same AZ, a subnet tagged for pod ENIs, a bigger
// untagged one and an excluded one.
func smallPrimarySubnet() ec2sim.Config {
	return ec2sim.Config{InstanceType: "m5.xlarge", Seed: 11, Subnets: []ec2sim.SubnetConfig{
		{ID: "subnet-0primary", CIDR: "10.0.0.0/28"}, // 16 - 5 reserved - the primary ENI's address
		{ID: "subnet-0pods", CIDR: "10.0.64.0/24", Tags: map[string]string{awsutils.TagSubnetCNIRole: "1"}},
		{ID: "subnet-0untagged", CIDR: "10.0.16.0/20"},
		{ID: "subnet-0off", CIDR: "10.0.32.0/20", Tags: map[string]string{awsutils.TagSubnetCNIRole: "0"}},
	}}
}

func enisBySubnet(sim *ec2sim.Sim) map[string][]ec2sim.ENIState {
	out := map[string][]ec2sim.ENIState{}
	for _, e := range sim.ENIs() {
		out[e.SubnetID] = append(out[e.SubnetID], e)
	}
	return out
}

// TestPoolGrowsIntoTaggedSubnet: the primary subnet runs out while the
// pool fills the primary ENI (14 slots on m5.xlarge, 10 addresses in the
// subnet). With subnet discovery (the default) the pool takes what the
// subnet has, one address at a time once it cannot give more, then makes
// a new ENI in the tagged subnet; never in the untagged or excluded ones.
func TestPoolGrowsIntoTaggedSubnet(t *testing.T) {
	n := startSimNode(t, smallPrimarySubnet(), nil)
	n.settle(t, 40)

	by := enisBySubnet(n.sim)
	require.Len(t, by["subnet-0primary"], 1)
	assert.Len(t, by["subnet-0primary"][0].SecondaryIPs, 10, "every free address of the primary subnet")
	require.Len(t, by["subnet-0pods"], 1, "one new ENI in the tagged subnet")
	pods := by["subnet-0pods"][0]
	assert.True(t, pods.Attached)
	assert.Len(t, pods.SecondaryIPs, 14)
	assert.Equal(t, []string{"sg-0sim00000001"}, pods.SecurityGroupIDs)
	assert.Empty(t, by["subnet-0untagged"])
	assert.Empty(t, by["subnet-0off"])

	s := n.agent.store.Stats()
	assert.Equal(t, 24, s.TotalIPs)
	var inStore []string
	for _, e := range n.agent.store.ENISummaries() {
		inStore = append(inStore, e.Info.SubnetID)
	}
	assert.ElementsMatch(t, []string{"subnet-0primary", "subnet-0pods"}, inStore)
	n.storeHasOnlyEC2Addresses(t)

	// Pods get addresses from both subnets.
	allocs := n.assign(t, 24, "pod")
	subnetOf := map[string]bool{}
	for _, a := range allocs {
		for _, e := range n.agent.store.ENISummaries() {
			if e.Info.ID == a.ENIID {
				subnetOf[e.Info.SubnetID] = true
			}
		}
	}
	assert.Equal(t, map[string]bool{"subnet-0primary": true, "subnet-0pods": true}, subnetOf)
}

// TestPoolWithoutSubnetDiscovery: ENABLE_SUBNET_DISCOVERY=false keeps
// every ENI in the primary subnet; once it is full, growth pauses.
func TestPoolWithoutSubnetDiscovery(t *testing.T) {
	n := startSimNode(t, smallPrimarySubnet(), map[string]string{"ENABLE_SUBNET_DISCOVERY": "false"})
	n.settle(t, 40)

	by := enisBySubnet(n.sim)
	require.Len(t, by["subnet-0primary"], 1)
	assert.Len(t, by["subnet-0primary"][0].SecondaryIPs, 10)
	assert.Len(t, n.sim.ENIs(), 1, "no ENI anywhere else")
	assert.Equal(t, 10, n.agent.store.Stats().TotalIPs)
	assert.Zero(t, n.sim.Calls()["CreateNetworkInterface"], "a full subnet pauses growth before any new ENI")
}

// TestPoolRefusesExcludedPrimarySubnet: the primary subnet tagged
// kubernetes.io/role/cni=0 and discovery off: no ENI is made.
func TestPoolRefusesExcludedPrimarySubnet(t *testing.T) {
	cfg := smallPrimarySubnet()
	cfg.Subnets[0].CIDR = "10.0.0.0/24"
	cfg.Subnets[0].Tags = map[string]string{awsutils.TagSubnetCNIRole: "0"}
	n := startSimNode(t, cfg, map[string]string{"ENABLE_SUBNET_DISCOVERY": "false"})
	require.Equal(t, 14, n.agent.store.Stats().TotalIPs, "the primary ENI fills at start")
	n.assign(t, 1, "pod") // now the pool wants a second ENI
	n.sim.ResetCalls()
	n.settle(t, 5)
	assert.Len(t, n.sim.ENIs(), 1)
	assert.Zero(t, n.sim.Calls()["CreateNetworkInterface"])
	assert.NotZero(t, n.sim.Calls()["DescribeSubnets"], "the exclusion was checked")
}

// TestAgentTagsENIs: CLUSTER_NAME and ADDITIONAL_ENI_TAGS reach the ENIs
// the agent creates (with instance_id and createdAt) and, at start, the
// ENIs it manages already (without createdAt); reserved keys never do.
func TestAgentTagsENIs(t *testing.T) {
	env := map[string]string{
		"CLUSTER_NAME":        "blue",
		"ADDITIONAL_ENI_TAGS": `{"team":"net","cost-center":"42","x.k8s.amazonaws.com/y":"no"}`,
	}
	before := time.Now().Truncate(time.Second)
	n := startSimNode(t, ec2sim.Config{}, env, func(o *Options) { o.AWS = nil }) // the agent builds its client from the config
	n.assign(t, 1, "pod")                                                        // the pool wants a second ENI
	n.settle(t, 10)
	require.Len(t, n.sim.ENIs(), 2)

	own := map[string]string{
		awsutils.TagInstanceID: n.sim.InstanceID(), awsutils.TagCluster: "blue", awsutils.TagOwner: "amazon-vpc-cni",
		"team": "net", "cost-center": "42",
	}
	for _, e := range n.sim.ENIs() {
		tags := e.Tags
		if e.ID == n.sim.PrimaryENI() {
			assert.Equal(t, own, tags, "the primary ENI gets ipamd's tags at start, no createdAt")
			continue
		}
		created, err := time.Parse(time.RFC3339, tags[awsutils.TagCreatedAt])
		require.NoError(t, err)
		assert.False(t, created.Before(before), "createdAt %v", created)
		delete(tags, awsutils.TagCreatedAt)
		assert.Equal(t, own, tags)
		assert.Equal(t, "aws-K8S-"+n.sim.InstanceID(), e.Description)
	}

	// An untagged ENI someone else attaches is managed (MANAGE_UNTAGGED_ENI
	// defaults to true): the ENI sync tags it before it joins.
	ctx := context.Background()
	c := rawEC2(n)
	id := leaveENI(t, n, "attached by hand", map[string]string{"owner": "me"})
	_, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(id),
		InstanceId: aws.String(n.sim.InstanceID()), DeviceIndex: aws.Int32(2), NetworkCardIndex: aws.Int32(0)})
	require.NoError(t, err)
	n.agent.pool.SyncENIs(ctx)
	for _, e := range n.sim.ENIs() {
		if e.ID == id {
			want := map[string]string{"owner": "me"}
			for k, v := range own {
				want[k] = v
			}
			assert.Equal(t, want, e.Tags)
		}
	}
	var ids []string
	for _, s := range n.agent.store.ENISummaries() {
		ids = append(ids, s.Info.ID)
	}
	assert.Contains(t, ids, id)
}

// TestAgentSweepsLeakedENIs: the agent runs the leaked-ENI sweep while it
// runs (here every 20 ms) and stops it with itself; old detached ENIs an
// aws-node created are deleted, its own attached ones and others' kept.
func TestAgentSweepsLeakedENIs(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(map[bool]string{false: "on", true: "DISABLE_LEAKED_ENI_CLEANUP"}[disabled], func(t *testing.T) {
			env := map[string]string{"DISABLE_INTROSPECTION": "true", "DISABLE_METRICS": "true"}
			if disabled {
				env["DISABLE_LEAKED_ENI_CLEANUP"] = "true"
			}
			n := startSimNode(t, ec2sim.Config{}, env, func(o *Options) {
				o.Timings.LeakedENISweepPeriod = 20 * time.Millisecond
				o.Timings.LeakedENISweepMaxDelay = -1
			})
			ctx := context.Background()
			old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
			leaked := leaveENI(t, n, "aws-K8S-i-0gone", map[string]string{awsutils.TagInstanceID: "i-0gone", awsutils.TagCreatedAt: old})
			foreign := leaveENI(t, n, "somebody else's", map[string]string{"owner": "db"})

			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- n.agent.Run(runCtx) }()
			exists := func(id string) bool {
				for _, e := range n.sim.ENIs() {
					if e.ID == id {
						return true
					}
				}
				return false
			}
			if disabled {
				time.Sleep(200 * time.Millisecond) // ten periods
				assert.True(t, exists(leaked))
				assert.Zero(t, n.sim.Calls()["DeleteNetworkInterface"])
			} else {
				require.Eventually(t, func() bool { return !exists(leaked) }, 5*time.Second, 10*time.Millisecond)
			}
			assert.True(t, exists(foreign))
			assert.True(t, exists(n.sim.PrimaryENI()))
			cancel()
			require.NoError(t, <-done)
			// A request sent just before the cancel may still reach the
			// simulator and be counted: let it land, then nothing more may.
			time.Sleep(50 * time.Millisecond)
			calls := n.sim.Calls()["DescribeNetworkInterfaces"]
			time.Sleep(100 * time.Millisecond)
			assert.Equal(t, calls, n.sim.Calls()["DescribeNetworkInterfaces"], "the sweep stops with the agent")
		})
	}
}

func TestLeakedENISweepOff(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"default: on", nil, ""},
		{"disabled", map[string]string{"DISABLE_LEAKED_ENI_CLEANUP": "true"}, "DISABLE_LEAKED_ENI_CLEANUP=true"},
		{"no provisioning", map[string]string{"DISABLE_NETWORK_RESOURCE_PROVISIONING": "true"}, "DISABLE_NETWORK_RESOURCE_PROVISIONING=true"},
		{"IMDS only (which implies no provisioning)", map[string]string{"ENABLE_IMDS_ONLY_MODE": "true"}, "ENABLE_IMDS_ONLY_MODE=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"ENABLE_IPv4": "true"}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := LoadConfig(envOf(env))
			require.NoError(t, err)
			assert.Equal(t, tt.want, leakedENISweepOff(cfg))
		})
	}
	// IPv6 mode is refused at start, but the sweep's own rule holds too.
	assert.Equal(t, "ENABLE_IPv6=true", leakedENISweepOff(Config{EnableIPv6: true}))
}

// leaveENI creates a detached ENI straight through EC2, as a crashed
// aws-node or another actor leaves one.
func leaveENI(t *testing.T, n *simNode, desc string, tags map[string]string) string {
	t.Helper()
	spec := types.TagSpecification{ResourceType: types.ResourceTypeNetworkInterface}
	for k, v := range tags {
		spec.Tags = append(spec.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	out, err := rawEC2(n).CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(n.sim.SubnetIDs()[0]), Description: aws.String(desc), TagSpecifications: []types.TagSpecification{spec},
	})
	require.NoError(t, err)
	return aws.ToString(out.NetworkInterface.NetworkInterfaceId)
}

// rawEC2 is an EC2 client for acting as someone other than ipamd.
func rawEC2(n *simNode) *ec2.Client {
	return ec2.NewFromConfig(aws.Config{Region: n.sim.Region(), Credentials: aws.AnonymousCredentials{}}, func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(n.sim.EC2Endpoint())
	})
}

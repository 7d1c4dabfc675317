package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// A custom-networking VPC: the node in 10.0.0.0/20, pods in a subnet of
// the secondary block 100.64.0.0/16 in the node's zone, with a security
// group of their own.
const (
	cnZone          = "us-west-2a" // the simulator's default zone
	cnZoneLabel     = "topology.kubernetes.io/zone"
	cnSecondaryVPC  = "100.64.0.0/16"
	cnPodSubnetCIDR = "100.64.0.0/20"
	cnPodSubnetID   = "subnet-0e2epods00001"
	cnHostSG        = "sg-0e2ehost0000001"
	cnPodSG         = "sg-0e2epods0000001"
	cnUnusable      = "ENIConfigUnusable"
)

// cnOptions is a custom-networking node whose zone label selects the
// ENIConfig named after the zone; configs are the ENIConfigs served at
// start.
func cnOptions(configs ...ENIConfig) Options {
	return Options{
		Env: map[string]string{
			"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true",
			"ENI_CONFIG_LABEL_DEF":               cnZoneLabel,
			"MINIMUM_IP_TARGET":                  "14", // both secondary ENIs of an m5.large (9 each) from the start
			"WARM_IP_TARGET":                     "2",
		},
		SecondaryVPCCIDRs: []string{cnSecondaryVPC},
		Subnets:           []ec2sim.SubnetConfig{{ID: cnPodSubnetID, CIDR: cnPodSubnetCIDR}},
		SecurityGroupIDs:  []string{cnHostSG, cnPodSG},
		NodeLabels:        map[string]string{cnZoneLabel: cnZone},
		ENIConfigs:        configs,
	}
}

// requireInPodSubnet fails t unless every address is in the ENIConfig's
// subnet.
func requireInPodSubnet(t testing.TB, what string, ips ...netip.Addr) {
	t.Helper()
	p := netip.MustParsePrefix(cnPodSubnetCIDR)
	for _, ip := range ips {
		require.Truef(t, p.Contains(ip), "%s: %s is not in the ENIConfig's subnet %s", what, ip, p)
	}
}

// unusableErrors is awscni_ipamd_error_count{fn="eniConfigUnusable"}
// (0 before the first failure: the series does not exist yet).
func unusableErrors(n *Node) float64 {
	v, _ := n.IPAMD.Metric(`awscni_ipamd_error_count{fn="eniConfigUnusable"}`)
	return v
}

// TestCustomNetworking runs pods on a custom-networking node: every pod
// address comes from the ENIConfig's subnet in the secondary VPC block, on
// secondary ENIs made there with the ENIConfig's security group, never from
// the primary ENI; pods reach each other and, with their own address, the
// VPC outside the node; and a lost DEL is reclaimed by the pod-IP
// reconciler into the same subnet.
func TestCustomNetworking(t *testing.T) {
	n := NewNode(t, cnOptions(ENIConfig{Name: cnZone, Subnet: cnPodSubnetID, SecurityGroups: []string{cnPodSG}}))
	require.Equal(t, cnZone, n.Sim.AZ())
	n.WaitPool(t, 14, 30*time.Second)

	name, err := n.IPAMD.ENIConfigName()
	require.NoError(t, err)
	assert.Equal(t, cnZone, name, "/v1/eni-configs: the ENIConfig the zone label selects")

	pods := n.ParallelRun(t, "cn", 10, 3)
	t.Logf("FIGURE 10-pod create-to-IP latency, custom networking: %s", n.CreateLatency.Summary())

	// EC2's view: which ENI holds each pod's address, in which subnet,
	// with which groups.
	enis := map[string]ec2sim.ENIState{}
	for _, e := range n.Sim.ENIs() {
		enis[e.ID] = e
	}
	primary := enis[n.Sim.PrimaryENI()]
	assert.Empty(t, primary.SecondaryIPs, "the primary ENI holds no address for pods")
	assert.Empty(t, primary.Prefixes)
	ec2 := n.EC2PodIPs()
	used := map[string]bool{}
	for _, p := range pods {
		requireInPodSubnet(t, "pod "+p.Name, p.IP)
		id, ok := ec2[p.IP]
		require.Truef(t, ok, "pod %s has %s, which EC2 does not show on the instance's ENIs", p.Name, p.IP)
		e := enis[id]
		assert.NotEqualf(t, primary.ID, id, "pod %s's address is on the primary ENI", p.Name)
		assert.Equalf(t, cnPodSubnetID, e.SubnetID, "subnet of %s (pod %s)", id, p.Name)
		assert.Equalf(t, []string{cnPodSG}, e.SecurityGroupIDs, "groups of %s (pod %s): the ENIConfig's, not the primary ENI's", id, p.Name)
		requireInPodSubnet(t, "primary address of "+id, e.PrimaryIP)
		used[id] = true
		assert.NoError(t, n.CheckPodNetwork(p))
	}
	t.Logf("pods spread over %d secondary ENIs, all in %s", len(used), cnPodSubnetID)
	checked, err := n.CheckENILinks()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, checked, len(used), "every pod ENI set up in the node")
	assert.Equal(t, []string{cnHostSG, cnPodSG}, primary.SecurityGroupIDs, "the primary ENI keeps the node's groups")

	infos, err := n.IPAMD.ENIs()
	require.NoError(t, err)
	require.Contains(t, infos.ENIs, primary.ID)
	assert.True(t, infos.ENIs[primary.ID].IsExcludedForPodIPs, "/v1/enis shows the primary ENI excluded for pod IPs")
	for id, e := range infos.ENIs {
		if id != primary.ID {
			assert.Falsef(t, e.IsExcludedForPodIPs, "/v1/enis: %s excluded", id)
		}
	}
	st := requireConsistent(t, n)
	assert.Len(t, st.Assigned, len(pods))

	// Pods reach each other through the node.
	for i, p := range pods {
		q := pods[(i+1)%len(pods)]
		assert.NoErrorf(t, n.Ping(p, q), "ping %s (%s) -> %s (%s)", p.Name, p.IP, q.Name, q.IP)
	}

	// And the VPC beyond the node, with their own address: the upstream
	// namespace (the VPC router) answers only once it can route the
	// secondary block back to the node, as the VPC's router does. The
	// pods' traffic leaves through their ENI's route table (the ENI's
	// other end answers for its subnet's router) and is not SNATed, being
	// for a VPC destination; the replies come back through eth0.
	gw := netip.MustParsePrefix(nodeSubnet).Addr().Next()
	assert.Error(t, n.PingAddr(pods[0], gw), "without a route back to %s the VPC router cannot answer the pod's own address", cnSecondaryVPC)
	netnsutil.Route(t, n.Net.Upstream, cnSecondaryVPC, n.Sim.ENIs()[0].PrimaryIP.String())
	for _, p := range pods[:3] {
		assert.NoErrorf(t, n.PingAddr(p, gw), "ping %s (%s) -> VPC router %s", p.Name, p.IP, gw)
	}

	// A lost DEL, reclaimed by the reconciler only (as in
	// TestLostDELReclaimedByReconciler).
	lost, kept := pods[:3], pods[3:]
	fresh := reclaimLostDELs(t, n, lost, kept)
	requireInPodSubnet(t, "reclaimed addresses", podIPs(lost)...)
	requireInPodSubnet(t, "the pod created after the restart", fresh.IP)
	assert.NoError(t, n.PingAddr(fresh, gw), "the pod created after the restart reaches the VPC router")
	assert.Zero(t, unusableErrors(n), "the ENIConfig was usable throughout")
}

// TestCustomNetworkingENIConfigFixedLater starts a node whose ENIConfig
// does not exist yet: no ENI is made, the failure is counted and posted as
// a node event, and pods cannot get an address; once the ENIConfig is
// created the agent recovers by itself at its next pool step and pods
// start, in its subnet.
func TestCustomNetworkingENIConfigFixedLater(t *testing.T) {
	n := NewNode(t, cnOptions())

	var ev KubeEvent
	took, ok := WaitFor(20*time.Second, func() bool {
		for _, e := range n.Kube.Events() {
			if e.Mentions(cnUnusable) {
				ev = e
				return true
			}
		}
		return false
	})
	require.Truef(t, ok, "no %s event after %v (%d events)", cnUnusable, took, len(n.Kube.Events()))
	t.Logf("%s event %v after the agent served", cnUnusable, took.Round(time.Millisecond))
	assert.True(t, ev.Mentions(cnZone), "the event names the missing ENIConfig %q", cnZone)
	assert.Positive(t, unusableErrors(n), `awscni_ipamd_error_count{fn="eniConfigUnusable"}`)
	require.Len(t, n.Sim.ENIs(), 1, "no ENI created, none left behind in EC2")
	infos, err := n.IPAMD.ENIs()
	require.NoError(t, err)
	assert.Zero(t, infos.TotalIPs, "the primary ENI's addresses are never offered to pods")

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	start := time.Now()
	_, err = n.RunPod(ctx, n.NextName("early"))
	cancel()
	require.Error(t, err, "a pod cannot get an address while the ENIConfig is missing")
	t.Logf("pod without an address refused after %v: %v", time.Since(start).Round(time.Millisecond), err)

	// The next pool step (every 5 s) attaches the first ENI from it.
	n.Kube.PutENIConfig(t, cnZone, cnPodSubnetID, cnPodSG)
	n.WaitPool(t, 9, 15*time.Second)
	pods := n.ParallelRun(t, "late", 4, 2)
	for _, p := range pods {
		requireInPodSubnet(t, "pod "+p.Name, p.IP)
		assert.NoError(t, n.CheckPodNetwork(p))
	}
	assert.NoError(t, n.Ping(pods[0], pods[len(pods)-1]))
	for _, e := range n.Sim.ENIs()[1:] {
		assert.Equal(t, cnPodSubnetID, e.SubnetID)
		assert.Equal(t, []string{cnPodSG}, e.SecurityGroupIDs)
	}
	requireConsistent(t, n)
}

package ipamd

import (
	"context"
	"encoding/json"
	"math"
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

var ipv6Env = map[string]string{"ENABLE_IPv6": "true", "ENABLE_IPv4": "false", "ENABLE_PREFIX_DELEGATION": "true"}

// An IPv6 node: the primary ENI gets one /80 at start, pods get addresses
// from it over the real gRPC socket (IPv6Addr, VPCv6CIDRs, NodeIPv6), the
// checkpoint carries ipv6 entries, and a restart keeps the pods and the
// prefix without asking EC2 for another.
func TestIPv6NodeServesPodsFromThePrimaryPrefix(t *testing.T) {
	n := startSimNode(t, ec2simtest.IPv6Node(ec2sim.Config{InstanceType: "m5.large", Seed: 42}), withEnv(quietListeners, ipv6Env))
	assert.Nil(t, n.agent.pool, "no pool manager in IPv6 mode")
	prim := mustENI(t, n.sim, n.sim.PrimaryENI())
	require.Len(t, prim.IPv6Prefixes, 1, "one /80 assigned at start")
	prefix := prim.IPv6Prefixes[0]
	assert.Equal(t, 80, prefix.Bits())
	assert.Empty(t, prim.SecondaryIPs, "no IPv4 addresses for pods")
	assert.Equal(t, 1<<48, n.agent.store.Stats().TotalIPs)
	infos := n.agent.store.ENIInfos()
	assert.Contains(t, infos.ENIs[prim.ID].IPv6Cidrs, prefix.String(), "/v1/enis shows the prefix")

	conn := serveSimNode(t, n)
	cni := rpc.NewCNIBackendClient(conn)
	ctx := context.Background()
	var ips []netip.Addr
	for _, id := range []string{"c1", "c2", "c3"} {
		r, err := cni.AddNetwork(ctx, &rpc.AddNetworkRequest{ClientVersion: version.RPCVersion, ContainerID: id, IfName: "eth0",
			NetworkName: "aws-cni", K8S_POD_NAME: "pod-" + id, K8S_POD_NAMESPACE: "default", Netns: "/var/run/netns/" + id})
		require.NoError(t, err)
		require.True(t, r.Success)
		md := r.IPAllocationMetadata[0]
		assert.Empty(t, md.IPv4Addr)
		ip := netip.MustParseAddr(md.IPv6Addr)
		assert.True(t, prefix.Contains(ip), "%s is in %s", ip, prefix)
		assert.Equal(t, []string{ec2simtest.IPv6VPCCIDR}, r.VPCv6CIDRs)
		assert.Empty(t, r.VPCv4CIDRs)
		ips = append(ips, ip)
	}
	assert.Len(t, map[netip.Addr]bool{ips[0]: true, ips[1]: true, ips[2]: true}, 3, "three different addresses")
	cfgs, err := rpc.NewConfigServerBackendClient(conn).GetNetworkPolicyConfigs(ctx, &emptypb.Empty{})
	require.NoError(t, err)
	assert.Equal(t, n.aws.InstanceIdentity().PrimaryIPv6.String(), cfgs.NodeIPv6)
	assert.Empty(t, cfgs.NodeIPv4)

	// STATUS: 2^48 addresses do not fit the reply's int32 fields; they
	// saturate, so the plugin sees addresses available, not 0 or less.
	st, err := rpc.NewCNIMaintenanceClient(conn).PoolStatus(ctx, &rpc.PoolStatusRequest{ClientVersion: version.RPCVersion})
	require.NoError(t, err)
	assert.EqualValues(t, math.MaxInt32, st.TotalIPs)
	assert.EqualValues(t, 3, st.AssignedIPs)
	assert.EqualValues(t, math.MaxInt32, st.AvailableIPs)

	del, err := cni.DelNetwork(ctx, &rpc.DelNetworkRequest{ClientVersion: version.RPCVersion, ContainerID: "c2", IfName: "eth0",
		NetworkName: "aws-cni", Reason: "PodDeleted"})
	require.NoError(t, err)
	assert.Equal(t, ips[1].String(), del.IPAllocationMetadata[0].IPv6Addr)

	raw, err := os.ReadFile(n.agent.opts.Config.CheckpointPath)
	require.NoError(t, err)
	var doc struct {
		Allocations []map[string]any `json:"allocations"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Len(t, doc.Allocations, 2)
	for _, e := range doc.Allocations {
		assert.NotContains(t, e, "ipv4")
		assert.Contains(t, e, "ipv6")
	}
}

// A restart keeps the pods' IPv6 addresses and the prefix: no second /80.
func TestIPv6RestartKeepsPodsAndPrefix(t *testing.T) {
	n := startSimNode(t, ec2simtest.IPv6Node(ec2sim.Config{Seed: 42}), withEnv(quietListeners, ipv6Env))
	held := n.assign(t, 3, "pod")
	require.NoError(t, n.agent.store.Close())
	assigns := n.sim.Calls()["AssignIpv6Addresses"]

	again := nodeOnSim(t, n.sim, withEnv(withEnv(quietListeners, ipv6Env),
		map[string]string{"AWS_VPC_K8S_CNI_BACKING_STORE": n.agent.opts.Config.CheckpointPath}))
	assert.Equal(t, assigns, again.sim.Calls()["AssignIpv6Addresses"], "the primary ENI's /80 is reused")
	for _, a := range held {
		got, ok := again.agent.store.Find(a.Key)
		require.True(t, ok)
		assert.Equal(t, a.IP, got.IP)
	}
	next, err := again.agent.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "new", IfName: "eth0"}, datastore.IPAMMetadata{})
	require.NoError(t, err)
	for _, a := range held {
		assert.NotEqual(t, a.IP, next.IP, "a restored address is never handed out again")
	}
}

// A lost checkpoint on an IPv6 node whose pods still run: the /80 joins the
// pool pending, a ready pod's address is adopted, and while a pod that is
// not ready holds one the whole prefix waits (no ADD is served). Once that
// pod is gone the prefix is verified, and new pods never get a running
// pod's address — the first addresses of the /80 are what a fresh picker
// would hand out first.
func TestIPv6LostCheckpointAdoptsRunningPods(t *testing.T) {
	simCfg := ec2simtest.IPv6Node(ec2sim.Config{Seed: 42})
	sim := ec2simtest.Start(t, simCfg)
	ps, err := sim.AddIPv6Prefixes(sim.PrimaryENI(), 1)
	require.NoError(t, err)
	prefix := ps[0]
	first := prefix.Addr()
	second := first.Next()
	rt, client := testsupport.StartFakeCRI(t)
	rt.Add(fakecri.Sandbox{ID: "running", Name: "web", Namespace: "default", IP: first.String(),
		State: runtimeapi.PodSandboxState_SANDBOX_READY})
	rt.Add(fakecri.Sandbox{ID: "starting", Name: "db", Namespace: "default", IP: second.String(),
		State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY})

	n := nodeOnSim(t, sim, withEnv(ipv6Env, map[string]string{"POD_IP_RECONCILE_MODE": "enforce"}), func(o *Options) { o.CRI = podip.CRISource(client) })
	ctx := context.Background()
	key := func(id string) datastore.IPAMKey {
		return datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"}
	}
	_, err = n.agent.recon.VerifyNow(ctx)
	require.NoError(t, err)
	got, ok := n.agent.store.Find(key("running"))
	require.True(t, ok, "the ready pod's address is adopted")
	assert.Equal(t, first, got.IP)
	_, err = n.agent.store.Assign(key("early"), datastore.IPAMMetadata{})
	require.ErrorIs(t, err, datastore.ErrNoAvailableIP, "the prefix waits while a pod that is not ready holds one of its addresses")

	rt.Remove("starting")
	_, err = n.agent.recon.VerifyNow(ctx)
	require.NoError(t, err)
	for i := range 3 {
		a, err := n.agent.store.Assign(key("new-"+string(rune('a'+i))), datastore.IPAMMetadata{})
		require.NoError(t, err)
		assert.NotEqual(t, first, a.IP, "never the running pod's address")
		assert.True(t, prefix.Contains(a.IP))
	}
}

// A restart that finds the /80 already on the primary ENI but no
// checkpoint is a lost checkpoint, not a fresh node: the rebuild marker is
// written and a runtime that lists no sandbox is not trusted, so nothing
// in the /80 is handed out until the runtime shows what runs. A /80
// assigned at this start is fresh: no marker, pods served at once.
func TestIPv6LostCheckpointIsNotAFreshNode(t *testing.T) {
	env := withEnv(ipv6Env, map[string]string{"POD_IP_RECONCILE_MODE": "enforce"})
	key := func(id string) datastore.IPAMKey {
		return datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"}
	}

	fresh := ec2simtest.Start(t, ec2simtest.IPv6Node(ec2sim.Config{Seed: 42}))
	_, client := testsupport.StartFakeCRI(t)
	n := nodeOnSim(t, fresh, env, func(o *Options) { o.CRI = podip.CRISource(client) })
	assert.NoFileExists(t, n.agent.opts.Config.CheckpointPath+podip.RebuildMarkerSuffix, "a /80 assigned at this start is fresh")
	_, err := n.agent.store.Assign(key("first"), datastore.IPAMMetadata{})
	require.NoError(t, err)

	sim := ec2simtest.Start(t, ec2simtest.IPv6Node(ec2sim.Config{Seed: 42}))
	ps, err := sim.AddIPv6Prefixes(sim.PrimaryENI(), 1)
	require.NoError(t, err)
	rt, client := testsupport.StartFakeCRI(t)
	rt.Remove(testsupport.HostSandbox().ID) // it lists nothing, as a runtime behind the wrong socket would
	n = nodeOnSim(t, sim, env, func(o *Options) { o.CRI = podip.CRISource(client) })
	ctx := context.Background()
	marker := n.agent.opts.Config.CheckpointPath + podip.RebuildMarkerSuffix
	assert.FileExists(t, marker, "the /80 was there before this start: the checkpoint is lost")
	_, err = n.agent.recon.VerifyNow(ctx)
	require.NoError(t, err)
	_, err = n.agent.store.Assign(key("early"), datastore.IPAMMetadata{})
	require.ErrorIs(t, err, datastore.ErrNoAvailableIP, "an empty sandbox list is not trusted after a lost checkpoint")

	// The node's runtime answers: it lists aws-node's own pod (so its
	// list is corroborated) and a running pod.
	running := ps[0].Addr()
	rt.Add(testsupport.HostSandbox())
	rt.Add(fakecri.Sandbox{ID: "running", Name: "web", Namespace: "default", IP: running.String(),
		State: runtimeapi.PodSandboxState_SANDBOX_READY})
	_, err = n.agent.recon.VerifyNow(ctx)
	require.NoError(t, err)
	got, ok := n.agent.store.Find(key("running"))
	require.True(t, ok, "the running pod's address is adopted")
	assert.Equal(t, running, got.IP)
	a, err := n.agent.store.Assign(key("next"), datastore.IPAMMetadata{})
	require.NoError(t, err)
	assert.NotEqual(t, running, a.IP)
	assert.NoFileExists(t, marker, "every address verified: the rebuild is over")
}

// An IPv6 block associated with the VPC while the node runs reaches the
// AddNetwork replies at the next IMDS refresh; the IPv4 blocks, unused in
// IPv6 mode, are not re-read (imdsrefresh tests the refresh itself).
func TestIPv6VPCCIDRBlocksRefreshed(t *testing.T) {
	n := startSimNode(t, ec2simtest.IPv6Node(ec2sim.Config{Seed: 42}), withEnv(quietListeners, ipv6Env))
	ctx := context.Background()
	assert.Equal(t, []string{ec2simtest.IPv6VPCCIDR}, n.agent.vpcSetV6.Strings())

	const second = "2600:1f14:abc:df00::/56"
	require.NoError(t, n.sim.AssociateVPCIPv6CIDR(second))
	require.NoError(t, n.sim.AssociateVPCCIDR("100.64.0.0/16"))
	n.agent.imds.RefreshVPCCIDRs(ctx)
	assert.ElementsMatch(t, []string{ec2simtest.IPv6VPCCIDR, second}, n.agent.vpcSetV6.Strings())
	assert.Equal(t, []string{"10.0.0.0/16"}, n.agent.vpcSet.Strings(), "IPv4 blocks are not re-read in IPv6 mode")

	r, err := rpc.NewCNIBackendClient(serveSimNode(t, n)).AddNetwork(ctx, &rpc.AddNetworkRequest{ClientVersion: version.RPCVersion,
		ContainerID: "c1", IfName: "eth0", NetworkName: "aws-cni", K8S_POD_NAME: "p", K8S_POD_NAMESPACE: "default", Netns: "/var/run/netns/c1"})
	require.NoError(t, err)
	require.True(t, r.Success)
	assert.ElementsMatch(t, []string{ec2simtest.IPv6VPCCIDR, second}, r.VPCv6CIDRs)
}

// The primary subnet tagged out of pod addresses: with subnet discovery on,
// upstream would serve IPv6 pods from another ENI; this build refuses at
// start, naming the tag and the variables, and assigns nothing. With
// discovery off the tag does not apply (as upstream) and the node starts.
func TestIPv6ExcludedPrimarySubnet(t *testing.T) {
	cfg := ec2simtest.IPv6Node(ec2sim.Config{Seed: 42, Subnets: []ec2sim.SubnetConfig{
		{ID: "subnet-0primary", CIDR: "10.0.0.0/20", Tags: map[string]string{awsutils.TagSubnetCNIRole: "0"}},
	}})
	sim := ec2simtest.Start(t, cfg)
	opts, _ := simOptions(t, sim, withEnv(quietListeners, ipv6Env))
	_, err := NewAgent(context.Background(), opts)
	require.Error(t, err)
	for _, want := range []string{"ENABLE_IPv6", "ENABLE_SUBNET_DISCOVERY=false", "subnet-0primary", awsutils.TagSubnetCNIRole} {
		assert.ErrorContains(t, err, want)
	}
	assert.Empty(t, mustENI(t, sim, sim.PrimaryENI()).IPv6Prefixes, "nothing assigned")
	assert.Zero(t, sim.Calls()["AssignIpv6Addresses"])

	n := nodeOnSim(t, sim, withEnv(withEnv(quietListeners, ipv6Env), map[string]string{"ENABLE_SUBNET_DISCOVERY": "false"}))
	assert.Len(t, mustENI(t, sim, sim.PrimaryENI()).IPv6Prefixes, 1, "discovery off: the tag is not read")
	assert.Equal(t, 1<<48, n.agent.store.Stats().TotalIPs)
}

package driver

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
	"github.com/aws/amazon-vpc-cni-k8s/test/vlantest"
)

// These need root and a kernel with VLAN links (the VM harness,
// test/vmkernel); elsewhere they skip.

// branchCase is one family's addresses for a branch pod and a regular
// pod on the same node.
type branchCase struct {
	name                   string
	branchIP, gw           net.IP
	regularIP, regularCIDR string
}

var branchFamilies = []branchCase{
	{"IPv4", net.ParseIP("10.1.0.10").To4(), net.ParseIP("10.1.0.1").To4(), "10.2.0.50", "10.2.0.0/24"},
	{"IPv6", net.ParseIP("2600:1f14:1::10"), vlantest.BranchGatewayIPv6, "fd00:20::50", "fd00:20::/64"},
}

// A branch pod in either mode and family reaches its subnet's gateway and
// is reached from the VPC through its VLAN; it talks with a regular pod of
// the node; the node reaches it over TCP (a kubelet probe). In strict mode
// its traffic to the regular pod crosses the branch ENI. Teardown leaves
// no link, route or rule of it on the node.
func TestBranchPodTrafficAndTeardownVLAN(t *testing.T) {
	vlantest.Require(t)
	for _, mode := range []SGMode{SGModeStrict, SGModeStandard} {
		for _, fam := range branchFamilies {
			t.Run(string(mode)+" "+fam.name, func(t *testing.T) {
				branchPodTrafficAndTeardown(t, mode, fam)
			})
		}
	}
}

func branchPodTrafficAndTeardown(t *testing.T, mode SGMode, c branchCase) {
	v6 := c.branchIP.To4() == nil
	vpc := vlantest.NewVPC(t, v6, mode == SGModeStrict)
	locks := testLocks(t)
	const vlan = 7
	mac := net.HardwareAddr{0x02, 0xbe, 0xef, 0, 0, vlan}
	vb := vpc.AddBranch(t, vlan, mac, c.branchIP, c.gw)

	// A regular pod on the node.
	regularNs := netnsutil.New(t)
	netnsutil.SetUp(t, regularNs, "lo")
	regularIP := net.ParseIP(c.regularIP)
	if v4 := regularIP.To4(); v4 != nil {
		regularIP = v4
	}
	regular := PodNetwork{HostVeth: "enireg00000001", ContainerIf: "eth0", NetnsPath: regularNs.Path(), IP: regularIP, RouteTable: MainTable, MTU: 9001}
	require.NoError(t, inNode(t, vpc.Node, func() error { return Setup(regular, locks, quiet) }))
	vpc.RouteToNode(t, c.regularCIDR)
	rulesBefore := vlantest.Rules(t, vpc.Node)

	// The branch pod.
	branchNs := netnsutil.New(t)
	netnsutil.SetUp(t, branchNs, "lo")
	hostVeth := "vlan0000000001"
	if mode == SGModeStandard {
		hostVeth = "eni00000000001"
	}
	b := BranchPod{
		PodNetwork: PodNetwork{HostVeth: hostVeth, ContainerIf: "eth0", NetnsPath: branchNs.Path(), IP: c.branchIP, MTU: 9001},
		VlanID:     vlan, ENIMAC: mac, SubnetGW: c.gw, TrunkIndex: vpc.TrunkIndex, Mode: mode,
	}
	require.NoError(t, inNode(t, vpc.Node, func() error { return SetupBranchENI(b, locks, quiet) }))
	requireBranchState(t, vpc.Node, b)

	if !v6 {
		// (An IPv6 subnet's gateway is link-local: only the VLAN link reaches it.)
		require.NoError(t, vlantest.Ping(branchNs, c.gw), "branch pod -> its subnet gateway")
	}
	require.NoError(t, vlantest.Ping(branchNs, vpc.RouterIP()), "branch pod -> VPC")
	require.NoError(t, vlantest.TCPEcho(branchNs, c.branchIP, vpc.Net), "VPC -> branch pod over TCP")
	require.NoError(t, vlantest.TCPEcho(vpc.Net, vpc.RouterIP(), branchNs), "branch pod -> VPC over TCP")
	before := vpc.RxPackets(t, vb)
	require.NoError(t, vlantest.Ping(branchNs, regularIP), "branch pod -> regular pod")
	if mode == SGModeStrict {
		assert.Greater(t, vpc.RxPackets(t, vb), before, "strict: the branch pod's packets to a pod of its node cross its ENI")
	}
	require.NoError(t, vlantest.Ping(regularNs, c.branchIP), "regular pod -> branch pod")
	require.NoError(t, vlantest.TCPEcho(branchNs, c.branchIP, regularNs), "regular pod -> branch pod over TCP")
	require.NoError(t, vlantest.TCPEcho(branchNs, c.branchIP, vpc.Node), "node -> branch pod over TCP (kubelet probe)")

	// DEL: teardown with the namespace still there, then the runtime
	// deletes the namespace.
	var peer int
	require.NoError(t, inNode(t, vpc.Node, func() (err error) { peer, err = HostPeer(branchNs.Path(), "eth0", quiet); return err }))
	require.Positive(t, peer)
	require.NoError(t, inNode(t, vpc.Node, func() error { return TeardownBranchENI(vlan, c.branchIP, peer, locks, quiet) }))
	require.NoError(t, inNode(t, vpc.Node, func() error { return TeardownBranchENI(vlan, c.branchIP, 0, locks, quiet) }), "twice")
	requireNoBranchState(t, vpc.Node, b)
	netnsutil.Delete(t, branchNs)
	requireLinkGoes(t, vpc.Node, hostVeth)
	assert.Equal(t, rulesBefore, vlantest.Rules(t, vpc.Node), "the node's rules are as before the branch pod")

	// The regular pod is untouched.
	require.NoError(t, inNode(t, vpc.Node, func() error { return Check(regular) }))
	require.NoError(t, vlantest.Ping(regularNs, vpc.RouterIP()), "regular pod -> VPC after the branch pod left")
}

// A branch pod set up in one mode is torn down completely, and a pod of
// the same name and VLAN is then set up in the other mode (a change of
// podSGEnforcingMode between pods).
func TestBranchModeSwitchLeavesNoStaleStateVLAN(t *testing.T) {
	vlantest.Require(t)
	vpc := vlantest.NewVPC(t, false, true)
	locks := testLocks(t)
	mac := net.HardwareAddr{0x02, 0xbe, 0xef, 0, 0, 9}
	ip, gw := net.ParseIP("10.1.0.20").To4(), net.ParseIP("10.1.0.1").To4()
	vpc.AddBranch(t, 9, mac, ip, gw)
	for i, mode := range []SGMode{SGModeStrict, SGModeStandard, SGModeStrict} {
		podNs := netnsutil.New(t)
		b := BranchPod{
			PodNetwork: PodNetwork{HostVeth: "vlan0000000002", ContainerIf: "eth0", NetnsPath: podNs.Path(), IP: ip, MTU: 9001},
			VlanID:     9, ENIMAC: mac, SubnetGW: gw, TrunkIndex: vpc.TrunkIndex, Mode: mode,
		}
		require.NoError(t, inNode(t, vpc.Node, func() error { return SetupBranchENI(b, locks, quiet) }), "pod %d (%s)", i, mode)
		requireBranchState(t, vpc.Node, b)
		require.NoError(t, vlantest.Ping(podNs, gw), "pod %d (%s) -> gateway", i, mode)
		var peer int
		require.NoError(t, inNode(t, vpc.Node, func() (err error) { peer, err = HostPeer(podNs.Path(), "eth0", quiet); return err }))
		require.NoError(t, inNode(t, vpc.Node, func() error { return TeardownBranchENI(9, ip, peer, locks, quiet) }))
		requireNoBranchState(t, vpc.Node, b)
		netnsutil.Delete(t, podNs)
		requireLinkGoes(t, vpc.Node, b.HostVeth)
	}
}

// A setup that fails half-way (here: the trunk ifindex names no link, so
// the VLAN link cannot be made) removes what it built: no veth on either
// side, no VLAN link, rule or route of the VLAN's table. It needs no
// VLAN support, so it also runs outside the VM.
func TestBranchSetupThatFailsLeavesNothing(t *testing.T) {
	netnsutil.RequireRoot(t)
	node, podNs := netnsutil.New(t), netnsutil.New(t)
	netnsutil.SetUp(t, node, "lo")
	rulesBefore := vlantest.Rules(t, node)
	b := BranchPod{
		PodNetwork: PodNetwork{HostVeth: "vlan0000000003", ContainerIf: "eth0", NetnsPath: podNs.Path(), IP: net.ParseIP("10.1.0.30").To4(), MTU: 9001},
		VlanID:     11, ENIMAC: net.HardwareAddr{0x02, 0xbe, 0xef, 0, 0, 11}, SubnetGW: net.ParseIP("10.1.0.1").To4(),
		TrunkIndex: 999999, Mode: SGModeStrict,
	}
	err := inNode(t, node, func() error { return SetupBranchENI(b, testLocks(t), quiet) })
	require.Error(t, err)
	names, lerr := netnsutil.LinkNames(node)
	require.NoError(t, lerr)
	assert.Equal(t, []string{"lo"}, names, "no host veth, no VLAN link")
	podNames, lerr := netnsutil.LinkNames(podNs)
	require.NoError(t, lerr)
	assert.Equal(t, []string{"lo"}, podNames, "no container interface")
	requireNoBranchState(t, node, b)
	assert.Equal(t, rulesBefore, vlantest.Rules(t, node))
}

// requireBranchState reads the node back: the VLAN link with its id,
// parent and MAC, up; the plan's routes and rules.
func requireBranchState(t *testing.T, node ns.NetNS, b BranchPod) {
	t.Helper()
	h := netnsutil.Handle(t, node)
	plan := PlanBranch(b.IP, b.SubnetGW, b.VlanID, b.HostVeth, b.Mode)
	l, err := h.LinkByName(plan.VLANLink)
	require.NoError(t, err, "VLAN link")
	vl, ok := l.(*netlink.Vlan)
	require.True(t, ok, "%s is a VLAN link (%s)", plan.VLANLink, l.Type())
	assert.Equal(t, b.VlanID, vl.VlanId)
	assert.Equal(t, b.TrunkIndex, vl.ParentIndex)
	assert.Equal(t, b.ENIMAC.String(), vl.HardwareAddr.String())
	assert.NotZero(t, vl.Flags&net.FlagUp, "VLAN link up")
	for key, want := range map[string]string{"accept_ra": "0", "accept_redirects": "1", "forwarding": "0"} {
		got, err := netnsutil.ReadSysctl(node, "net/ipv6/conf/"+plan.VLANLink+"/"+key)
		if err == nil {
			assert.Equal(t, want, got, key)
		}
	}
	hv, err := h.LinkByName(b.HostVeth)
	require.NoError(t, err, "host veth")
	idx := map[int]string{l.Attrs().Index: plan.VLANLink, hv.Attrs().Index: b.HostVeth}

	family := podrules.Family(b.IP)
	var gotRoutes []string
	for _, table := range []int{plan.Table, MainTable} {
		routes, err := h.RouteListFiltered(family, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		require.NoError(t, err)
		for _, r := range routes {
			dev, ok := idx[r.LinkIndex]
			if !ok {
				continue // the node's own routes
			}
			if r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast() && r.Gw == nil && r.Dst.String() != podrules.HostPrefix(b.SubnetGW).String() {
				continue // the kernel's fe80::/64 of a link
			}
			pr := PlannedRoute{Table: table, Dst: r.Dst, Gw: r.Gw, Dev: dev, Scope: r.Scope}
			if family == netlink.FAMILY_V6 && r.Gw == nil {
				pr.Scope = netlink.SCOPE_LINK // IPv6 routes report universe scope
			}
			gotRoutes = append(gotRoutes, pr.String())
		}
	}
	var wantRoutes []string
	for _, r := range plan.Routes {
		wantRoutes = append(wantRoutes, r.String())
	}
	assert.ElementsMatch(t, wantRoutes, gotRoutes)

	var gotRules []string
	rules, err := h.RuleList(family)
	require.NoError(t, err)
	for _, r := range rules {
		mine := r.IifName == b.HostVeth || r.IifName == plan.VLANLink ||
			(r.Src != nil && r.Src.IP.Equal(b.IP)) || (r.Dst != nil && r.Dst.IP.Equal(b.IP))
		if !mine {
			continue
		}
		gotRules = append(gotRules, PlannedRule{Family: family, Priority: r.Priority, Table: r.Table, IIF: r.IifName, Src: r.Src, Dst: r.Dst}.String())
	}
	var wantRules []string
	for _, r := range plan.Rules {
		wantRules = append(wantRules, r.String())
	}
	assert.ElementsMatch(t, wantRules, gotRules)
}

// requireNoBranchState: no VLAN link, no route of the VLAN's table, no
// priority-10 rule, no 512/1536 rule or main route of the pod address.
func requireNoBranchState(t *testing.T, node ns.NetNS, b BranchPod) {
	t.Helper()
	requireNoLink(t, node, VLANLinkName(b.VlanID))
	h := netnsutil.Handle(t, node)
	for _, f := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := h.RouteListFiltered(f, &netlink.Route{Table: VLANTable(b.VlanID)}, netlink.RT_FILTER_TABLE)
		require.NoError(t, err)
		assert.Empty(t, routes, "routes of table %d", VLANTable(b.VlanID))
		rules, err := h.RuleList(f)
		require.NoError(t, err)
		for _, r := range rules {
			assert.NotEqual(t, VlanRulePriority, r.Priority, "rule %s", r)
			if r.Priority == ToContainerRulePriority || r.Priority == FromPodRulePriority {
				assert.False(t, (r.Dst != nil && r.Dst.IP.Equal(b.IP)) || (r.Src != nil && r.Src.IP.Equal(b.IP)), "rule %s", r)
			}
		}
	}
	assert.Empty(t, mainRoutesTo(t, node, b.IP), "main-table route to the pod")
}

// requireLinkGoes waits for a veth of a deleted namespace to go: the
// kernel destroys the namespace, and the pair with it, asynchronously.
func requireLinkGoes(t *testing.T, node ns.NetNS, name string) {
	t.Helper()
	assert.Eventually(t, func() bool {
		names, err := netnsutil.LinkNames(node)
		return err == nil && !slices.Contains(names, name)
	}, vlantest.Timeout, 20*time.Millisecond, "%s still in the node", name)
}

func requireNoLink(t *testing.T, node ns.NetNS, name string) {
	t.Helper()
	names, err := netnsutil.LinkNames(node)
	require.NoError(t, err)
	assert.NotContains(t, names, name)
}

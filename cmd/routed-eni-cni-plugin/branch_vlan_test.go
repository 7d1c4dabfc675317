package main

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
	"github.com/aws/amazon-vpc-cni-k8s/test/vlantest"
)

// These run the plugin's ADD and DEL in-process (no plugin binary: the VM
// harness has no Go toolchain) inside a node namespace, against an ipamd
// stand-in that answers like upstream's ipamd for a branch-ENI pod. The
// ones named ...VLAN need a kernel with VLAN links (the VM harness,
// test/vmkernel) and skip elsewhere.

// branchIPAMD answers AddNetwork with add and DelNetwork with del, and
// records the DelNetwork reasons.
type branchIPAMD struct {
	rpc.UnimplementedCNIBackendServer
	add *rpc.AddNetworkReply
	del *rpc.DelNetworkReply

	mu      sync.Mutex
	reasons []string
}

func (s *branchIPAMD) AddNetwork(context.Context, *rpc.AddNetworkRequest) (*rpc.AddNetworkReply, error) {
	return s.add, nil
}

func (s *branchIPAMD) DelNetwork(_ context.Context, r *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reasons = append(s.reasons, r.Reason)
	return s.del, nil
}

func (s *branchIPAMD) delReasons() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reasons)
}

// branchPodSpec is a branch-ENI pod as ipamd's reply describes it.
type branchPodSpec struct {
	vlan int
	mac  net.HardwareAddr
	ip   net.IP
	gw   net.IP
}

// reply is upstream ipamd's AddNetwork reply for the pod on trunk.
func (b branchPodSpec) reply(trunk int) *rpc.AddNetworkReply {
	md := &rpc.IPAllocationMetadata{DeviceNumber: -1, RouteTableId: 0}
	if b.ip.To4() != nil {
		md.IPv4Addr = b.ip.String()
	} else {
		md.IPv6Addr = b.ip.String()
	}
	return &rpc.AddNetworkReply{Success: true, IPAllocationMetadata: []*rpc.IPAllocationMetadata{md},
		PodVlanId: int32(b.vlan), PodENIMAC: b.mac.String(), PodENISubnetGW: b.gw.String(), ParentIfIndex: int32(trunk)}
}

// branchVerb is the CNI invocation of pod default/web in netnsPath.
func branchVerb(t *testing.T, sock, netnsPath string, mode driver.SGMode, extra map[string]any) *skel.CmdArgs {
	t.Helper()
	conf := map[string]any{"podSGEnforcingMode": string(mode), "addressLockDir": filepath.Join(t.TempDir(), "locks")}
	for k, v := range extra {
		conf[k] = v
	}
	args, _ := verbConf(t, sock, conf)
	args.ContainerID, args.IfName, args.Netns = "c0ffeeweb", "eth0", netnsPath
	args.Args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=c0ffeeweb;K8S_POD_UID=uid-web"
	return args
}

// inNodeNS runs f on a thread in the node namespace, where the runtime
// runs the plugin.
func inNodeNS(t *testing.T, node ns.NetNS, f func() error) error {
	t.Helper()
	var err error
	require.NoError(t, node.Do(func(ns.NetNS) error { err = f(); return nil }))
	return err
}

// addInProcess runs ADD and returns its result.
func addInProcess(t *testing.T, node ns.NetNS, args *skel.CmdArgs) (*current.Result, error) {
	t.Helper()
	inv, done, err := start("ADD", args, true)
	require.NoError(t, err)
	defer done()
	var res *current.Result
	err = inNodeNS(t, node, func() (err error) { res, err = inv.add(); return err })
	return res, err
}

// delInProcess runs DEL.
func delInProcess(t *testing.T, node ns.NetNS, args *skel.CmdArgs) error {
	t.Helper()
	return inNodeNS(t, node, func() error { return cmdDel(args) })
}

// prevResultOf is res as a runtime passes it back in DEL's netconf.
func prevResultOf(t *testing.T, res *current.Result) map[string]any {
	t.Helper()
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

// A branch-ENI pod, in either mode and family, is wired by ADD from ipamd's
// reply: the result names its host veth (vlan… strict, eni… standard), the
// VLAN in the dummy entry and the subnet gateway; the pod reaches the VPC
// and the node reaches it over TCP. DEL with that result as prevResult
// tears it down without calling ipamd, and the runtime's second DEL (no
// namespace) does nothing; nothing of the pod is left on the node.
func TestBranchPodAddThenDelFromPrevResultVLAN(t *testing.T) {
	vlantest.Require(t)
	for _, mode := range []driver.SGMode{driver.SGModeStrict, driver.SGModeStandard} {
		for _, v6 := range []bool{false, true} {
			name := string(mode) + " IPv4"
			spec := branchPodSpec{vlan: 7, mac: net.HardwareAddr{0x02, 0xbe, 0xef, 0, 0, 7}, ip: net.ParseIP("10.1.0.10").To4(), gw: net.ParseIP("10.1.0.1").To4()}
			if v6 {
				name = string(mode) + " IPv6"
				spec.ip, spec.gw = net.ParseIP("2600:1f14:1::10"), vlantest.BranchGatewayIPv6
			}
			t.Run(name, func(t *testing.T) { branchAddThenDel(t, mode, spec, v6) })
		}
	}
}

func branchAddThenDel(t *testing.T, mode driver.SGMode, spec branchPodSpec, v6 bool) {
	vpc := vlantest.NewVPC(t, v6, mode == driver.SGModeStrict)
	vpc.AddBranch(t, spec.vlan, spec.mac, spec.ip, spec.gw)
	rulesBefore := vlantest.Rules(t, vpc.Node)
	podNs := netnsutil.New(t)
	netnsutil.SetUp(t, podNs, "lo")
	ipamd := &branchIPAMD{add: spec.reply(vpc.TrunkIndex), del: &rpc.DelNetworkReply{Success: true}}
	sock, _ := backendOnlyIPAMD(t, ipamd)

	res, err := addInProcess(t, vpc.Node, branchVerb(t, sock, podNs.Path(), mode, nil))
	require.NoError(t, err)
	hostVeth := hostVethName(branchVethPrefix("eni", mode), "default", "web")
	require.Len(t, res.Interfaces, 3)
	assert.Equal(t, hostVeth, res.Interfaces[0].Name)
	assert.Equal(t, current.Interface{Name: "eth0", Sandbox: podNs.Path(), Mac: "0"}, *res.Interfaces[1])
	assert.Equal(t, current.Interface{Name: dummyIfName("default", "web"), Mac: "7"}, *res.Interfaces[2])
	require.Len(t, res.IPs, 1)
	assert.Equal(t, spec.ip.String(), res.IPs[0].Address.IP.String())
	assert.Equal(t, spec.gw.String(), res.IPs[0].Gateway.String())
	links, err := netnsutil.LinkNames(vpc.Node)
	require.NoError(t, err)
	assert.Contains(t, links, hostVeth)
	assert.Contains(t, links, driver.VLANLinkName(spec.vlan))

	require.NoError(t, vlantest.Ping(podNs, vpc.RouterIP()), "branch pod -> VPC")
	require.NoError(t, vlantest.TCPEcho(podNs, spec.ip, vpc.Node), "node -> branch pod over TCP (kubelet probe)")
	require.NoError(t, vlantest.TCPEcho(podNs, spec.ip, vpc.Net), "VPC -> branch pod over TCP")

	prev := map[string]any{"prevResult": prevResultOf(t, res)}
	require.NoError(t, delInProcess(t, vpc.Node, branchVerb(t, sock, podNs.Path(), mode, prev)))
	assert.Empty(t, ipamd.delReasons(), "ipamd is not asked about a branch-ENI pod's address")
	requireBranchGone(t, vpc.Node, spec)
	require.NoError(t, delInProcess(t, vpc.Node, branchVerb(t, sock, "", mode, prev)), "the runtime's second DEL, without a namespace")
	netnsutil.Delete(t, podNs)
	requireLinkGone(t, vpc.Node, hostVeth)
	assert.Equal(t, rulesBefore, vlantest.Rules(t, vpc.Node), "the node's rules are as before the pod")
}

// DEL tears a branch-ENI pod down from each source that can name it: the
// prevResult upstream's plugin wrote (ipamd down), and ipamd's DelNetwork
// reply carrying the VLAN (no prevResult). A DEL whose mode differs from
// the ADD's still cleans everything.
func TestBranchPodDelFromEachSourceVLAN(t *testing.T) {
	vlantest.Require(t)
	// branchPrevResult's pod: default/web, VLAN 7, 10.0.9.9.
	spec := branchPodSpec{vlan: 7, mac: net.HardwareAddr{0x02, 0xbe, 0xef, 0, 0, 7}, ip: net.ParseIP("10.0.9.9").To4(), gw: net.ParseIP("10.0.9.1").To4()}
	for _, c := range []struct {
		name             string
		addMode, delMode driver.SGMode
		upstreamPrev     bool // DEL carries upstream's prevResult and ipamd is down
		wantIPAMDReasons []string
	}{
		{name: "upstream's prevResult, ipamd down", addMode: driver.SGModeStrict, delMode: driver.SGModeStrict, upstreamPrev: true},
		{name: "ipamd's reply names the VLAN", addMode: driver.SGModeStrict, delMode: driver.SGModeStrict, wantIPAMDReasons: []string{reasonPodDeleted}},
		{name: "added standard, deleted strict", addMode: driver.SGModeStandard, delMode: driver.SGModeStrict, upstreamPrev: true},
		{name: "added strict, deleted standard", addMode: driver.SGModeStrict, delMode: driver.SGModeStandard, wantIPAMDReasons: []string{reasonPodDeleted}},
	} {
		t.Run(c.name, func(t *testing.T) {
			vpc := vlantest.NewVPC(t, false, c.addMode == driver.SGModeStrict)
			vpc.AddBranch(t, spec.vlan, spec.mac, spec.ip, spec.gw)
			rulesBefore := vlantest.Rules(t, vpc.Node)
			podNs := netnsutil.New(t)
			ipamd := &branchIPAMD{add: spec.reply(vpc.TrunkIndex),
				del: &rpc.DelNetworkReply{Success: true, PodVlanId: int32(spec.vlan), IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: spec.ip.String()}}}}
			sock, _ := backendOnlyIPAMD(t, ipamd)
			_, err := addInProcess(t, vpc.Node, branchVerb(t, sock, podNs.Path(), c.addMode, nil))
			require.NoError(t, err)
			require.NoError(t, vlantest.Ping(podNs, vpc.RouterIP()))

			delSock, extra := sock, map[string]any{}
			if c.upstreamPrev {
				delSock = filepath.Join(t.TempDir(), "absent.sock")
				extra["prevResult"] = branchPrevResult(t)
			}
			require.NoError(t, delInProcess(t, vpc.Node, branchVerb(t, delSock, podNs.Path(), c.delMode, extra)))
			assert.Equal(t, c.wantIPAMDReasons, ipamd.delReasons())
			requireBranchGone(t, vpc.Node, spec)
			netnsutil.Delete(t, podNs)
			requireLinkGone(t, vpc.Node, hostVethName(branchVethPrefix("eni", c.addMode), "default", "web"))
			assert.Equal(t, rulesBefore, vlantest.Rules(t, vpc.Node))
		})
	}
}

// An ADD whose branch setup fails gives the address back to ipamd
// (DelNetwork, reason SetupNSFailed), fails, and leaves nothing on the
// node. The trunk ifindex names no link, so this fails on any kernel and
// runs outside the VM too.
func TestBranchPodSetupFailureGivesTheAddressBack(t *testing.T) {
	netnsutil.RequireRoot(t)
	node, podNs := netnsutil.New(t), netnsutil.New(t)
	netnsutil.SetUp(t, node, "lo")
	rulesBefore := vlantest.Rules(t, node)
	spec := branchPodSpec{vlan: 9, mac: net.HardwareAddr{0x02, 0xbe, 0xef, 0, 0, 9}, ip: net.ParseIP("10.1.0.30").To4(), gw: net.ParseIP("10.1.0.1").To4()}
	ipamd := &branchIPAMD{add: spec.reply(999999), del: &rpc.DelNetworkReply{Success: true, PodVlanId: 9}}
	sock, _ := backendOnlyIPAMD(t, ipamd)
	_, err := addInProcess(t, node, branchVerb(t, sock, podNs.Path(), driver.SGModeStrict, nil))
	require.ErrorContains(t, err, "setup branch-ENI pod network")
	assert.Equal(t, []string{reasonSetupFailed}, ipamd.delReasons())
	names, err := netnsutil.LinkNames(node)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo"}, names)
	podNames, err := netnsutil.LinkNames(podNs)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo"}, podNames)
	assert.Equal(t, rulesBefore, vlantest.Rules(t, node))
}

// requireBranchGone: no VLAN link, no route of the VLAN's table, no rule
// of it or of the pod's address, no main-table route to the address.
func requireBranchGone(t *testing.T, node ns.NetNS, spec branchPodSpec) {
	t.Helper()
	names, err := netnsutil.LinkNames(node)
	require.NoError(t, err)
	assert.NotContains(t, names, driver.VLANLinkName(spec.vlan))
	h := netnsutil.Handle(t, node)
	table := driver.VLANTable(spec.vlan)
	for _, f := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := h.RouteListFiltered(f, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		require.NoError(t, err)
		assert.Empty(t, routes, "routes of table %d", table)
		main, err := h.RouteListFiltered(f, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE)
		require.NoError(t, err)
		for _, r := range main {
			assert.False(t, r.Dst != nil && r.Dst.IP.Equal(spec.ip), "main route %s", r)
		}
		rules, err := h.RuleList(f)
		require.NoError(t, err)
		for _, r := range rules {
			assert.NotEqual(t, table, r.Table, "rule %s", r)
			assert.False(t, (r.Dst != nil && r.Dst.IP.Equal(spec.ip)) || (r.Src != nil && r.Src.IP.Equal(spec.ip)), "rule %s", r)
		}
	}
}

// requireLinkGone waits for a veth of a deleted namespace to go (the
// kernel destroys namespaces asynchronously).
func requireLinkGone(t *testing.T, node ns.NetNS, name string) {
	t.Helper()
	assert.Eventually(t, func() bool {
		names, err := netnsutil.LinkNames(node)
		return err == nil && !slices.Contains(names, name)
	}, vlantest.Timeout, 20*time.Millisecond, "%s still in the node", name)
}

package vmnode

import (
	"net"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// The VPC of the test, IPv4: the node's primary ENI subnet and one branch
// ENI (VLAN, MAC, address, its subnet's gateway).
var (
	nodeIP     = net.ParseIP("192.168.10.2").To4()
	routerIP   = net.ParseIP("192.168.10.1").To4()
	branchVLAN = 7
	branchMAC  = net.HardwareAddr{0x02, 0xbe, 0xef, 0, 0, 7}
	branchIP   = net.ParseIP("10.1.0.10").To4()
	branchGW   = net.ParseIP("10.1.0.1").To4()
)

// Link names: the node's ENIs and their ends in the VPC.
const (
	primaryLink = "eth0"
	trunkLink   = "eth1"
	vpcPrimary  = "eni-primary"
	vpcTrunk    = "eni-trunk"
	vpcBranch   = "br.7"
)

// vpc is the node (the guest's root namespace) and the VPC namespace.
type vpc struct {
	node, net  ns.NetNS
	trunkIndex int
}

// rootNS is the guest's root network namespace, held by its PID 1.
func rootNS(t *testing.T) ns.NetNS {
	t.Helper()
	n, err := ns.GetNS("/proc/1/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// newVPC wires the node's primary and trunk ENIs as veths into a VPC
// namespace, the branch ENI as a VLAN link on the trunk's far end that
// carries the branch subnet's gateway and knows the pod's address by the
// branch MAC, and gives the node the host rules and sysctls of a strict
// mode node (local table at priority 20, TCP early demux off).
func newVPC(t *testing.T) *vpc {
	t.Helper()
	v := &vpc{node: rootNS(t), net: netnsutil.New(t)}
	netnsutil.SetUp(t, v.net, "lo")
	for _, n := range []ns.NetNS{v.node, v.net} {
		netnsutil.Sysctl(t, n, "net/ipv4/ip_forward", "1")
		netnsutil.Sysctl(t, n, "net/ipv4/conf/all/rp_filter", "0")
		netnsutil.Sysctl(t, n, "net/ipv4/conf/default/rp_filter", "0")
	}
	netnsutil.Sysctl(t, v.node, "net/ipv4/tcp_early_demux", "0")
	netnsutil.Veth(t, v.node, primaryLink, v.net, vpcPrimary)
	netnsutil.Veth(t, v.node, trunkLink, v.net, vpcTrunk)
	netnsutil.AddAddr(t, v.node, primaryLink, nodeIP.String()+"/24")
	netnsutil.AddAddr(t, v.net, vpcPrimary, routerIP.String()+"/24")
	netnsutil.DefaultRoute(t, v.node, routerIP.String())

	h := netnsutil.Handle(t, v.node)
	trunk, err := h.LinkByName(trunkLink)
	if err != nil {
		t.Fatal(err)
	}
	v.trunkIndex = trunk.Attrs().Index
	// ipamd's own strict-mode host rules (networkutils, as its start
	// applies them): the local table at priority 20 instead of 0.
	host, err := networkutils.New(networkutils.Config{PodENI: true, PodSGStrict: true})
	if err != nil {
		t.Fatalf("ipamd's host rules: %v", err)
	}
	defer host.Close()
	if err := host.SyncLocalTableRules(); err != nil {
		t.Fatalf("ipamd's strict-mode local-table rules: %v", err)
	}

	vh := netnsutil.Handle(t, v.net)
	far, err := vh.LinkByName(vpcTrunk)
	if err != nil {
		t.Fatal(err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.ParentIndex = vpcBranch, far.Attrs().Index
	if err := vh.LinkAdd(&netlink.Vlan{LinkAttrs: attrs, VlanId: branchVLAN}); err != nil {
		t.Fatalf("VPC VLAN link %s: %v", vpcBranch, err)
	}
	netnsutil.SetUp(t, v.net, vpcBranch)
	netnsutil.AddAddr(t, v.net, vpcBranch, branchGW.String()+"/24")
	br, err := vh.LinkByName(vpcBranch)
	if err != nil {
		t.Fatal(err)
	}
	if err := vh.NeighSet(&netlink.Neigh{LinkIndex: br.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: branchIP, HardwareAddr: branchMAC}); err != nil {
		t.Fatalf("VPC neighbour %s -> %s: %v", branchIP, branchMAC, err)
	}
	return v
}

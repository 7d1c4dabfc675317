// Package vlantest builds, for the plugin's real-kernel tests of
// branch-ENI (security groups for pods) pods, a node whose trunk ENI is
// stood in for by a veth into a "VPC" namespace. There, each branch ENI
// ends on a VLAN link with the branch's VLAN id that carries the branch
// subnet's gateway and knows the branch pod's address by the branch ENI's
// MAC (as the VPC's fabric does). The node's primary ENI is a second veth
// into the VPC, which routes the node's regular pods to it.
//
// It only touches namespaces it creates. Kernels without the vlan link
// type (802.1Q) make Require skip the test, except inside the VM harness
// (AWS_VPC_CNI_IN_VM=1), where it fails.
package vlantest

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// InVMEnv is set by the VM harness (test/vmkernel), whose kernel has VLAN.
const InVMEnv = "AWS_VPC_CNI_IN_VM"

// Require skips t unless it runs as root on a kernel that can create a
// VLAN link; inside the VM harness a missing VLAN link type fails t.
func Require(t testing.TB) {
	t.Helper()
	netnsutil.RequireRoot(t)
	err := probeVLAN(t)
	if err == nil {
		return
	}
	if os.Getenv(InVMEnv) == "1" {
		t.Fatalf("the VM's kernel must support VLAN links: %v", err)
	}
	t.Skipf("this kernel has no vlan (802.1Q) link type (%v); the test runs in the VM harness test/vmkernel", err)
}

// probeVLAN tries to create a VLAN link on a veth in a throwaway namespace.
func probeVLAN(t testing.TB) error {
	n := netnsutil.New(t)
	defer netnsutil.Delete(t, n)
	h, err := netnsutil.HandleAt(n.Path())
	if err != nil {
		return err
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = "probe0"
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "probe1"}); err != nil {
		return fmt.Errorf("veth: %w", err)
	}
	parent, err := h.LinkByName("probe0")
	if err != nil {
		return err
	}
	vattrs := netlink.NewLinkAttrs()
	vattrs.Name = "probe0.5"
	vattrs.ParentIndex = parent.Attrs().Index
	if err := h.LinkAdd(&netlink.Vlan{LinkAttrs: vattrs, VlanId: 5}); err != nil {
		return fmt.Errorf("vlan link: %w", err)
	}
	return nil
}

// Addresses of the test VPC.
var (
	// Primary ENI subnet: the node and the VPC router on it.
	NodeIPv4   = net.ParseIP("192.168.10.2").To4()
	RouterIPv4 = net.ParseIP("192.168.10.1").To4()
	NodeIPv6   = net.ParseIP("fd00:10::2")
	RouterIPv6 = net.ParseIP("fd00:10::1")
	// BranchGatewayIPv6 is the gateway of every IPv6 subnet in a VPC.
	BranchGatewayIPv6 = net.ParseIP("fe80:ec2::1")
)

// Names of the node's and the VPC's links.
const (
	PrimaryLink = "eth0"
	TrunkLink   = "eth1"
	vpcPrimary  = "eni-primary"
	vpcTrunk    = "eni-trunk"
)

// VPC is a node with a primary and a trunk ENI, and the VPC behind them.
type VPC struct {
	Node, Net  ns.NetNS // the node's namespace and the VPC's
	TrunkIndex int      // the trunk's ifindex in the node
	V6         bool
}

// NewVPC builds the node and the VPC for IPv4 (or IPv6 when v6). When
// strict, the node gets the host rules ipamd installs for strict mode:
// the local table looked up at priority 20 instead of 0 (so the pods'
// priority-10 rules come first), and for IPv6 neighbour discovery from
// the subnet gateway still delivered locally at priority 0.
func NewVPC(t testing.TB, v6, strict bool) *VPC {
	t.Helper()
	v := &VPC{Node: netnsutil.New(t), Net: netnsutil.New(t), V6: v6}
	for _, n := range []ns.NetNS{v.Node, v.Net} {
		netnsutil.SetUp(t, n, "lo")
		netnsutil.Sysctl(t, n, "net/ipv4/ip_forward", "1")
		netnsutil.Sysctl(t, n, "net/ipv6/conf/all/forwarding", "1")
		netnsutil.Sysctl(t, n, "net/ipv4/conf/all/rp_filter", "0")
		netnsutil.Sysctl(t, n, "net/ipv4/conf/default/rp_filter", "0")
	}
	netnsutil.Veth(t, v.Node, PrimaryLink, v.Net, vpcPrimary)
	netnsutil.Veth(t, v.Node, TrunkLink, v.Net, vpcTrunk)
	if v6 {
		netnsutil.AddAddr(t, v.Node, PrimaryLink, NodeIPv6.String()+"/64")
		netnsutil.AddAddr(t, v.Net, vpcPrimary, RouterIPv6.String()+"/64")
		netnsutil.DefaultRoute(t, v.Node, RouterIPv6.String())
	} else {
		netnsutil.AddAddr(t, v.Node, PrimaryLink, NodeIPv4.String()+"/24")
		netnsutil.AddAddr(t, v.Net, vpcPrimary, RouterIPv4.String()+"/24")
		netnsutil.DefaultRoute(t, v.Node, RouterIPv4.String())
	}
	h := netnsutil.Handle(t, v.Node)
	trunk, err := h.LinkByName(TrunkLink)
	if err != nil {
		t.Fatal(err)
	}
	v.TrunkIndex = trunk.Attrs().Index
	if strict {
		strictHostRules(t, v.Node, v6)
		// What the init container does with DISABLE_TCP_EARLY_DEMUX=true,
		// which upstream documents as needed for kubelet probes of
		// strict-mode pods: the node's TCP to such a pod leaves through
		// the VPC, and early demux would tie the pod's reply, passing
		// through the node on its way to the VPC, to the node's socket,
		// so the kernel would drop it instead of forwarding it.
		netnsutil.Sysctl(t, v.Node, "net/ipv4/tcp_early_demux", "0")
	}
	return v
}

// strictHostRules applies ipamd's own host rules for strict mode
// (networkutils, as ipamd's start does): the local table looked up at
// priority 20 instead of 0 and, in IPv6, the VPC router's ICMPv6 kept at
// priority 0.
func strictHostRules(t testing.TB, node ns.NetNS, v6 bool) {
	t.Helper()
	host, err := networkutils.New(networkutils.Config{IPv6: v6, PodENI: true, PodSGStrict: true}, networkutils.WithNetNS(node.Path()))
	if err != nil {
		t.Fatalf("vlantest: ipamd's host rules: %v", err)
	}
	defer host.Close()
	if err := host.SyncLocalTableRules(); err != nil {
		t.Fatalf("vlantest: ipamd's strict-mode local-table rules: %v", err)
	}
}

// Branch is the VPC's end of one branch ENI.
type Branch struct {
	VlanID  int
	MAC     net.HardwareAddr // the branch ENI's
	PodIP   net.IP
	Gateway net.IP
	Link    string // the VPC-side VLAN link
}

// AddBranch makes the VPC end of a branch ENI with the given VLAN, MAC
// and pod address: a VLAN link on the trunk's far end carrying the
// subnet's gateway (gw/24 for IPv4, fe80:ec2::1 for IPv6), and the pod
// address bound to the branch MAC there (a permanent neighbour entry).
func (v *VPC) AddBranch(t testing.TB, vlanID int, mac net.HardwareAddr, podIP, gw net.IP) Branch {
	t.Helper()
	b := Branch{VlanID: vlanID, MAC: mac, PodIP: podIP, Gateway: gw, Link: fmt.Sprintf("br.%d", vlanID)}
	h := netnsutil.Handle(t, v.Net)
	trunk, err := h.LinkByName(vpcTrunk)
	if err != nil {
		t.Fatal(err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = b.Link
	attrs.ParentIndex = trunk.Attrs().Index
	if err := h.LinkAdd(&netlink.Vlan{LinkAttrs: attrs, VlanId: vlanID}); err != nil {
		t.Fatalf("VPC VLAN link %s: %v", b.Link, err)
	}
	netnsutil.SetUp(t, v.Net, b.Link)
	link, err := h.LinkByName(b.Link)
	if err != nil {
		t.Fatal(err)
	}
	if v.V6 {
		netnsutil.AddAddr(t, v.Net, b.Link, gw.String()+"/64")
		dst := &net.IPNet{IP: podIP, Mask: net.CIDRMask(128, 128)}
		if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst}); err != nil {
			t.Fatalf("VPC route %s dev %s: %v", dst, b.Link, err)
		}
	} else {
		netnsutil.AddAddr(t, v.Net, b.Link, gw.String()+"/24")
	}
	neigh := &netlink.Neigh{LinkIndex: link.Attrs().Index, Family: family(podIP), State: netlink.NUD_PERMANENT, IP: podIP, HardwareAddr: mac}
	if err := h.NeighSet(neigh); err != nil {
		t.Fatalf("VPC neighbour %s -> %s: %v", podIP, mac, err)
	}
	return b
}

// RxPackets is how many packets the VPC's end of branch b has received.
func (v *VPC) RxPackets(t testing.TB, b Branch) uint64 {
	t.Helper()
	l, err := netnsutil.Handle(t, v.Net).LinkByName(b.Link)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Statistics.RxPackets
}

// RouteToNode has the VPC route cidr (the node's regular pods) to the
// node's primary ENI.
func (v *VPC) RouteToNode(t testing.TB, cidr string) {
	t.Helper()
	gw := NodeIPv4.String()
	if v.V6 {
		gw = NodeIPv6.String()
	}
	netnsutil.Route(t, v.Net, cidr, gw)
}

// NodeIP is the node's primary address.
func (v *VPC) NodeIP() net.IP {
	if v.V6 {
		return NodeIPv6
	}
	return NodeIPv4
}

func family(ip net.IP) int {
	if ip.To4() != nil {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// Timeout bounds each traffic check: generous, as the VM emulates its CPU
// and IPv6 links finish duplicate address detection first.
const Timeout = 30 * time.Second

// Ping sends echoes from n to dst until one is answered or Timeout passes.
func Ping(from ns.NetNS, dst net.IP) error { return netnsutil.PingWithin(from, dst, Timeout) }

// TCPEcho passes a line over TCP from client to ip in server and back
// (retrying until Timeout): what a kubelet probe or an application needs.
func TCPEcho(server ns.NetNS, ip net.IP, client ns.NetNS) error {
	return netnsutil.TCPEcho(server, ip, client, Timeout)
}

// RouterIP is the VPC router's address on the node's primary subnet, in the
// VPC's family.
func (v *VPC) RouterIP() net.IP {
	if v.V6 {
		return RouterIPv6
	}
	return RouterIPv4
}

// Rules lists node's rules of both families, as strings: a test compares
// them before a pod and after its teardown.
func Rules(t testing.TB, node ns.NetNS) []string {
	t.Helper()
	var out []string
	for _, f := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := netnsutil.Handle(t, node).RuleList(f)
		if err != nil {
			t.Fatalf("vlantest: rules: %v", err)
		}
		for _, r := range rules {
			out = append(out, r.String())
		}
	}
	return out
}

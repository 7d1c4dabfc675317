package nodelinks_test

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/nodelinks"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// testNode is a simulated instance whose ENIs are links in a node
// namespace, the other ends in a VPC namespace; eth0 (a veth into the VPC
// namespace) is the primary ENI's link.
type testNode struct {
	sim       *ec2sim.Sim
	links     *nodelinks.Links
	node, vpc ns.NetNS
}

func newTestNode(t *testing.T) *testNode {
	netnsutil.RequireRoot(t)
	n := &testNode{node: netnsutil.New(t), vpc: netnsutil.New(t)}
	netnsutil.Veth(t, n.node, "eth0", n.vpc, "up0")
	n.sim = ec2simtest.Start(t, ec2sim.Config{})
	var err error
	n.links, err = nodelinks.New(nodelinks.Config{Node: n.node.Path(), VPC: n.vpc.Path(), Primary: "eth0"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.links.Close()) })
	n.sim.SetLinks(n.links)
	return n
}

func handle(t *testing.T, n ns.NetNS) *netlink.Handle {
	t.Helper()
	h, err := netnsutil.HandleAt(n.Path())
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

// linkByMAC is the link in h with mac, or nil.
func linkByMAC(t *testing.T, h *netlink.Handle, mac string) netlink.Link {
	t.Helper()
	links, err := h.LinkList()
	require.NoError(t, err)
	for _, l := range links {
		if l.Attrs().HardwareAddr.String() == mac {
			return l
		}
	}
	return nil
}

// TestENIsAreLinks: the primary ENI's MAC is eth0's, an attached ENI is a
// link named eth<device> with its MAC whose VPC end is up with the
// subnet's router address, and the link goes on detach; the test
// process's own namespace never changes.
func TestENIsAreLinks(t *testing.T) {
	before := hostLinks(t)
	n := newTestNode(t)
	nodeH, vpcH := handle(t, n.node), handle(t, n.vpc)

	primary := n.sim.ENIs()[0]
	eth0, err := nodeH.LinkByName("eth0")
	require.NoError(t, err)
	assert.Equal(t, primary.MAC, eth0.Attrs().HardwareAddr.String(), "eth0 carries the primary ENI's MAC")

	id, err := n.sim.CreateAttachedENI(nil, 2)
	require.NoError(t, err)
	var eni ec2sim.ENIState
	for _, e := range n.sim.ENIs() {
		if e.ID == id {
			eni = e
		}
	}
	require.Equal(t, 1, eni.DeviceIndex)
	link := linkByMAC(t, nodeH, eni.MAC)
	require.NotNil(t, link, "the attached ENI has a link with its MAC")
	assert.Equal(t, "eth1", link.Attrs().Name)
	assert.Equal(t, "veth", link.Type())

	peer, err := vpcH.LinkByName(nodelinks.PeerName(eni.MAC))
	require.NoError(t, err)
	assert.NotZero(t, peer.Attrs().Flags&net.FlagUp, "the VPC end is up")
	addrs, err := vpcH.AddrList(peer, netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, addrs, 1)
	assert.Equal(t, "10.0.0.1/32", addrs[0].IPNet.String(), "the VPC end answers for the subnet's router")

	// What ec2sim calls when the detachment completes.
	n.links.Detached(ec2sim.ENILink{ENIID: id, MAC: eni.MAC, DeviceIndex: 1})
	assert.Nil(t, linkByMAC(t, nodeH, eni.MAC), "the detached ENI's link is gone")
	_, err = vpcH.LinkByName(nodelinks.PeerName(eni.MAC))
	assert.Error(t, err, "its VPC end went with it")
	n.links.Detached(ec2sim.ENILink{ENIID: primary.ID, MAC: primary.MAC})
	_, err = nodeH.LinkByName("eth0")
	assert.NoError(t, err, "the primary link stays")

	require.NoError(t, n.links.Err())
	assert.Equal(t, before, hostLinks(t), "the test process's namespace has the same links")
}

// TestHostNetworkSetsUpSimulatedENI: ipamd's host network code
// (networkutils) finds the simulated ENI's link by MAC and gives it its
// route table and rule, inside the node namespace.
func TestHostNetworkSetsUpSimulatedENI(t *testing.T) {
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables (apt-get install -y iptables): networkutils.New runs it")
	}
	n := newTestNode(t)
	primary := n.sim.ENIs()[0]
	h, err := networkutils.New(networkutils.Config{PrimaryMAC: primary.MAC, PrimaryIP: primary.PrimaryIP,
		VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}},
		networkutils.WithNetNS(n.node.Path()), networkutils.WithLinkRetry(1, 0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, h.SetupHostNetwork(ctx), "the primary ENI's link is found by MAC")

	id, err := n.sim.CreateAttachedENI(nil, 0)
	require.NoError(t, err)
	var eni ec2sim.ENIState
	for _, e := range n.sim.ENIs() {
		if e.ID == id {
			eni = e
		}
	}
	require.NoError(t, h.SetupENINetwork(ctx, networkutils.ENI{MAC: eni.MAC, DeviceNumber: eni.DeviceIndex,
		PrimaryIP: eni.PrimaryIP, SubnetCIDR: netip.MustParsePrefix("10.0.0.0/20")}))

	nodeH := handle(t, n.node)
	link := linkByMAC(t, nodeH, eni.MAC)
	require.NotNil(t, link)
	assert.NotZero(t, link.Attrs().Flags&net.FlagUp, "ipamd set the ENI's link up")
	table := networkutils.RouteTableFor(0, eni.DeviceIndex)
	routes, err := nodeH.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	var dflt bool
	for _, r := range routes {
		if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
			dflt = r.LinkIndex == link.Attrs().Index && r.Gw.String() == "10.0.0.1"
		}
	}
	assert.Truef(t, dflt, "table %d has the default route via 10.0.0.1 on %s: %v", table, link.Attrs().Name, routes)
	rules, err := nodeH.RuleList(unix.AF_INET)
	require.NoError(t, err)
	var rule bool
	for _, r := range rules {
		if r.Src != nil && r.Src.IP.Equal(eni.PrimaryIP.AsSlice()) && r.Table == table {
			rule = true
		}
	}
	assert.Truef(t, rule, "a rule sends %s's traffic to table %d", eni.PrimaryIP, table)
	require.NoError(t, n.links.Err())
}

// hostLinks names the links of the test process's namespace.
func hostLinks(t *testing.T) []string {
	t.Helper()
	links, err := netlink.LinkList()
	require.NoError(t, err)
	var out []string
	for _, l := range links {
		out = append(out, l.Attrs().Name+" "+l.Attrs().HardwareAddr.String())
	}
	return out
}

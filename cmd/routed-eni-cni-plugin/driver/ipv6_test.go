package driver

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// Two IPv6 pods on one node: each gets its /128, a default route via
// fe80::1 and the neighbour entry for it, the node a /128 route and a 512
// rule per pod; the pods reach each other through the node; releasing one
// leaves the node's IPv6 routes and rules as they were before it.
func TestIPv6PodsSetupCheckPingRelease(t *testing.T) {
	netnsutil.RequireRoot(t)
	locks := testLocks(t)
	node, podA, podB := netnsutil.New(t), netnsutil.New(t), netnsutil.New(t)
	netnsutil.SetUp(t, node, "lo")
	netnsutil.Sysctl(t, node, "net/ipv6/conf/all/forwarding", "1")
	// A runtime may create namespaces with IPv6 off; the driver turns it on.
	netnsutil.Sysctl(t, podA, "net/ipv6/conf/default/disable_ipv6", "1")
	before6, err := netnsutil.Handle(t, node).RuleList(netlink.FAMILY_V6)
	require.NoError(t, err)

	ipA, ipB := net.ParseIP("2600:1f14:abc:de01:1234::"), net.ParseIP("2600:1f14:abc:de01:1234::1")
	a := PodNetwork{HostVeth: "enitest6000001", ContainerIf: "eth0", NetnsPath: podA.Path(), IP: ipA, RouteTable: 254, MTU: 9001}
	b := PodNetwork{HostVeth: "enitest6000002", ContainerIf: "eth0", NetnsPath: podB.Path(), IP: ipB, RouteTable: 254, MTU: 9001}
	for _, p := range []PodNetwork{a, b} {
		require.NoError(t, inNode(t, node, func() error { return Setup(p, locks, quiet) }))
		require.NoError(t, inNode(t, node, func() error { return Check(p) }))
	}

	h := netnsutil.Handle(t, podA)
	link, err := h.LinkByName("eth0")
	require.NoError(t, err)
	addrs, err := h.AddrList(link, netlink.FAMILY_V6)
	require.NoError(t, err)
	var global []string
	for _, ad := range addrs {
		if !ad.IP.IsLinkLocalUnicast() {
			global = append(global, ad.IPNet.String())
			assert.Zero(t, ad.Flags&0x40, "not tentative (IFA_F_TENTATIVE)")
		}
	}
	assert.Equal(t, []string{"2600:1f14:abc:de01:1234::/128"}, global)
	neighs, err := h.NeighList(link.Attrs().Index, netlink.FAMILY_V6)
	require.NoError(t, err)
	hostVeth, err := netnsutil.Handle(t, node).LinkByName(a.HostVeth)
	require.NoError(t, err)
	var gwNeigh bool
	for _, n := range neighs {
		if n.IP.Equal(GatewayIPv6) && n.State == netlink.NUD_PERMANENT && n.HardwareAddr.String() == hostVeth.Attrs().HardwareAddr.String() {
			gwNeigh = true
		}
	}
	assert.True(t, gwNeigh, "permanent neighbour fe80::1 -> host veth MAC")

	require.NoError(t, netnsutil.Ping(podA, ipB, 5*time.Second), "pod to pod over IPv6 through the node")
	require.NoError(t, netnsutil.Ping(podB, ipA, 5*time.Second))

	// DEL: each pod's route (through its own veth) and rules go; the veths
	// go with the namespaces.
	for _, c := range []struct {
		p  PodNetwork
		ip net.IP
	}{{a, ipA}, {b, ipB}} {
		var peer int
		require.NoError(t, inNode(t, node, func() (err error) { peer, err = HostPeer(c.p.NetnsPath, "eth0", quiet); return err }))
		require.Positive(t, peer)
		require.NoError(t, inNode(t, node, func() error { return ReleaseHostRouting(c.ip, peer, locks, quiet) }))
	}
	h.Close() // it holds podA's namespace
	netnsutil.Delete(t, podA)
	netnsutil.Delete(t, podB)
	requireNodeEmpty(t, node, ipA, ipB)
	after6, err := netnsutil.Handle(t, node).RuleList(netlink.FAMILY_V6)
	require.NoError(t, err)
	assert.Equal(t, len(before6), len(after6), "the node's IPv6 rules are as before")
	routes, err := netnsutil.Handle(t, node).RouteListFiltered(netlink.FAMILY_V6,
		&netlink.Route{Table: MainTable}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	for _, r := range routes {
		if r.Dst != nil {
			assert.False(t, r.Dst.IP.Equal(ipA) || r.Dst.IP.Equal(ipB), "no route to a released pod address: %s", r.Dst)
		}
	}
}

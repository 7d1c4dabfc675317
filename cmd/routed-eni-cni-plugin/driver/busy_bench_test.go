package driver

import (
	"net"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// BenchmarkReleaseHostRoutingBusyNode is the node side of a DEL on a node
// with 250 other pods (a /32 route and the 512 and 1536 rules each, the
// routes on one dummy link): the cost that grows with the node's pods.
func BenchmarkReleaseHostRoutingBusyNode(b *testing.B) {
	netnsutil.RequireRoot(b)
	locks := testLocks(b)
	node := netnsutil.New(b)
	h := netnsutil.Handle(b, node)
	netnsutil.Veth(b, node, "pods0", netnsutil.New(b), "x0")
	l, err := h.LinkByName("pods0")
	require.NoError(b, err)
	require.NoError(b, h.LinkSetUp(l))
	for i := range 250 {
		ip := net.IPv4(10, 251, byte(i/200), byte(1+i%200)).To4()
		require.NoError(b, h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: hostPrefix(ip), Scope: netlink.SCOPE_LINK}))
		require.NoError(b, h.RuleAdd(ruleTo(ip)))
		require.NoError(b, h.RuleAdd(ruleFrom(ip, 2+i%3)))
	}
	ip := net.IPv4(10, 250, 2, 1).To4()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		require.NoError(b, h.RuleAdd(ruleTo(ip)))
		require.NoError(b, h.RuleAdd(ruleFrom(ip, 3)))
		b.StartTimer()
		var err error
		require.NoError(b, node.Do(func(ns.NetNS) error { err = ReleaseHostRouting(ip, 0, locks, quiet); return nil }))
		require.NoError(b, err)
	}
}

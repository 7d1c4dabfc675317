package driver

import (
	"fmt"
	"net"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// busyNode is a node with 250 other pods: a /32 route (all on one veth)
// and the 512 and 1536 rules each.
func busyNode(b *testing.B) ns.NetNS {
	node := netnsutil.New(b)
	h := netnsutil.Handle(b, node)
	netnsutil.Veth(b, node, "pods0", netnsutil.New(b), "x0")
	l, err := h.LinkByName("pods0")
	require.NoError(b, err)
	require.NoError(b, h.LinkSetUp(l))
	for i := range 250 {
		ip := net.IPv4(10, 251, byte(i/200), byte(1+i%200)).To4()
		require.NoError(b, h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: podrules.HostPrefix(ip), Scope: netlink.SCOPE_LINK}))
		require.NoError(b, h.RuleAdd(ruleTo(ip)))
		require.NoError(b, h.RuleAdd(ruleFrom(ip, 2+i%3)))
	}
	return node
}

// BenchmarkReleaseHostRoutingBusyNode is the node side of a DEL on a
// busyNode: the part of its cost that grows with the node's pods.
func BenchmarkReleaseHostRoutingBusyNode(b *testing.B) {
	netnsutil.RequireRoot(b)
	locks := testLocks(b)
	node := busyNode(b)
	h := netnsutil.Handle(b, node)
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

// BenchmarkSetupBusyNode is Setup (the node and pod side of an ADD) on a
// busyNode, into a new pod namespace each time.
func BenchmarkSetupBusyNode(b *testing.B) {
	netnsutil.RequireRoot(b)
	locks := testLocks(b)
	node := busyNode(b)
	ip := net.IPv4(10, 250, 2, 2).To4()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		pod := netnsutil.New(b)
		// A new name each time: the last pod's veth may still be on its
		// way out with its namespace.
		p := PodNetwork{HostVeth: fmt.Sprintf("enibench%06d", i), ContainerIf: "eth0", NetnsPath: pod.Path(), IP: ip, RouteTable: 3, MTU: 9001}
		b.StartTimer()
		var err error
		require.NoError(b, node.Do(func(ns.NetNS) error { err = Setup(p, locks, quiet); return nil }))
		require.NoError(b, err)
		b.StopTimer()
		require.NoError(b, node.Do(func(ns.NetNS) error {
			peer, err := HostPeer(pod.Path(), "eth0", quiet)
			if err != nil {
				return err
			}
			return ReleaseHostRouting(ip, peer, locks, quiet)
		}))
		netnsutil.Delete(b, pod)
		b.StartTimer()
	}
}

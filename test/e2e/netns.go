package e2e

import (
	"net"
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// NodeNet is the node's network namespace and the "upstream" one its eth0
// leads to (standing in for the VPC router), so the node has a default
// route as a real one does.
type NodeNet struct {
	Node, Upstream ns.NetNS
	// On an IPv6 node (AddIPv6): the node's eth0 address and the
	// upstream's, its IPv6 default gateway.
	IPv6, IPv6Gateway netip.Addr
}

// NewNodeNet creates both namespaces (removed when t ends): eth0 in the node
// carries nodeIP in subnet, the upstream end the subnet's first address,
// which is the node's default gateway. The node forwards, as pods need.
func NewNodeNet(t testing.TB, nodeIP netip.Addr, subnet netip.Prefix) *NodeNet {
	t.Helper()
	n := &NodeNet{Node: netnsutil.New(t), Upstream: netnsutil.New(t)}
	for _, nn := range []ns.NetNS{n.Node, n.Upstream} {
		if err := record(recNetns, nn.Path()); err != nil {
			t.Fatal(err)
		}
	}
	netnsutil.SetUp(t, n.Node, "lo")
	netnsutil.SetUp(t, n.Upstream, "lo")
	netnsutil.Veth(t, n.Node, "eth0", n.Upstream, "up0")
	gw := subnet.Addr().Next()
	netnsutil.AddAddr(t, n.Node, "eth0", netip.PrefixFrom(nodeIP, subnet.Bits()).String())
	netnsutil.AddAddr(t, n.Upstream, "up0", netip.PrefixFrom(gw, subnet.Bits()).String())
	netnsutil.DefaultRoute(t, n.Node, gw.String())
	netnsutil.Sysctl(t, n.Node, "net/ipv4/ip_forward", "1")
	// Loose reverse-path filtering on the primary ENI, as the agent's init
	// container sets it: a reply to a pod whose traffic leaves through a
	// secondary ENI's table comes back through eth0.
	netnsutil.Sysctl(t, n.Node, "net/ipv4/conf/eth0/rp_filter", "2")
	return n
}

// AddIPv6 gives the node's eth0 nodeIP in subnet (a /64) and the upstream
// end the subnet's first address, which becomes the node's IPv6 default
// gateway; the node forwards IPv6 (as the agent's init container sets it).
func (n *NodeNet) AddIPv6(t testing.TB, nodeIP netip.Addr, subnet netip.Prefix) {
	t.Helper()
	gw := subnet.Masked().Addr().Next()
	netnsutil.Sysctl(t, n.Node, "net/ipv6/conf/all/forwarding", "1")
	netnsutil.AddAddr(t, n.Node, "eth0", netip.PrefixFrom(nodeIP, subnet.Bits()).String())
	netnsutil.AddAddr(t, n.Upstream, "up0", netip.PrefixFrom(gw, subnet.Bits()).String())
	netnsutil.DefaultRoute(t, n.Node, gw.String())
	n.IPv6, n.IPv6Gateway = nodeIP, gw
}

// ListenIn opens a TCP listener inside the namespace: the socket belongs to
// that namespace whichever thread later accepts on it, so servers in this
// process can serve programs that run in the node.
func ListenIn(n ns.NetNS, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

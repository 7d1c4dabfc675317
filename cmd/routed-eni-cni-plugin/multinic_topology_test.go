package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// The stand-ins for a multi-NIC pod's world: an ipamd that assigns one
// address per network card, and a node whose cards each lead to their own
// VPC namespace.

// multiNICIPAMD answers AddNetwork with one address per card (allocs) and
// the first DelNetwork with the same addresses released; later ones say
// "unknown pod", as ipamd does. It records the requests.
type multiNICIPAMD struct {
	rpc.UnimplementedCNIBackendServer
	allocs []*rpc.IPAllocationMetadata

	mu       sync.Mutex
	adds     []*rpc.AddNetworkRequest
	dels     []*rpc.DelNetworkRequest
	released bool
}

func (s *multiNICIPAMD) AddNetwork(_ context.Context, r *rpc.AddNetworkRequest) (*rpc.AddNetworkReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.adds = append(s.adds, r)
	s.released = false
	return &rpc.AddNetworkReply{Success: true, IPAllocationMetadata: s.allocs}, nil
}

func (s *multiNICIPAMD) DelNetwork(_ context.Context, r *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dels = append(s.dels, r)
	if s.released {
		return nil, status.Error(codes.Unknown, "datastore: unknown pod")
	}
	s.released = true
	return &rpc.DelNetworkReply{Success: true, IPAllocationMetadata: s.allocs}, nil
}

func (s *multiNICIPAMD) addRequests() []*rpc.AddNetworkRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.adds)
}

func (s *multiNICIPAMD) delReasons() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, d := range s.dels {
		out = append(out, d.Reason)
	}
	return out
}

// card is one network card of the test node: the address ipamd gives the
// pod on it and the route table of its ENI.
type card struct {
	podIP  net.IP
	table  int // RouteTableId: 254 for card 0's primary ENI
	device int
}

// cardsFor are n cards with upstream's tables: card 0 primary ENI (main),
// card c > 0 device 0 (10000 + 100c).
func cardsFor(n int, v6 bool) []card {
	out := make([]card, n)
	for c := range out {
		ip := net.IPv4(10, byte(c), 0, 5).To4()
		if v6 {
			ip = net.ParseIP(fmt.Sprintf("2001:db8:%d::5", c))
		}
		table := 254
		if c > 0 {
			table = 10000 + 100*c
		}
		out[c] = card{podIP: ip, table: table}
	}
	return out
}

// allocations are ipamd's reply entries for the cards, card 0 first.
func allocations(cards []card) []*rpc.IPAllocationMetadata {
	out := make([]*rpc.IPAllocationMetadata, len(cards))
	for i, c := range cards {
		md := &rpc.IPAllocationMetadata{DeviceNumber: int32(c.device), RouteTableId: int32(c.table)}
		if c.podIP.To4() != nil {
			md.IPv4Addr = c.podIP.String()
		} else {
			md.IPv6Addr = c.podIP.String()
		}
		out[i] = md
	}
	return out
}

// multiNICNode is a node namespace with one uplink per card, link
// "card<c>", into its own VPC namespace. The node routes traffic from the
// card's pod address out of that card (its ENI table has a default route
// through the card's VPC, as ipamd sets up), and drops (IPv4 strict
// reverse-path filter) a pod address arriving on the wrong host veth.
// Every VPC namespace holds the same service address, and routes back only
// the pod address of its own card.
type multiNICNode struct {
	node    ns.NetNS
	vpcs    []ns.NetNS
	service net.IP
	v6      bool
}

func newMultiNICNode(t *testing.T, cards []card, v6 bool) *multiNICNode {
	t.Helper()
	netnsutil.RequireRoot(t)
	m := &multiNICNode{node: netnsutil.New(t), v6: v6, service: net.IPv4(172, 16, 0, 1).To4()}
	if v6 {
		m.service = net.ParseIP("fd00:5::1")
	}
	netnsutil.SetUp(t, m.node, "lo")
	if v6 {
		netnsutil.Sysctl(t, m.node, "net/ipv6/conf/all/forwarding", "1")
	} else {
		netnsutil.Sysctl(t, m.node, "net/ipv4/ip_forward", "1")
		netnsutil.Sysctl(t, m.node, "net/ipv4/conf/all/rp_filter", "1")
	}
	nh := netnsutil.Handle(t, m.node)
	for c, cd := range cards {
		vpc := netnsutil.New(t)
		m.vpcs = append(m.vpcs, vpc)
		netnsutil.SetUp(t, vpc, "lo")
		link := "card" + strconv.Itoa(c)
		netnsutil.Veth(t, m.node, link, vpc, "eth0")
		nodeAddr, vpcAddr, plen, host := fmt.Sprintf("192.168.%d.1", 100+c), fmt.Sprintf("192.168.%d.2", 100+c), "/24", "/32"
		if v6 {
			nodeAddr, vpcAddr, plen, host = fmt.Sprintf("fd00:%d::1", 100+c), fmt.Sprintf("fd00:%d::2", 100+c), "/64", "/128"
		}
		netnsutil.AddAddr(t, m.node, link, nodeAddr+plen)
		netnsutil.AddAddr(t, vpc, "eth0", vpcAddr+plen)
		netnsutil.AddAddr(t, vpc, "lo", m.service.String()+host)
		netnsutil.Route(t, vpc, cd.podIP.String()+host, nodeAddr)
		l, err := nh.LinkByName(link)
		require.NoError(t, err)
		def := &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		if v6 {
			def = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		require.NoError(t, nh.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: def, Gw: net.ParseIP(vpcAddr), Table: cd.table}),
			"default route of card %d's ENI table %d", c, cd.table)
	}
	return m
}

// podLinkIndex is the ifindex of the pod's interface name.
func podLinkIndex(t *testing.T, podNs ns.NetNS, name string) int {
	t.Helper()
	h, err := netnsutil.HandleAt(podNs.Path())
	require.NoError(t, err)
	defer h.Close()
	l, err := h.LinkByName(name)
	require.NoError(t, err, "pod interface %s", name)
	return l.Attrs().Index
}

// requireTalksThroughEachCard checks the pod's traffic per interface: the
// pod's own routing sends a packet from the address of interface i out of
// interface i, and a ping from that address reaches the service through
// card i's VPC (the only one routing that address back), for every i.
func (m *multiNICNode) requireTalksThroughEachCard(t *testing.T, podNs ns.NetNS, cards []card) {
	t.Helper()
	h, err := netnsutil.HandleAt(podNs.Path())
	require.NoError(t, err)
	defer h.Close()
	for i, c := range cards {
		name := containerIfName("eth0", i)
		routes, err := h.RouteGetWithOptions(m.service, &netlink.RouteGetOptions{SrcAddr: c.podIP})
		require.NoError(t, err, "route from %s in the pod", c.podIP)
		require.NotEmpty(t, routes)
		assert.Equal(t, podLinkIndex(t, podNs, name), routes[0].LinkIndex, "the pod sends from %s out of %s", c.podIP, name)
		require.NoError(t, netnsutil.PingFrom(podNs, c.podIP, m.service, 10*time.Second),
			"ping from %s (interface %s) through card %d's VPC", c.podIP, name, i)
	}
	// Without a source: interface 0.
	require.NoError(t, netnsutil.Ping(podNs, m.service, 10*time.Second), "ping with the kernel's choice of source")
}

// requireNodeHasNoPodState checks that no route to and no 512/1536 rule
// for any of the pod addresses is left on the node, and (once the
// namespace is gone) no host veth.
func (m *multiNICNode) requireNodeHasNoPodState(t *testing.T, cards []card, linksToo bool) {
	t.Helper()
	h := netnsutil.Handle(t, m.node)
	family := netlink.FAMILY_V4
	if m.v6 {
		family = netlink.FAMILY_V6
	}
	rules, err := h.RuleList(family)
	require.NoError(t, err)
	for _, r := range rules {
		if r.Priority == 512 || r.Priority == 1536 {
			t.Errorf("rule left on the node: %s", r)
		}
	}
	for _, c := range cards {
		routes, err := h.RouteListFiltered(family, &netlink.Route{Dst: hostPrefixOf(c.podIP), Table: 254},
			netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
		require.NoError(t, err)
		assert.Empty(t, routes, "node route to %s", c.podIP)
	}
	if !linksToo {
		return
	}
	require.Eventually(t, func() bool {
		names, err := netnsutil.LinkNames(m.node)
		if err != nil {
			return false
		}
		for _, n := range names {
			if n != "lo" && !slices.Contains(m.uplinks(), n) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "host veths gone with the pod's namespace")
}

func (m *multiNICNode) uplinks() []string {
	var out []string
	for c := range m.vpcs {
		out = append(out, "card"+strconv.Itoa(c))
	}
	return out
}

func hostPrefixOf(ip net.IP) *net.IPNet {
	n := hostNet(ip)
	return &n
}

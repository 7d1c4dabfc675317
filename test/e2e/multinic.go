package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/nodelinks"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// A multi-NIC pod (ENABLE_MULTI_NIC): the pod annotation that asks for one
// interface per managed network card, and the names aws-cni gives the
// interfaces after the first (CNI_IFNAME, eth0): mNicIf1, mNicIf2, ...
const (
	MultiNICAnnotation = "k8s.amazonaws.com/nicConfig"
	MultiNICValue      = "multi-nic-attachment"
	multiNICIfPrefix   = "mNicIf"
)

// MultiNICIfName is the pod's interface for network card index i of its
// cards (eth0 for the first).
func MultiNICIfName(i int) string {
	if i == 0 {
		return "eth0"
	}
	return fmt.Sprintf("%s%d", multiNICIfPrefix, i)
}

// RunMultiNICPod creates a pod annotated for one interface per network
// card, failing t on error. Pod.IP is its eth0 address (what the runtime
// reports); PodAddrs reads the others.
func (n *Node) RunMultiNICPod(t testing.TB, name string) *Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := n.RunPodAnnotated(ctx, name, map[string]string{MultiNICAnnotation: MultiNICValue})
	if err != nil {
		t.Fatalf("RunPodSandbox %s (multi-NIC): %v", name, err)
	}
	return p
}

// PodAddrs are the IPv4 addresses of the pod's interfaces inside its
// network namespace, by interface name (lo left out).
func (n *Node) PodAddrs(p *Pod) (map[string][]netip.Addr, error) {
	h, err := netnsutil.HandleAt(p.Netns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, err
	}
	out := map[string][]netip.Addr{}
	for _, l := range links {
		if l.Attrs().Name == "lo" {
			continue
		}
		addrs, err := h.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return nil, err
		}
		out[l.Attrs().Name] = nil
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok {
				out[l.Attrs().Name] = append(out[l.Attrs().Name], ip.Unmap())
			}
		}
	}
	return out, nil
}

// ENIHolding is the attached ENI (as EC2 records it) whose secondary
// addresses include ip: its ID, network card and node link name.
type ENIHolding struct {
	ID, MAC   string
	Card      int
	Device    int
	PrimaryIP netip.Addr
	Link      string // the node's link (pkg/sim/nodelinks names)
	VPCEnd    string // the link's other end in the upstream namespace
}

// ENIHolding finds the ENI carrying ip in EC2.
func (n *Node) ENIHolding(ip netip.Addr) (ENIHolding, bool) {
	for _, e := range n.Sim.ENIs() {
		if !e.Attached || e.DeviceIndex < 0 {
			continue
		}
		for _, s := range e.SecondaryIPs {
			if s != ip {
				continue
			}
			h := ENIHolding{ID: e.ID, MAC: e.MAC, Card: e.NetworkCardIndex, Device: e.DeviceIndex, PrimaryIP: e.PrimaryIP,
				VPCEnd: nodelinks.PeerName(e.MAC)}
			if e.NetworkCardIndex == 0 && e.DeviceIndex == 0 {
				h.Link, h.VPCEnd = "eth0", "up0"
			} else {
				h.Link = fmt.Sprintf("eth%d", e.DeviceIndex)
				if e.NetworkCardIndex > 0 {
					h.Link = fmt.Sprintf("eth%d-%d", e.NetworkCardIndex, e.DeviceIndex)
				}
			}
			return h, true
		}
	}
	return ENIHolding{}, false
}

// vpcRouter is the node subnet's router: the upstream namespace's address
// on every ENI's VPC end.
func vpcRouter() netip.Addr { return netip.MustParsePrefix(nodeSubnet).Addr().Next() }

// RouteBackThroughENI makes the upstream (the VPC) send traffic for ip
// back through the ENI that carries it, as the VPC delivers an address to
// its ENI: through that ENI's link, to the ENI's primary address.
func (n *Node) RouteBackThroughENI(t testing.TB, ip netip.Addr) ENIHolding {
	t.Helper()
	eni, ok := n.ENIHolding(ip)
	if !ok {
		t.Fatalf("no attached ENI carries %s in EC2", ip)
	}
	h, err := netnsutil.HandleAt(n.Net.Upstream.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(eni.VPCEnd)
	if err != nil {
		t.Fatalf("VPC end %s of %s: %v", eni.VPCEnd, eni.ID, err)
	}
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)},
		Gw: eni.PrimaryIP.AsSlice(), Flags: int(netlink.FLAG_ONLINK)}
	if err := h.RouteReplace(r); err != nil {
		t.Fatalf("upstream route %s via %s dev %s: %v", ip, eni.PrimaryIP, eni.VPCEnd, err)
	}
	return eni
}

// vpcEndRx is the number of packets the VPC end of an ENI's link has
// received (what the node sent out of that ENI).
func (n *Node) vpcEndRx(name string) (uint64, error) {
	h, err := netnsutil.HandleAt(n.Net.Upstream.Path())
	if err != nil {
		return 0, err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return 0, err
	}
	if l.Attrs().Statistics == nil {
		return 0, errors.New("no link statistics")
	}
	return l.Attrs().Statistics.RxPackets, nil
}

// PingVPCFrom pings the VPC router from the pod's address src and checks
// the way the echo went: the node's routing sends it out of the link of
// the ENI that carries src (its card's), whose VPC end received it, and
// the reply came back (the upstream routes src back through that ENI,
// RouteBackThroughENI).
func (n *Node) PingVPCFrom(t testing.TB, p *Pod, src netip.Addr) error {
	t.Helper()
	eni := n.RouteBackThroughENI(t, src)
	// The node's decision for the pod's packet, entering on its host veth.
	hostVeth, err := n.hostVethOf(src)
	if err != nil {
		return err
	}
	nh, err := netnsutil.HandleAt(n.Net.Node.Path())
	if err != nil {
		return err
	}
	defer nh.Close()
	routes, err := nh.RouteGetWithOptions(vpcRouter().AsSlice(), &netlink.RouteGetOptions{SrcAddr: src.AsSlice(), Iif: hostVeth})
	if err != nil {
		return fmt.Errorf("node route for %s -> %s from %s: %w", src, vpcRouter(), hostVeth, err)
	}
	out, err := nh.LinkByName(eni.Link)
	if err != nil {
		return fmt.Errorf("node link %s of %s (card %d): %w", eni.Link, eni.ID, eni.Card, err)
	}
	if len(routes) == 0 || routes[0].LinkIndex != out.Attrs().Index {
		return fmt.Errorf("the node routes %s's traffic to %s out of %v, not %s (%s, card %d device %d)",
			src, vpcRouter(), routes, eni.Link, eni.ID, eni.Card, eni.Device)
	}
	before, err := n.vpcEndRx(eni.VPCEnd)
	if err != nil {
		return err
	}
	pns, err := ns.GetNS(p.Netns)
	if err != nil {
		return err
	}
	defer pns.Close()
	if err := netnsutil.PingFrom(pns, src.AsSlice(), vpcRouter().AsSlice(), 5*time.Second); err != nil {
		return fmt.Errorf("ping %s from %s (pod %s, %s card %d): %w", vpcRouter(), src, p.Name, eni.ID, eni.Card, err)
	}
	after, err := n.vpcEndRx(eni.VPCEnd)
	if err != nil {
		return err
	}
	if after <= before {
		return fmt.Errorf("the echo from %s did not leave through %s (%s's VPC end %s received nothing)", src, eni.Link, eni.ID, eni.VPCEnd)
	}
	return nil
}

// hostVethOf is the node's link that its main table routes ip to (the
// pod interface's host end).
func (n *Node) hostVethOf(ip netip.Addr) (string, error) {
	h, err := netnsutil.HandleAt(n.Net.Node.Path())
	if err != nil {
		return "", err
	}
	defer h.Close()
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4,
		&netlink.Route{Dst: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return "", err
	}
	if len(routes) == 0 {
		return "", fmt.Errorf("the node has no route to pod address %s", ip)
	}
	l, err := h.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return "", err
	}
	return l.Attrs().Name, nil
}

// RouteTable is the node's route table of the ENI's link (eniTable).
func (e ENIHolding) RouteTable() int { return eniTable(e.Card, e.Device) }

// eniTable is the route table of the ENI at device on network card card,
// as the agent numbers them (upstream's): main for card 0's primary ENI,
// device+1 for card 0's others, 10000+device+100*card beyond card 0.
func eniTable(card, device int) int {
	switch {
	case card > 0:
		return 10000 + device + 100*card
	case device == 0:
		return unix.RT_TABLE_MAIN
	default:
		return device + 1
	}
}

// NodeRulesFor are the node's IPv4 policy rules naming ip as their source
// or destination (a pod's "to" rule at 512, "from" rule at 1536), as
// "priority from/to table" text.
func (n *Node) NodeRulesFor(ip netip.Addr) ([]string, error) {
	h, err := netnsutil.HandleAt(n.Net.Node.Path())
	if err != nil {
		return nil, err
	}
	defer h.Close()
	rules, err := h.RuleList(unix.AF_INET)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rules {
		if r.Src != nil && r.Src.IP.Equal(ip.AsSlice()) {
			out = append(out, fmt.Sprintf("%d from %s table %d", r.Priority, ip, r.Table))
		}
		if r.Dst != nil && r.Dst.IP.Equal(ip.AsSlice()) {
			out = append(out, fmt.Sprintf("%d to %s table %d", r.Priority, ip, r.Table))
		}
	}
	return out, nil
}

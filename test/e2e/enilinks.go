package e2e

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// CheckENILinks verifies, inside the node's namespace, what the agent
// (host networking on) made of every attached secondary ENI that carries
// addresses for pods, given the link the simulator made for it: the link
// with the ENI's MAC is up with the ENI's primary address, the ENI's table
// (device+1 on card 0, 10000+device+100*card beyond: eniTable) routes by
// default via the subnet's router on that link, and a rule sends the
// primary address's traffic to that table. It returns how many ENIs it
// checked. The primary ENI is eth0.
func (n *Node) CheckENILinks() (int, error) {
	h, err := netnsutil.HandleAt(n.Net.Node.Path())
	if err != nil {
		return 0, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return 0, err
	}
	rules, err := h.RuleList(unix.AF_INET)
	if err != nil {
		return 0, err
	}
	checked := 0
	for _, e := range n.Sim.ENIs() {
		if !e.Attached || e.AttachmentStatus != "attached" {
			continue
		}
		var link netlink.Link
		for _, l := range links {
			if l.Attrs().HardwareAddr.String() == e.MAC {
				link = l
			}
		}
		if link == nil {
			return checked, fmt.Errorf("no link with %s's MAC %s in the node", e.ID, e.MAC)
		}
		name := link.Attrs().Name
		if e.DeviceIndex == 0 && e.NetworkCardIndex == 0 {
			if name != "eth0" {
				return checked, fmt.Errorf("the primary ENI's MAC is on %s, not eth0", name)
			}
			continue
		}
		if len(e.SecondaryIPs) == 0 && len(e.Prefixes) == 0 {
			continue // not (yet) the agent's to set up
		}
		if link.Attrs().Flags&net.FlagUp == 0 {
			return checked, fmt.Errorf("%s (%s) is down", name, e.ID)
		}
		addrs, err := h.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			return checked, err
		}
		var subnet netip.Prefix
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == e.PrimaryIP {
				ones, _ := a.Mask.Size()
				subnet = netip.PrefixFrom(e.PrimaryIP, ones).Masked()
			}
		}
		if !subnet.IsValid() {
			return checked, fmt.Errorf("%s (%s) does not carry its primary address %s: %v", name, e.ID, e.PrimaryIP, addrs)
		}
		table, gw := eniTable(e.NetworkCardIndex, e.DeviceIndex), subnet.Addr().Next()
		routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return checked, err
		}
		viaGW := false
		for _, r := range routes {
			isDefault := r.Dst == nil || r.Dst.String() == "0.0.0.0/0"
			if isDefault && r.LinkIndex == link.Attrs().Index && r.Gw.Equal(gw.AsSlice()) {
				viaGW = true
			}
		}
		if !viaGW {
			return checked, fmt.Errorf("table %d has no default route via %s on %s (%s): %v", table, gw, name, e.ID, routes)
		}
		ruled := false
		for _, r := range rules {
			if r.Src != nil && r.Src.IP.Equal(e.PrimaryIP.AsSlice()) && r.Table == table {
				ruled = true
			}
		}
		if !ruled {
			return checked, fmt.Errorf("no rule from %s (%s's primary address) to table %d", e.PrimaryIP, e.ID, table)
		}
		checked++
	}
	return checked, nil
}

package driver

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// createVLANLink makes the node's link for a branch ENI: an 802.1Q link
// named name on the trunk ENI (ifindex trunk) with VLAN id vlanID and the
// branch ENI's MAC, IPv6 router advertisements off, up. A link of that
// name left by an earlier pod of the VLAN is deleted first.
func createVLANLink(host handle, name string, trunk, vlanID int, mac net.HardwareAddr) (netlink.Link, error) {
	if err := deleteLinkByName(host, name); err != nil {
		return nil, fmt.Errorf("delete stale %s: %w", name, err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	attrs.ParentIndex = trunk
	attrs.HardwareAddr = mac
	if err := host.LinkAdd(&netlink.Vlan{LinkAttrs: attrs, VlanId: vlanID}); err != nil {
		return nil, fmt.Errorf("create %s (vlan %d on ifindex %d, mac %s): %w", name, vlanID, trunk, mac, err)
	}
	link, err := host.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", name, err)
	}
	if err := setLinkIPv6Sysctls(name); err != nil {
		return nil, err
	}
	if err := host.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("set %s up: %w", name, err)
	}
	return link, nil
}

package networkutils

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ENI describes a secondary ENI as ipamd knows it: any ENI but network
// card 0's primary (device 0).
type ENI struct {
	MAC string
	// NetworkCard is the card the ENI is attached on; DeviceNumber its
	// device index on that card (> 0 on card 0, any on the others: device
	// indexes are per card).
	NetworkCard  int
	DeviceNumber int
	PrimaryIP    netip.Addr   // IPv4, or IPv6 for an ENI of an IPv6 node
	SubnetCIDR   netip.Prefix // the ENI's subnet, of PrimaryIP's family
	// Trunk is the trunk ENI of security groups for pods: set up like any
	// secondary ENI but without the priority-32765 rule from its primary
	// IP (branch pods' traffic is routed by the plugin's VLAN rules).
	Trunk bool
}

// ENIIPv6Gateway is the VPC router's address on every ENI for IPv6 (EC2's
// fixed link-local gateway).
var ENIIPv6Gateway = netip.MustParseAddr("fe80:ec2::1")

// SetupENINetwork configures a secondary ENI: MTU, link up, its primary
// IP as the only global address of its family, its table (RouteTableFor)
// with
// `<gw>/32 dev ethX scope link` and `default via <gw> dev ethX` (gw =
// subnet network address + 1; for IPv6 `fe80:ec2::1/128 dev ethX` and
// `default via fe80:ec2::1 dev ethX`), no subnet route for it in main, and
// the rule `from <primary IP> lookup <table>` at priority 32765 in the
// primary IP's family (not for a trunk ENI). On a card above 0, a rule
// from the primary IP to that table already there at any priority (the
// one amazon-ec2-net-utils installs) is used as it is: ours is not added.
func (h *Host) SetupENINetwork(ctx context.Context, eni ENI) error {
	if err := eni.validate(); err != nil {
		return fmt.Errorf("setup ENI %s: %w", eni.MAC, err)
	}
	link, err := h.linkByMAC(ctx, eni.MAC)
	if err != nil {
		return fmt.Errorf("setup ENI %s: %w", eni.MAC, err)
	}
	name := link.Attrs().Name
	table := RouteTableFor(eni.NetworkCard, eni.DeviceNumber)
	subnet := eni.SubnetCIDR.Masked()
	gw := subnet.Addr().Next()
	if subnet.Addr().Is6() {
		gw = ENIIPv6Gateway
	}

	steps := []struct {
		what string
		do   func() error
	}{
		{"MTU", func() error { return h.setMTU(link, h.cfg.MTU) }},
		{"link up", func() error { return h.nl.LinkSetUp(link) }},
		{"address", func() error { return h.syncENIAddress(link, netip.PrefixFrom(eni.PrimaryIP, subnet.Bits())) }},
		{fmt.Sprintf("routes in table %d", table), func() error { return h.syncENIRoutes(link, table, gw) }},
		{"subnet route in main", func() error { return h.deleteMainSubnetRoute(link, subnet) }},
	}
	if !eni.Trunk {
		steps = append(steps, struct {
			what string
			do   func() error
		}{"rule", func() error { return h.ensureENIRule(eni, table) }})
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("setup ENI %s (%s): %w", eni.MAC, name, err)
		}
		if err := s.do(); err != nil {
			return fmt.Errorf("setup ENI %s (%s): %s: %w", eni.MAC, name, s.what, err)
		}
	}
	return nil
}

// TeardownENINetwork deletes every rule whose source is exactly the ENI's
// primary IP, in that IP's family (called when the ENI is freed), but a
// rule ipamd reused and never added: one to a table of a card above 0 at a
// priority other than 32765 (see ensureENIRule).
func (h *Host) TeardownENINetwork(ctx context.Context, primaryIP netip.Addr) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !primaryIP.IsValid() || primaryIP.Is4In6() || primaryIP.Zone() != "" {
		return fmt.Errorf("teardown ENI: %v is not an ENI's primary IP", primaryIP)
	}
	return h.deleteRulesFrom(primaryIP)
}

func (e ENI) validate() error {
	switch {
	case e.NetworkCard < 0:
		return fmt.Errorf("network card %d: cards start at 0", e.NetworkCard)
	case e.NetworkCard == 0 && e.DeviceNumber < 1:
		return fmt.Errorf("device number %d: secondary ENIs of card 0 start at 1", e.DeviceNumber)
	case e.DeviceNumber < 0:
		return fmt.Errorf("device number %d: device indexes start at 0", e.DeviceNumber)
	}
	ip, subnet := e.PrimaryIP, e.SubnetCIDR
	switch {
	case ip.Is4():
		if !subnet.IsValid() || !subnet.Addr().Is4() || subnet.Bits() > 30 {
			return fmt.Errorf("subnet %v is not an IPv4 subnet with room for a gateway", subnet)
		}
	case ip.Is6() && !ip.Is4In6() && ip.Zone() == "" && ip.IsGlobalUnicast():
		if !subnet.IsValid() || !subnet.Addr().Is6() {
			return fmt.Errorf("subnet %v is not an IPv6 subnet", subnet)
		}
	default:
		return fmt.Errorf("primary IP %v is neither IPv4 nor a global IPv6 unicast address", ip)
	}
	if !subnet.Contains(ip) {
		return fmt.Errorf("primary IP %v is outside subnet %v", ip, subnet)
	}
	return nil
}

// syncENIAddress leaves want as the link's only global address of its
// family (link-local IPv6 addresses are not global and stay).
func (h *Host) syncENIAddress(link netlink.Link, want netip.Prefix) error {
	addrs, err := h.nl.AddrList(link, netlinkFamily(want.Addr()))
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	have := false
	for _, a := range addrs {
		if a.Scope != unix.RT_SCOPE_UNIVERSE {
			continue
		}
		if p, ok := prefixOf(a.IPNet); ok && p == want && !have {
			have = true
			continue
		}
		if err := h.nl.AddrDel(link, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("delete address %s: %w", a.IPNet, err)
		}
	}
	if have {
		return nil
	}
	if err := h.nl.AddrAdd(link, &netlink.Addr{IPNet: ipNet(want)}); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add address %s: %w", want, err)
	}
	return nil
}

// syncENIRoutes leaves table holding exactly the gateway's link route and
// the default route via it, both on link, in gw's family.
func (h *Host) syncENIRoutes(link netlink.Link, table int, gw netip.Addr) error {
	idx := link.Attrs().Index
	// The kernel keeps no scope on IPv6 routes (it lists them all as
	// universe), so the IPv6 gateway route is written as it reads back.
	gwScope, unspec := netlink.SCOPE_LINK, netip.IPv4Unspecified()
	if gw.Is6() {
		gwScope, unspec = netlink.SCOPE_UNIVERSE, netip.IPv6Unspecified()
	}
	gwRoute := &netlink.Route{LinkIndex: idx, Dst: ipNet(netip.PrefixFrom(gw, gw.BitLen())), Scope: gwScope, Table: table}
	defRoute := &netlink.Route{LinkIndex: idx, Dst: ipNet(netip.PrefixFrom(unspec, 0)), Gw: gw.AsSlice(), Table: table}
	wanted := []*netlink.Route{gwRoute, defRoute}

	listed, err := h.routes(netlinkFamily(gw), &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return err
	}
	kept := make([]bool, len(wanted))
	var stale []netlink.Route
	for _, r := range listed {
		if i := slices.IndexFunc(wanted, func(w *netlink.Route) bool { return sameRoute(r, w) }); i >= 0 && !kept[i] {
			kept[i] = true
			continue
		}
		stale = append(stale, r)
	}
	// Add (replace) first: the gateway route must exist before the default
	// route that uses it, and a replaced default drops out of stale.
	for i, w := range wanted {
		if kept[i] {
			continue
		}
		if err := h.nl.RouteReplace(w); err != nil {
			return fmt.Errorf("replace route %s: %w", w, err)
		}
	}
	for _, r := range stale {
		if err := h.nl.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("delete stale route %s: %w", r, err)
		}
	}
	return nil
}

// deleteMainSubnetRoute removes the kernel's prefix route for subnet on
// link from the main table, so the subnet is reached through the ENI
// table only.
func (h *Host) deleteMainSubnetRoute(link netlink.Link, subnet netip.Prefix) error {
	filter := &netlink.Route{Table: mainTable, LinkIndex: link.Attrs().Index, Dst: ipNet(subnet)}
	routes, err := h.routes(netlinkFamily(subnet.Addr()), filter, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF|netlink.RT_FILTER_DST)
	if err != nil {
		return err
	}
	for _, r := range routes {
		if err := h.nl.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("delete route %s: %w", r, err)
		}
	}
	return nil
}

// routes lists the routes of family, retrying a dump interrupted by a
// change.
func (h *Host) routes(family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	var err error
	for range 5 {
		var rs []netlink.Route
		rs, err = h.nl.RouteListFiltered(family, filter, mask)
		if err == nil {
			return rs, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return nil, fmt.Errorf("list routes: %w", err)
}

// sameRoute compares a listed route with one we would write.
func sameRoute(r netlink.Route, w *netlink.Route) bool {
	gwEq := (len(r.Gw) == 0 && len(w.Gw) == 0) || net.IP(r.Gw).Equal(w.Gw)
	return r.LinkIndex == w.LinkIndex && r.Table == w.Table && r.Scope == w.Scope &&
		netEq(r.Dst, w.Dst) && gwEq && len(r.MultiPath) == 0 &&
		(r.Type == 0 || r.Type == unix.RTN_UNICAST)
}

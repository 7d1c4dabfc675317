package main

import (
	"fmt"
	"net"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"
)

const (
	// dadTimeout bounds the wait for the pod's egress address to leave
	// the tentative state.
	dadTimeout = 10 * time.Second
	// linkLocalTimeout bounds the wait for the host end's link-local
	// address, the pod's IPv6 gateway.
	linkLocalTimeout = 5 * time.Second
)

// setupV6 builds IPv6 egress for a pod of an IPv4 cluster:
//
//	pod:  IPv6 off on the pod's main interface (CNI_IFNAME), v6if0 with
//	      the IPAM address (fd00::ac:x/118), DAD waited for, and the IPAM
//	      routes (::/0) via the host end's link-local address;
//	host: a route "<ip>/128 dev <host end>" (scope host, as upstream).
func setupV6(netns ns.NetNS, podIfName string, ipc *current.IPConfig, routes []*types.Route, mtu int) (hostIf, contIf net.Interface, err error) {
	var contIndex int
	err = netns.Do(func(hostNS ns.NetNS) error {
		// The pod's IPv6 traffic must leave through v6if0 only.
		if podIfName != "" {
			if _, err := sysctl.Sysctl(fmt.Sprintf("net/ipv6/conf/%s/disable_ipv6", podIfName), "1"); err != nil {
				return fmt.Errorf("turn IPv6 off on %s: %w", podIfName, err)
			}
		}
		var err error
		hostIf, contIf, err = ip.SetupVeth(v6IfName, mtu, "", hostNS)
		if err != nil {
			return fmt.Errorf("create %s: %w", v6IfName, err)
		}
		for _, name := range []string{"lo", v6IfName} {
			if _, err := sysctl.Sysctl(fmt.Sprintf("net/ipv6/conf/%s/disable_ipv6", name), "0"); err != nil {
				return fmt.Errorf("turn IPv6 on on %s: %w", name, err)
			}
		}
		link, err := netlinksafe.LinkByName(v6IfName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", v6IfName, err)
		}
		contIndex = link.Attrs().Index
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: &ipc.Address}); err != nil {
			return fmt.Errorf("address %s on %s: %w", ipc.Address.String(), v6IfName, err)
		}
		if err := ip.SettleAddresses(v6IfName, dadTimeout); err != nil {
			return fmt.Errorf("%s: %w", v6IfName, err)
		}
		return nil
	})
	if err != nil {
		return hostIf, contIf, err
	}

	host, err := netlinksafe.LinkByName(hostIf.Name)
	if err != nil {
		return hostIf, contIf, fmt.Errorf("host end %s: %w", hostIf.Name, err)
	}
	gw, err := linkLocal(host, linkLocalTimeout)
	if err != nil {
		return hostIf, contIf, err
	}
	hostRoute := &netlink.Route{LinkIndex: host.Attrs().Index, Dst: &net.IPNet{IP: ipc.Address.IP, Mask: net.CIDRMask(128, 128)}, Scope: netlink.SCOPE_HOST}
	if err := addRouteRetrying(hostRoute); err != nil {
		return hostIf, contIf, fmt.Errorf("host route to %s via %s: %w", ipc.Address.IP, hostIf.Name, err)
	}
	err = netns.Do(func(ns.NetNS) error { return addIPAMRoutes(contIndex, routes, gw, true) })
	return hostIf, contIf, err
}

// linkLocal waits for link's IPv6 link-local address, which the kernel
// adds when the link comes up.
func linkLocal(link netlink.Link, timeout time.Duration) (net.IP, error) {
	deadline := time.Now().Add(timeout)
	for {
		addrs, err := netlinksafe.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", link.Attrs().Name, err)
		}
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() {
				return a.IP, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s has no IPv6 link-local address after %s (IPv6 disabled on the node?)", link.Attrs().Name, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package main

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Upstream retries the host route when the kernel still holds one for the
// same address (a pod just deleted whose veth is going away).
const (
	hostRouteAttempts = 5
	hostRouteWait     = 100 * time.Millisecond
)

// setupV4 builds IPv4 egress for a pod of an IPv6 cluster:
//
//	pod:  v4if0 with <ip>/<ipam prefix> (169.254.172.x/22), the kernel's
//	      prefix route replaced by "gw/32 scope link src ip" and
//	      "subnet via gw src ip", then the IPAM routes (0.0.0.0/0) via gw;
//	host: the veth's other end (random name) with gw/32 scope link and a
//	      route "<ip>/32 dev <host end> scope link".
func setupV4(netns ns.NetNS, ipc *current.IPConfig, routes []*types.Route, mtu int) (hostIf, contIf net.Interface, err error) {
	podIP := ipc.Address.IP.To4()
	gw := ipc.Gateway.To4()
	if gw == nil {
		return hostIf, contIf, fmt.Errorf("IPAM gave %s no IPv4 gateway", ipc.Address.String())
	}
	err = netns.Do(func(hostNS ns.NetNS) error {
		var err error
		hostIf, contIf, err = ip.SetupVeth(v4IfName, mtu, "", hostNS)
		if err != nil {
			return fmt.Errorf("create %s: %w", v4IfName, err)
		}
		link, err := netlinksafe.LinkByName(v4IfName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", v4IfName, err)
		}
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: &ipc.Address}); err != nil {
			return fmt.Errorf("address %s on %s: %w", ipc.Address.String(), v4IfName, err)
		}
		subnet := ip.Network(&ipc.Address)
		// The kernel's route for the prefix goes: the pod reaches the
		// range only through the gateway.
		if err := netlink.RouteDel(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: subnet, Scope: netlink.SCOPE_LINK, Table: unix.RT_TABLE_MAIN}); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("remove the prefix route %s: %w", subnet, err)
		}
		idx := link.Attrs().Index
		for _, r := range []*netlink.Route{
			{LinkIndex: idx, Dst: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK, Src: podIP},
			{LinkIndex: idx, Dst: subnet, Gw: gw, Src: podIP, Scope: netlink.SCOPE_UNIVERSE},
		} {
			if err := netlink.RouteAdd(r); err != nil {
				return fmt.Errorf("route %s in the pod: %w", r, err)
			}
		}
		return addIPAMRoutes(idx, routes, gw, false)
	})
	if err != nil {
		return hostIf, contIf, err
	}

	host, err := netlinksafe.LinkByName(hostIf.Name)
	if err != nil {
		return hostIf, contIf, fmt.Errorf("host end %s: %w", hostIf.Name, err)
	}
	gwAddr := &netlink.Addr{IPNet: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}, Scope: int(netlink.SCOPE_LINK)}
	if err := netlink.AddrAdd(host, gwAddr); err != nil {
		return hostIf, contIf, fmt.Errorf("gateway %s on %s: %w", gw, hostIf.Name, err)
	}
	hostRoute := &netlink.Route{LinkIndex: host.Attrs().Index, Dst: &net.IPNet{IP: podIP, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}
	if err := addRouteRetrying(hostRoute); err != nil {
		return hostIf, contIf, fmt.Errorf("host route to %s via %s: %w", podIP, hostIf.Name, err)
	}
	return hostIf, contIf, nil
}

// addIPAMRoutes adds the IPAM plugin's routes (the conflist's
// __EGRESSPLUGINIPAMDST__, a default route) on the pod's egress
// interface, through gw unless a route names its own gateway.
func addIPAMRoutes(linkIndex int, routes []*types.Route, gw net.IP, v6 bool) error {
	for _, r := range routes {
		if (r.Dst.IP.To4() == nil) != v6 {
			continue // not this interface's family
		}
		via := gw
		if r.GW != nil {
			via = r.GW
		}
		dst := r.Dst
		route := &netlink.Route{LinkIndex: linkIndex, Dst: &dst, Gw: via}
		if err := netlink.RouteAdd(route); err != nil {
			return fmt.Errorf("route %s via %s in the pod: %w", dst.String(), via, err)
		}
	}
	return nil
}

// addRouteRetrying adds a host route, retrying while an old one for the
// same destination is still there.
func addRouteRetrying(r *netlink.Route) error {
	var err error
	for i := 0; i < hostRouteAttempts; i++ {
		if err = netlink.RouteAdd(r); err == nil || !errors.Is(err, syscall.EEXIST) {
			return err
		}
		time.Sleep(hostRouteWait)
	}
	return err
}

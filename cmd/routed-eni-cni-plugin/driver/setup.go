package driver

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// Setup builds the pod's network for p. On failure everything it created
// is removed again and the error returned; the caller gives the address
// back to ipamd. The address's lock is held from the creation of the veth
// to the last rule (or the end of the rollback).
func Setup(p PodNetwork, locks AddressLocker, log *slog.Logger) (err error) {
	if err := p.validate(); err != nil {
		return err
	}
	host, err := hostHandle()
	if err != nil {
		return err
	}
	defer host.Close()
	pod, podNs, err := podHandle(p.NetnsPath)
	if err != nil {
		return err
	}
	defer podNs.Close()
	defer pod.Close()
	// The calling thread is in the node namespace (nothing in this
	// process switches namespaces), so this is the node namespace.
	hostNs, err := netns.Get()
	if err != nil {
		return fmt.Errorf("open node network namespace: %w", err)
	}
	defer hostNs.Close()

	if err := deleteLinkByName(host, p.HostVeth); err != nil {
		return fmt.Errorf("delete stale host veth %s: %w", p.HostVeth, err)
	}
	links, err := host.LinkList()
	if err != nil {
		return fmt.Errorf("list node links: %w", err)
	}
	used := make([]net.HardwareAddr, 0, len(links))
	for _, l := range links {
		used = append(used, l.Attrs().HardwareAddr)
	}
	hostMAC, err := uniqueMAC(used)
	if err != nil {
		return err
	}

	// Released after the rollback below (defers run last-in first-out).
	unlock, err := locks.Lock(p.IP)
	if err != nil {
		return fmt.Errorf("lock node state of %s: %w", p.IP, err)
	}
	defer unlock()

	attrs := netlink.NewLinkAttrs()
	attrs.Name = p.ContainerIf
	attrs.MTU = p.MTU
	veth := &netlink.Veth{
		LinkAttrs:        attrs,
		PeerName:         p.HostVeth,
		PeerHardwareAddr: hostMAC,
		PeerMTU:          uint32(max(p.MTU, 0)),
		PeerTxQLen:       -1,
		PeerNamespace:    netlink.NsFd(int(hostNs)),
	}
	if err := pod.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth pair %s (pod) / %s (node): %w", p.ContainerIf, p.HostVeth, err)
	}
	defer func() {
		if err == nil {
			return
		}
		// Deleting either end removes the pair, and with it the routes
		// through it.
		if derr := deleteLinkByName(host, p.HostVeth); derr != nil {
			log.Error("rollback: could not delete host veth", "hostVeth", p.HostVeth, "error", derr)
		}
		if derr := deleteLinkByName(pod, p.ContainerIf); derr != nil {
			log.Error("rollback: could not delete container interface", "ifName", p.ContainerIf, "error", derr)
		}
		if derr := podrules.Remove(host, p.IP); derr != nil {
			log.Error("rollback: could not delete rules", "ip", p.IP.String(), "error", derr)
		}
	}()

	hostLink, err := host.LinkByName(p.HostVeth)
	if err != nil {
		return fmt.Errorf("find host veth %s: %w", p.HostVeth, err)
	}
	if err := setHostVethSysctls(p.HostVeth); err != nil {
		return err
	}
	if err := host.LinkSetUp(hostLink); err != nil {
		return fmt.Errorf("set %s up: %w", p.HostVeth, err)
	}
	if err := setupPodSide(pod, p, hostMAC); err != nil {
		return err
	}
	return setupHostRouting(host, p, hostLink.Attrs().Index, log)
}

// setupPodSide configures the container end inside the pod namespace.
func setupPodSide(pod handle, p PodNetwork, hostMAC net.HardwareAddr) error {
	link, err := pod.LinkByName(p.ContainerIf)
	if err != nil {
		return fmt.Errorf("find %s in the pod: %w", p.ContainerIf, err)
	}
	idx := link.Attrs().Index
	v6 := p.IP.To4() == nil
	if v6 {
		// A runtime may create the namespace with IPv6 off.
		if err := enablePodIPv6(p.NetnsPath, p.ContainerIf); err != nil {
			return err
		}
	}
	if err := pod.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up in the pod: %w", p.ContainerIf, err)
	}
	gwIP := gatewayFor(p.IP)
	gw := podrules.HostPrefix(gwIP)
	if err := pod.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: gw, Scope: netlink.SCOPE_LINK}); err != nil {
		return fmt.Errorf("pod route to the gateway %s: %w", gwIP, err)
	}
	if err := pod.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: defaultDst(p.IP), Gw: gwIP, Scope: netlink.SCOPE_UNIVERSE}); err != nil {
		return fmt.Errorf("pod default route via %s: %w", gwIP, err)
	}
	addr := &netlink.Addr{IPNet: podrules.HostPrefix(p.IP)}
	if v6 {
		// Nothing else is on the veth: duplicate address detection could
		// only delay the pod (upstream waits it out instead).
		addr.Flags = unix.IFA_F_NODAD
	}
	if err := pod.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("pod address %s: %w", podrules.HostPrefix(p.IP), err)
	}
	neigh := &netlink.Neigh{
		LinkIndex:    idx,
		Family:       podrules.Family(p.IP),
		State:        netlink.NUD_PERMANENT,
		IP:           gwIP,
		HardwareAddr: hostMAC,
	}
	if err := pod.NeighSet(neigh); err != nil {
		return fmt.Errorf("pod neighbour %s -> %s: %w", gwIP, hostMAC, err)
	}
	return nil
}

// setupHostRouting adds the node's route and rules for the pod address.
func setupHostRouting(host handle, p PodNetwork, hostIdx int, log *slog.Logger) error {
	route := &netlink.Route{LinkIndex: hostIdx, Dst: podrules.HostPrefix(p.IP), Scope: netlink.SCOPE_LINK, Table: MainTable}
	if err := host.RouteReplace(route); err != nil {
		return fmt.Errorf("node route %s dev %s: %w", podrules.HostPrefix(p.IP), p.HostVeth, err)
	}
	table := p.table()
	// A "from X" rule left behind by an earlier pod with this address on
	// another ENI would send this pod's traffic out the wrong ENI: every
	// 1536 rule from X goes (one into the right table is added again).
	n, err := podrules.RemoveFrom(host, p.IP)
	if err != nil {
		return err
	}
	if n > 0 {
		log.Info("deleted earlier rules from the pod address", "ip", p.IP.String(), "priority", FromPodRulePriority, "count", n)
	}
	if err := addRule(host, ruleTo(p.IP)); err != nil {
		return err
	}
	if table != MainTable {
		if err := addRule(host, ruleFrom(p.IP, table)); err != nil {
			return err
		}
	}
	return nil
}

// ruleTo and ruleFrom are the node's 512 and 1536 rules for ip
// (package podrules, shared with ipamd).
func ruleTo(ip net.IP) *netlink.Rule { return podrules.To(ip) }

func ruleFrom(ip net.IP, table int) *netlink.Rule { return podrules.From(ip, table) }

// addRule adds r; an identical rule already present is fine.
func addRule(h handle, r *netlink.Rule) error {
	if err := h.RuleAdd(r); err != nil && !isExist(err) {
		return fmt.Errorf("add %s: %w", r, err)
	}
	return nil
}

// deleteLinkByName deletes a link if it exists.
func deleteLinkByName(h interface {
	LinkByName(string) (netlink.Link, error)
	LinkDel(netlink.Link) error
}, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	if err := h.LinkDel(l); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

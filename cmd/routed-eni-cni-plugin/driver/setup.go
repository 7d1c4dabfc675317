package driver

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/vishvananda/netlink"
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
	s, err := openSession(p.NetnsPath)
	if err != nil {
		return err
	}
	defer s.close()
	hostMAC, err := s.hostVethMAC(p.HostVeth)
	if err != nil {
		return err
	}

	// Released after the rollback below (defers run last-in first-out).
	unlock, err := locks.Lock(p.IP)
	if err != nil {
		return fmt.Errorf("lock node state of %s: %w", p.IP, err)
	}
	defer unlock()

	if err := s.addVethPair(p, hostMAC); err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		s.removeVethPair(p, log)
		s.removePodRule(p, log)
		if derr := podrules.Remove(s.host, p.IP); derr != nil {
			log.Error("rollback: could not delete rules", "ip", p.IP.String(), "error", derr)
		}
	}()

	hostLink, err := s.wireVeth(p, hostMAC)
	if err != nil {
		return err
	}
	return setupHostRouting(s.host, p, hostLink.Attrs().Index, log)
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
	pr, err := PodRoutingFor(p.IP, p.Index)
	if err != nil {
		return err
	}
	gwIP := pr.Gateway
	gw := podrules.HostPrefix(gwIP)
	if err := pod.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: gw, Scope: netlink.SCOPE_LINK, Table: pr.Table}); err != nil {
		return fmt.Errorf("pod route to the gateway %s (table %d): %w", gwIP, pr.Table, err)
	}
	if pr.Rule != nil {
		if err := addRule(pod, pr.Rule); err != nil {
			return fmt.Errorf("pod rule: %w", err)
		}
	}
	if err := pod.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: defaultDst(p.IP), Gw: gwIP, Scope: netlink.SCOPE_UNIVERSE, Table: pr.Table}); err != nil {
		return fmt.Errorf("pod default route via %s (table %d): %w", gwIP, pr.Table, err)
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

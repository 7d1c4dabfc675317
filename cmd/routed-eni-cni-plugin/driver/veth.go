package driver

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// session holds what one pod setup works with: netlink handles in the
// node namespace (the plugin's own) and in the pod's, and the node
// namespace itself (where the host end of the veth is created).
type session struct {
	host, pod handle
	podNs     netns.NsHandle
	hostNs    netns.NsHandle
}

// openSession opens the handles for a setup of the pod at netnsPath.
func openSession(netnsPath string) (*session, error) {
	host, err := hostHandle()
	if err != nil {
		return nil, err
	}
	pod, podNs, err := podHandle(netnsPath)
	if err != nil {
		host.Close()
		return nil, err
	}
	// The calling thread is in the node namespace (nothing in this
	// process switches namespaces), so this is the node namespace.
	hostNs, err := netns.Get()
	if err != nil {
		pod.Close()
		_ = podNs.Close()
		host.Close()
		return nil, fmt.Errorf("open node network namespace: %w", err)
	}
	return &session{host: host, pod: pod, podNs: podNs, hostNs: hostNs}, nil
}

func (s *session) close() {
	s.pod.Close()
	_ = s.podNs.Close()
	_ = s.hostNs.Close()
	s.host.Close()
}

// hostVethMAC deletes a host veth of that name left by an earlier pod and
// picks a MAC for the new one that no node link has.
func (s *session) hostVethMAC(hostVeth string) (net.HardwareAddr, error) {
	if err := deleteLinkByName(s.host, hostVeth); err != nil {
		return nil, fmt.Errorf("delete stale host veth %s: %w", hostVeth, err)
	}
	links, err := s.host.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list node links: %w", err)
	}
	used := make([]net.HardwareAddr, 0, len(links))
	for _, l := range links {
		used = append(used, l.Attrs().HardwareAddr)
	}
	return uniqueMAC(used)
}

// addVethPair creates the pair from inside the pod: the container end
// named p.ContainerIf, the peer created directly in the node namespace as
// p.HostVeth with hostMAC.
func (s *session) addVethPair(p PodNetwork, hostMAC net.HardwareAddr) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = p.ContainerIf
	attrs.MTU = p.MTU
	veth := &netlink.Veth{
		LinkAttrs:        attrs,
		PeerName:         p.HostVeth,
		PeerHardwareAddr: hostMAC,
		PeerMTU:          uint32(max(p.MTU, 0)),
		PeerTxQLen:       -1,
		PeerNamespace:    netlink.NsFd(int(s.hostNs)),
	}
	if err := s.pod.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth pair %s (pod) / %s (node): %w", p.ContainerIf, p.HostVeth, err)
	}
	return nil
}

// removeVethPair deletes the pair (either end takes the other, and the
// routes through it, along), logging what it cannot delete.
func (s *session) removeVethPair(p PodNetwork, log *slog.Logger) {
	if err := deleteLinkByName(s.host, p.HostVeth); err != nil {
		log.Error("rollback: could not delete host veth", "hostVeth", p.HostVeth, "error", err)
	}
	if err := deleteLinkByName(s.pod, p.ContainerIf); err != nil {
		log.Error("rollback: could not delete container interface", "ifName", p.ContainerIf, "error", err)
	}
}

// wireVeth brings the host end up (after its IPv6 sysctls) and configures
// the container end: address, gateway route, default route, neighbour.
// It returns the host end.
func (s *session) wireVeth(p PodNetwork, hostMAC net.HardwareAddr) (netlink.Link, error) {
	hostLink, err := s.host.LinkByName(p.HostVeth)
	if err != nil {
		return nil, fmt.Errorf("find host veth %s: %w", p.HostVeth, err)
	}
	if err := setLinkIPv6Sysctls(p.HostVeth); err != nil {
		return nil, err
	}
	if err := s.host.LinkSetUp(hostLink); err != nil {
		return nil, fmt.Errorf("set %s up: %w", p.HostVeth, err)
	}
	if err := setupPodSide(s.pod, p, hostMAC); err != nil {
		return nil, err
	}
	return hostLink, nil
}

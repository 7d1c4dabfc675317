// Package driver does the aws-cni plugin's netlink work, IPv4 or IPv6:
// the veth pair between the pod and the node, the pod's addressing and
// routes, and the node's per-pod route and policy rules; for branch-ENI
// (security groups for pods) pods also the VLAN link on the trunk ENI and
// its route table (branch.go, branch_plan.go, vlan.go). It runs in the node's network namespace (the plugin's own) and
// reaches into the pod's namespace through a netlink handle opened there,
// so no goroutine switches namespaces (except, for an IPv6 pod, to turn
// IPv6 on inside it: enablePodIPv6).
//
// Node-side state per regular pod address X on an ENI with route table T
// (/128 and IPv6 rules for an IPv6 pod; branch-ENI pods: PlanBranch):
//
//	route  X/32 dev <host veth> scope link            (main table)
//	rule   512:  to X lookup main
//	rule   1536: from X lookup T                      (only when T is not main)
//
// Changes to the node-side state of an address are made under that
// address's AddressLocker lock.
//
// Pod-side state: address X/32 on the container interface, a scope-link
// route to the gateway 169.254.1.1, a default route through it and a
// permanent neighbour entry gateway -> host veth MAC. An IPv6 pod gets the
// same with X/128 and the gateway fe80::1, with IPv6 enabled on the
// container interface and lo.
//
// A multi-NIC pod has one such veth per network card (SetupPod, all or
// nothing); interface i > 0 has gateway .<i+1>, its routes in table i
// and an in-pod rule "from X lookup i" (PodRoutingFor, podside.go).
//
// Like the rest of the plugin, it never imports pkg/ipamd/..., the
// simulators or ipamd's clients.
package driver

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// AddressLocker serialises the node-side route and rule changes for one
// pod address across plugin processes (package hostlock). Setup holds the
// lock until the address's route and rules are in place, ReleaseHostRouting
// from its ownership check until the rules are gone, so a late DEL of an
// earlier pod with the address cannot strip the rules of the pod that has
// it now.
type AddressLocker interface {
	Lock(ip net.IP) (unlock func(), err error)
}

// Rule priorities (upstream's numbers; policy engines and ipamd rely on them).
const (
	ToContainerRulePriority = podrules.ToPodPriority
	FromPodRulePriority     = podrules.FromPodPriority
	// VlanRulePriority is that of a strict-mode branch-ENI pod's iif rules.
	VlanRulePriority = 10
)

// MainTable is the kernel's main routing table.
const MainTable = unix.RT_TABLE_MAIN

// GatewayIPv4 and GatewayIPv6 are the pod's next hop: answered by the host
// veth through a permanent neighbour entry, never configured on any
// interface.
var (
	GatewayIPv4 = net.IPv4(169, 254, 1, 1).To4()
	GatewayIPv6 = net.ParseIP("fe80::1")
)

// PodNetwork describes one pod attachment.
type PodNetwork struct {
	HostVeth    string // node-side veth name
	ContainerIf string // CNI_IFNAME
	NetnsPath   string // CNI_NETNS
	IP          net.IP // the pod's address, IPv4 or IPv6
	// RouteTable is the ENI's table as ipamd reports it; values <= 1 and
	// 254 mean main.
	RouteTable int
	MTU        int
	// Index is the interface's position in a multi-NIC pod (0 for a
	// single-interface pod): it picks the pod-side gateway and table
	// (PodRoutingFor).
	Index int
}

// table is the normalised route table.
func (p PodNetwork) table() int { return NormalizeTable(p.RouteTable) }

// NormalizeTable maps the values meaning "main" (0, 1 = legacy primary
// ENI, 254) to main.
func NormalizeTable(t int) int {
	if t <= 1 {
		return MainTable
	}
	return t
}

func (p PodNetwork) validate() error {
	switch {
	case p.IP.To4() == nil && p.IP.To16() == nil, p.IP.IsUnspecified(), p.IP.IsLinkLocalUnicast():
		return fmt.Errorf("pod address %v is not a usable IPv4 or IPv6 address", p.IP)
	case p.HostVeth == "" || len(p.HostVeth) > unix.IFNAMSIZ-1:
		return fmt.Errorf("host veth name %q is empty or longer than %d", p.HostVeth, unix.IFNAMSIZ-1)
	case p.ContainerIf == "" || len(p.ContainerIf) > unix.IFNAMSIZ-1:
		return fmt.Errorf("container interface name %q is empty or longer than %d", p.ContainerIf, unix.IFNAMSIZ-1)
	case p.NetnsPath == "":
		return fmt.Errorf("no network namespace")
	case p.Index < 0 || p.Index >= MaxInterfaces:
		return fmt.Errorf("pod interface index %d outside [0, %d)", p.Index, MaxInterfaces)
	}
	return nil
}

// defaultDst is 0.0.0.0/0 or ::/0.
func defaultDst(ip net.IP) *net.IPNet {
	if ip.To4() != nil {
		return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	}
	return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
}

// Handles open only a NETLINK_ROUTE socket: everything the driver does is
// rtnetlink, and a handle with every family would open (and, in the pod's
// namespace, enter and leave the namespace for) XFRM and netfilter sockets
// it never uses.

// podHandle opens a netlink handle inside the namespace at path.
func podHandle(path string) (handle, netns.NsHandle, error) {
	nsh, err := netns.GetFromPath(path)
	if err != nil {
		return handle{}, netns.None(), fmt.Errorf("open network namespace %s: %w", path, err)
	}
	nh, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	if err != nil {
		_ = nsh.Close()
		return handle{}, netns.None(), fmt.Errorf("netlink in %s: %w", path, err)
	}
	return handle{nh}, nsh, nil
}

// hostHandle opens a netlink handle in the plugin's own namespace.
func hostHandle() (handle, error) {
	nh, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return handle{}, fmt.Errorf("netlink: %w", err)
	}
	return handle{nh}, nil
}

func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENODEV)
}

func isExist(err error) bool { return errors.Is(err, unix.EEXIST) }

package driver

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// A pod attached to several network cards (multi-NIC) has one veth per
// card. Interface i of the pod gets, inside the pod (upstream's layout):
//
//	gateway  169.254.1.<i+1> (IPv4) or fe80::<i+1> (IPv6)
//	table    main for i = 0, table i for i > 0
//	rule     1: from <pod address of i> lookup i   (only for i > 0)
//
// so a packet the pod sends from the address of interface i leaves
// through interface i, and everything else through interface 0.

// FromInterfaceRulePriority is the priority of the in-pod rule steering
// the address of interface i > 0 into table i.
const FromInterfaceRulePriority = 1

// MaxInterfaces bounds the interfaces of one pod: the gateway's last
// octet is i+1.
const MaxInterfaces = 254

// PodRouting is the pod-side routing of one pod interface.
type PodRouting struct {
	Gateway net.IP
	// Table holds the gateway and default routes: main for interface 0.
	Table int
	// Rule steers the interface's address into Table; nil for interface 0.
	Rule *netlink.Rule
}

// PodRoutingFor decides the pod-side routing of interface index for the
// pod address ip.
func PodRoutingFor(ip net.IP, index int) (PodRouting, error) {
	if index < 0 || index >= MaxInterfaces {
		return PodRouting{}, fmt.Errorf("pod interface index %d outside [0, %d)", index, MaxInterfaces)
	}
	r := PodRouting{Gateway: gatewayAt(ip, index), Table: MainTable}
	if index == 0 {
		return r, nil
	}
	r.Table = index
	rule := netlink.NewRule()
	rule.Family = podrules.Family(ip)
	rule.Priority = FromInterfaceRulePriority
	rule.Src = podrules.HostPrefix(ip)
	rule.Table = index
	r.Rule = rule
	return r, nil
}

// gatewayAt is the gateway of interface index for an address of ip's
// family.
func gatewayAt(ip net.IP, index int) net.IP {
	if ip.To4() != nil {
		return net.IPv4(169, 254, 1, byte(index+1)).To4()
	}
	gw := make(net.IP, net.IPv6len)
	copy(gw, GatewayIPv6)
	gw[15] = byte(index + 1)
	return gw
}

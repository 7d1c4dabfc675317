package driver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// ErrAddressInUse is returned by ReleaseHostRouting when a live interface
// still routes the address: another pod holds it now (or the runtime did
// not pass the namespace of a pod that is still running), so its rules
// are left alone.
var ErrAddressInUse = errors.New("address still routed to a live interface")

// RemoveContainerLink deletes the pod's veth end (and so the node end and
// the node route through it). A namespace or link that is already gone is
// not an error; a link that is not a veth is left alone.
//
// Deleting a veth costs the kernel about 20 ms (it waits for RCU grace
// periods); DEL calls it only where the pod's namespace is known to
// outlive the DEL. Otherwise the pair goes when the runtime deletes the
// namespace, as with upstream's plugin.
func RemoveContainerLink(netnsPath, ifName string, log *slog.Logger) error {
	pod, podNs, l, err := podVeth(netnsPath, ifName, log)
	if err != nil || l == nil {
		return err
	}
	defer podNs.Close()
	defer pod.Close()
	if err := pod.LinkDel(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s in %s: %w", ifName, netnsPath, err)
	}
	return nil
}

// ReleaseHostRouting removes the node's route and rules for a pod address
// that is being given up: the main-table route to ip through hostPeer (the
// node end of this pod's veth, HostPeer; 0 when the pair is gone), then,
// unless another interface routes ip, the 512 "to ip" rule and every 1536
// "from ip" rule (whatever their table: one left behind would misroute the
// next pod given this address).
//
// Only the route through hostPeer is this pod's. A route to ip through any
// other interface belongs to a live pod, typically a new one that was
// handed the address already, and so do the rules: ReleaseHostRouting
// leaves them and returns ErrAddressInUse.
//
// The route removal, the check and the rule removal run under the
// address's lock, the one Setup holds while adding the route and then the
// rules: a concurrent ADD of the address either has not added its route
// yet (and adds its rules after this removal) or has finished (its route,
// on its own veth, is seen by the check and survives the removal of ours).
func ReleaseHostRouting(ip net.IP, hostPeer int, locks AddressLocker, log *slog.Logger, opts ...ReleaseOption) error {
	var o releaseOptions
	for _, opt := range opts {
		opt(&o)
	}
	if ip.To4() == nil && ip.To16() == nil {
		return fmt.Errorf("pod address %v is not an IP address", ip)
	}
	host, err := hostHandle()
	if err != nil {
		return err
	}
	defer host.Close()
	unlock, err := locks.Lock(ip)
	if err != nil {
		return fmt.Errorf("lock node state of %s: %w", ip, err)
	}
	defer unlock()
	if hostPeer > 0 {
		own := &netlink.Route{Dst: podrules.HostPrefix(ip), LinkIndex: hostPeer, Table: MainTable, Scope: netlink.SCOPE_NOWHERE}
		if err := host.RouteDel(own); err != nil && !isNotFound(err) {
			return fmt.Errorf("delete route %s via ifindex %d: %w", podrules.HostPrefix(ip), hostPeer, err)
		}
	}
	routes, err := host.RouteListFiltered(podrules.Family(ip),
		&netlink.Route{Dst: podrules.HostPrefix(ip), Table: MainTable}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list routes to %s: %w", ip, err)
	}
	if len(routes) > 0 {
		name := strconv.Itoa(routes[0].LinkIndex)
		if l, err := host.LinkByIndex(routes[0].LinkIndex); err == nil {
			name = l.Attrs().Name
		}
		log.Info("pod address is routed to a live interface; leaving its rules", "ip", ip.String(), "link", name)
		return ErrAddressInUse
	}
	if o.afterOwnershipCheck != nil {
		o.afterOwnershipCheck(ip)
	}
	return podrules.Remove(host, ip)
}

// A ReleaseOption adjusts one ReleaseHostRouting call.
type ReleaseOption func(*releaseOptions)

type releaseOptions struct {
	afterOwnershipCheck func(ip net.IP)
}

// AfterOwnershipCheck has ReleaseHostRouting call f with the address lock
// held, after finding no live route for the address and before removing
// its rules. Tests use it to start a concurrent ADD of the address in that
// window; the plugin passes no option.
func AfterOwnershipCheck(f func(ip net.IP)) ReleaseOption {
	return func(o *releaseOptions) { o.afterOwnershipCheck = f }
}

package podrules

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Locker serialises the node-side changes for one pod address across the
// plugin's processes and ipamd (*hostlock.Locker).
type Locker interface {
	Lock(ip net.IP) (unlock func(), err error)
}

// Remover removes the rules of addresses freed for pods that are gone
// (ipamd's side). The zero NetNS is the caller's own namespace, the node's
// for ipamd; tests name one they created.
type Remover struct {
	NetNS string
	Locks Locker
}

// RemoveIfOwned removes ip's 512 and 1536 rules, under ip's lock, if
// owned (called with the lock held) still says that ip belongs to the
// gone pod. It reports whether it removed them.
//
// Why this is safe for a new pod given ip: an ADD installs its rules
// under the same lock, and only after ipamd handed it ip, which it cannot
// do while the gone pod holds ip. So while owned holds under the lock, no
// other pod's rules for ip exist yet, and one whose ADD follows adds them
// after this removal.
func (r Remover) RemoveIfOwned(ip netip.Addr, owned func() bool) (bool, error) {
	if !ip.IsValid() {
		return false, fmt.Errorf("pod address %v is not an IP address", ip)
	}
	addr := net.IP(ip.Unmap().AsSlice())
	h, err := r.handle()
	if err != nil {
		return false, err
	}
	defer h.Close()
	unlock, err := r.Locks.Lock(addr)
	if err != nil {
		return false, fmt.Errorf("lock node state of %s: %w", ip, err)
	}
	defer unlock()
	if !owned() {
		return false, nil
	}
	// The gone pod's host route went with its veth. A route to ip that is
	// still there means a pod on this node still uses ip, whatever the
	// datastore says: its rules stay (as the plugin's teardown refuses to
	// remove a live link's routing).
	if routed, err := routedToLink(h, addr); err != nil || routed {
		if err == nil {
			err = fmt.Errorf("%s: %w", ip, ErrStillRouted)
		}
		return false, err
	}
	if err := Remove(h, addr); err != nil {
		return false, err
	}
	return true, nil
}

// ErrStillRouted: the main table still routes the address to a link, so a
// pod may use it; its rules were left.
var ErrStillRouted = errors.New("the main table still routes the address to a link; rules left")

// routedToLink reports whether the main table has a host route to ip
// through a link (what the plugin installs for a running pod).
func routedToLink(h *netlink.Handle, ip net.IP) (bool, error) {
	filter := &netlink.Route{Dst: HostPrefix(ip), Table: unix.RT_TABLE_MAIN}
	routes, err := h.RouteListFiltered(Family(ip), filter, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return false, fmt.Errorf("list routes to %s: %w", ip, err)
	}
	for _, r := range routes {
		if r.LinkIndex > 0 {
			return true, nil
		}
	}
	return false, nil
}

// handle opens a route-netlink handle in r's namespace.
func (r Remover) handle() (*netlink.Handle, error) {
	if r.NetNS == "" {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		return h, nil
	}
	nsh, err := netns.GetFromPath(r.NetNS)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", r.NetNS, err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", r.NetNS, err)
	}
	return h, nil
}

// Package podrules is the one definition of the node's per-pod policy
// rules the aws-cni plugin installs for a pod address X, and of their
// removal:
//
//	rule 512:  to X lookup main
//	rule 1536: from X lookup <ENI table>   (only when the table is not main)
//
// The plugin adds and removes them around a pod's ADD and DEL; ipamd
// removes them when it frees an address whose pod is gone without a DEL
// that could (a DEL replayed from the queue, CNI GC, a leaked address the
// reconciler frees). Both take the address's lock (pkg/hostlock) around
// the removal.
//
// It never decides whether the rules may go: callers do (the plugin by the
// node's route to X, ipamd by the datastore still assigning X to the gone
// pod). It imports only netlink, so the plugin can link it without
// networkutils' iptables and metrics.
package podrules

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Rule priorities (upstream's numbers; policy engines rely on them).
const (
	ToPodPriority   = 512
	FromPodPriority = 1536
)

// mainTable is the kernel's main routing table.
const mainTable = unix.RT_TABLE_MAIN

// MaxFromRules bounds RemoveFrom: one 1536 rule per address is the norm,
// a few more are leftovers of earlier pods on other ENIs.
const MaxFromRules = 64

// Deleter is the netlink call removal needs (*netlink.Handle has it).
type Deleter interface {
	RuleDel(*netlink.Rule) error
}

// To is the 512 rule for ip: to ip lookup main.
func To(ip net.IP) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = Family(ip)
	r.Priority = ToPodPriority
	r.Dst = HostPrefix(ip)
	r.Table = mainTable
	return r
}

// From is the 1536 rule for ip into table (0 matches any table in a
// delete request).
func From(ip net.IP, table int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = Family(ip)
	r.Priority = FromPodPriority
	r.Src = HostPrefix(ip)
	r.Table = table
	return r
}

// Remove deletes ip's 512 rule and every 1536 rule from ip. Rules already
// gone are not an error.
func Remove(h Deleter, ip net.IP) error {
	if ip.To4() == nil && ip.To16() == nil {
		return fmt.Errorf("pod address %v is not an IP address", ip)
	}
	if err := h.RuleDel(To(ip)); err != nil && !notFound(err) {
		return fmt.Errorf("delete %s: %w", To(ip), err)
	}
	_, err := RemoveFrom(h, ip)
	return err
}

// RemoveFrom deletes every 1536 "from ip" rule, whatever its table, and
// says how many there were, without dumping the node's rules (two per pod
// on a busy node): a delete request that leaves the table unspecified
// makes the kernel remove the first rule matching the rest, so it is
// repeated until the kernel finds none.
func RemoveFrom(h Deleter, ip net.IP) (int, error) {
	r := From(ip, 0)
	for n := range MaxFromRules {
		if err := h.RuleDel(r); err != nil {
			if notFound(err) {
				return n, nil
			}
			return n, fmt.Errorf("delete rules from %s at priority %d: %w", HostPrefix(ip), FromPodPriority, err)
		}
	}
	return MaxFromRules, fmt.Errorf("more than %d rules from %s at priority %d", MaxFromRules, HostPrefix(ip), FromPodPriority)
}

// HostPrefix is ip as a one-address network: /32 or /128.
func HostPrefix(ip net.IP) *net.IPNet {
	if v4 := ip.To4(); v4 != nil {
		return &net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)}
	}
	return &net.IPNet{IP: ip.To16(), Mask: net.CIDRMask(128, 128)}
}

// Family is ip's netlink address family.
func Family(ip net.IP) int {
	if ip.To4() != nil {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func notFound(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) }

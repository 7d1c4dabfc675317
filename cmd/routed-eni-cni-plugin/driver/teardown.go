package driver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/vishvananda/netlink"
)

// ErrAddressInUse is returned by ReleaseHostRouting when a live interface
// still routes the address: another pod holds it now (or the runtime did
// not pass the namespace of a pod that is still running), so its rules
// are left alone.
var ErrAddressInUse = errors.New("address still routed to a live interface")

// RemoveContainerLink deletes the pod's veth end (and so the node end and
// the node route through it). A namespace or link that is already gone is
// not an error; a link that is not a veth is left alone.
func RemoveContainerLink(netnsPath, ifName string, log *slog.Logger) error {
	if netnsPath == "" {
		return nil
	}
	if _, err := os.Stat(netnsPath); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	pod, podNs, err := podHandle(netnsPath)
	if err != nil {
		// A path that exists but is no longer a namespace (unmounted):
		// the pod's links are gone with it.
		log.Info("pod network namespace not usable; assuming it is gone", "netns", netnsPath, "error", err)
		return nil
	}
	defer podNs.Close()
	defer pod.Close()
	l, err := pod.LinkByName(ifName)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("find %s in %s: %w", ifName, netnsPath, err)
	}
	if l.Type() != "veth" {
		log.Warn("pod interface is not a veth; not deleting it", "ifName", ifName, "type", l.Type())
		return nil
	}
	if err := pod.LinkDel(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s in %s: %w", ifName, netnsPath, err)
	}
	return nil
}

// ReleaseHostRouting removes the node's rules and route for a pod address
// that is being given up: the 512 "to ip" rule and every 1536 "from ip"
// rule (whatever their table: one left behind would misroute the next pod
// given this address).
//
// It must run after the pod's own veth is gone (RemoveContainerLink, or the
// runtime deleting the namespace), because it refuses to act when a main
// table route for ip/32 still exists: the address then belongs to a live
// interface, typically a new pod that was handed the address already, and
// the rules are that pod's. It returns ErrAddressInUse in that case.
//
// The check and the removal run under the address's lock, the one Setup
// holds while adding the route and then the rules: a concurrent ADD of the
// address either has not added its route yet (and adds its rules after
// this removal) or has finished (and the check sees its route).
func ReleaseHostRouting(ip net.IP, locks AddressLocker, log *slog.Logger) error {
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
	routes, err := host.RouteListFiltered(familyOf(ip),
		&netlink.Route{Dst: hostPrefix(ip), Table: MainTable}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
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
	if AfterOwnershipCheck != nil {
		AfterOwnershipCheck(ip)
	}
	return removeRules(host, ip)
}

// AfterOwnershipCheck is a test seam: when set, ReleaseHostRouting calls it
// with the address lock held, after finding no live route for the address
// and before removing its rules. Tests use it to start a concurrent ADD of
// the address in that window. The plugin never sets it.
var AfterOwnershipCheck func(ip net.IP)

// removeRules deletes the 512 rule and all 1536 rules for ip.
func removeRules(host handle, ip net.IP) error {
	if err := host.RuleDel(ruleTo(ip)); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s: %w", ruleTo(ip), err)
	}
	return deleteFromRules(host, ip, func(int) bool { return true }, nil)
}

// deleteFromRules deletes the 1536 "from ip" rules whose table matches.
func deleteFromRules(host handle, ip net.IP, match func(table int) bool, log *slog.Logger) error {
	filter := netlink.NewRule()
	filter.Src = hostPrefix(ip)
	filter.Priority = FromPodRulePriority
	rules, err := host.RuleListFiltered(familyOf(ip), filter, netlink.RT_FILTER_SRC|netlink.RT_FILTER_PRIORITY)
	if err != nil {
		return fmt.Errorf("list rules from %s: %w", ip, err)
	}
	for _, r := range rules {
		if !match(r.Table) {
			continue
		}
		if log != nil {
			log.Info("deleting stale rule", "rule", r.String())
		}
		if err := host.RuleDel(ruleFrom(ip, r.Table)); err != nil && !isNotFound(err) {
			return fmt.Errorf("delete %s: %w", ruleFrom(ip, r.Table), err)
		}
	}
	return nil
}

// TeardownBranchENI removes what upstream's plugin sets up for a branch-ENI
// (security-groups-for-pods) pod: the VLAN link vlan.eth.<vlan>, the
// priority-10 rules into table vlan+100, and the address's 512/1536 rules.
// This plugin does not set such pods up; teardown exists so pods created
// by upstream's plugin before an upgrade are cleaned.
func TeardownBranchENI(vlanID int, ip net.IP, log *slog.Logger) error {
	host, err := hostHandle()
	if err != nil {
		return err
	}
	defer host.Close()
	var errs []error
	if err := deleteLinkByName(host, "vlan.eth."+strconv.Itoa(vlanID)); err != nil {
		errs = append(errs, fmt.Errorf("delete vlan.eth.%d: %w", vlanID, err))
	}
	filter := netlink.NewRule()
	filter.Priority = VlanRulePriority
	filter.Table = vlanID + 100
	rules, err := host.RuleListFiltered(netlink.FAMILY_V4, filter, netlink.RT_FILTER_PRIORITY|netlink.RT_FILTER_TABLE)
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range rules {
		rr := r
		if err := host.RuleDel(&rr); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s: %w", r, err))
		}
	}
	if ip.To4() != nil {
		if err := removeRules(host, ip); err != nil {
			errs = append(errs, err)
		}
	}
	if log != nil && len(errs) == 0 {
		log.Info("branch-ENI pod torn down", "vlan", vlanID, "ip", ip.String())
	}
	return errors.Join(errs...)
}

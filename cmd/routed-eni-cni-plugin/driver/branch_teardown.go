package driver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// TeardownBranchENI removes a branch-ENI pod's node-side state, whichever
// mode set it up (so a change of podSGEnforcingMode between ADD and DEL
// still cleans everything): the VLAN link vlan.eth.<vlan>, every
// priority-10 rule of table vlan+100 (IPv4 and IPv6) and the table's
// routes, the 512/1536 rules of ip (nil: none known), and the main-table
// route to ip through hostPeer (the node end of the pod's veth; 0 when the
// pair is gone, as after the namespace's deletion). The veth pair itself goes
// with the pod's namespace. Things already gone are not an error.
func TeardownBranchENI(vlanID int, ip net.IP, hostPeer int, locks AddressLocker, log *slog.Logger) error {
	host, err := hostHandle()
	if err != nil {
		return err
	}
	defer host.Close()
	if ip != nil {
		unlock, err := locks.Lock(ip)
		if err != nil {
			return fmt.Errorf("lock node state of %s: %w", ip, err)
		}
		defer unlock()
	}
	var errs []error
	if ip != nil && hostPeer > 0 {
		own := &netlink.Route{Dst: podrules.HostPrefix(ip), LinkIndex: hostPeer, Table: MainTable, Scope: netlink.SCOPE_NOWHERE}
		if err := host.RouteDel(own); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("delete route %s via ifindex %d: %w", podrules.HostPrefix(ip), hostPeer, err))
		}
	}
	if err := removeBranchState(host, vlanID, ip); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Info("branch-ENI pod torn down", "vlan", vlanID, "ip", ip.String())
	return nil
}

// removeBranchState deletes the VLAN link of vlanID (and with it the
// routes through it), the priority-10 rules of its table in both
// families, the table's route to ip, and the 512/1536 rules of ip (if
// any).
func removeBranchState(host handle, vlanID int, ip net.IP) error {
	var errs []error
	name := VLANLinkName(vlanID)
	if err := deleteLinkByName(host, name); err != nil {
		errs = append(errs, fmt.Errorf("delete %s: %w", name, err))
	}
	table := VLANTable(vlanID)
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		filter := netlink.NewRule()
		filter.Priority = VlanRulePriority
		filter.Table = table
		rules, err := host.RuleListFiltered(family, filter, netlink.RT_FILTER_PRIORITY|netlink.RT_FILTER_TABLE)
		if err != nil {
			errs = append(errs, fmt.Errorf("list priority-%d rules of table %d: %w", VlanRulePriority, table, err))
		}
		for _, r := range rules {
			if err := host.RuleDel(&r); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %s: %w", r, err))
			}
		}
	}
	// The table's routes through the VLAN link went with it; the
	// strict-mode route to the pod (through its veth) goes here, so none
	// is left while the runtime keeps the namespace.
	if ip != nil {
		podRoute := &netlink.Route{Dst: podrules.HostPrefix(ip), Table: table, Scope: netlink.SCOPE_NOWHERE}
		if err := host.RouteDel(podRoute); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("delete route %s in table %d: %w", podRoute.Dst, table, err))
		}
	}
	if ip != nil {
		if err := podrules.Remove(host, ip); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

package driver

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// A branch-ENI (security groups for pods) pod has its own ENI, attached
// to the node's trunk ENI as a VLAN: the node gets a VLAN link
// vlan.eth.<vlan> with the branch ENI's MAC on the trunk, a route table
// vlan+100 through the branch ENI's subnet gateway, and the routes and
// rules of PlanBranch. The pod side is that of a regular pod (veth,
// 169.254.1.1 or fe80::1 as gateway).

// maxVLANID is the largest 802.1Q VLAN id.
const maxVLANID = 4094

// BranchPod describes one branch-ENI pod attachment.
type BranchPod struct {
	PodNetwork                  // HostVeth, ContainerIf, NetnsPath, IP, MTU; RouteTable is unused
	VlanID     int              // the branch ENI's VLAN on the trunk
	ENIMAC     net.HardwareAddr // the branch ENI's MAC
	SubnetGW   net.IP           // the branch ENI's subnet gateway (fe80:ec2::1 for IPv6)
	TrunkIndex int              // node ifindex of the trunk ENI
	Mode       SGMode
}

func (b BranchPod) validate() error {
	if err := b.PodNetwork.validate(); err != nil {
		return err
	}
	switch {
	case b.VlanID < 1 || b.VlanID > maxVLANID:
		return fmt.Errorf("VLAN id %d is outside 1-%d", b.VlanID, maxVLANID)
	case len(b.ENIMAC) != 6:
		return fmt.Errorf("branch ENI MAC %q is not an Ethernet address", b.ENIMAC)
	case b.SubnetGW == nil || (b.SubnetGW.To4() == nil) != (b.IP.To4() == nil):
		return fmt.Errorf("subnet gateway %v is not an address of the pod address's family", b.SubnetGW)
	case b.TrunkIndex <= 0:
		return fmt.Errorf("trunk ENI ifindex %d is not a link index", b.TrunkIndex)
	case b.Mode != SGModeStrict && b.Mode != SGModeStandard:
		return fmt.Errorf("podSGEnforcingMode %q is neither %s nor %s", b.Mode, SGModeStrict, SGModeStandard)
	}
	return nil
}

// SetupBranchENI builds a branch-ENI pod's network: the veth pair and pod
// side as for a regular pod, the VLAN link, and the routes and rules of
// PlanBranch for b.Mode. On failure everything it created is removed
// again (veth pair, VLAN link, the table's rules and routes) and the error
// returned. The address's lock is held throughout, as in Setup.
func SetupBranchENI(b BranchPod, locks AddressLocker, log *slog.Logger) (err error) {
	if err := b.validate(); err != nil {
		return err
	}
	plan := PlanBranch(b.IP, b.SubnetGW, b.VlanID, b.HostVeth, b.Mode)
	s, err := openSession(b.NetnsPath)
	if err != nil {
		return err
	}
	defer s.close()
	hostMAC, err := s.hostVethMAC(b.HostVeth)
	if err != nil {
		return err
	}
	unlock, err := locks.Lock(b.IP)
	if err != nil {
		return fmt.Errorf("lock node state of %s: %w", b.IP, err)
	}
	defer unlock()

	if err := s.addVethPair(b.PodNetwork, hostMAC); err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		s.removeVethPair(b.PodNetwork, log)
		if derr := removeBranchState(s.host, b.VlanID, b.IP); derr != nil {
			log.Error("rollback: could not remove the branch ENI's link, rules and routes", "vlan", b.VlanID, "error", derr)
		}
	}()

	// Rules of an earlier pod with this name or address (the mode may
	// have changed since) would send this pod's traffic the wrong way.
	if err := removeStaleBranchRules(s.host, b.HostVeth, b.IP); err != nil {
		return err
	}
	hostLink, err := s.wireVeth(b.PodNetwork, hostMAC)
	if err != nil {
		return err
	}
	vlanLink, err := createVLANLink(s.host, plan.VLANLink, b.TrunkIndex, b.VlanID, b.ENIMAC)
	if err != nil {
		return err
	}
	links := map[string]int{
		b.HostVeth:    hostLink.Attrs().Index,
		plan.VLANLink: vlanLink.Attrs().Index,
	}
	return applyPlan(s.host, plan, links)
}

// applyPlan installs the plan's routes, then its rules, resolving link
// names through links.
func applyPlan(host handle, plan BranchPlan, links map[string]int) error {
	for _, r := range plan.Routes {
		idx, ok := links[r.Dev]
		if !ok {
			return fmt.Errorf("route %s: no link %s", r, r.Dev)
		}
		route := &netlink.Route{LinkIndex: idx, Dst: r.Dst, Gw: r.Gw, Scope: r.Scope, Table: r.Table}
		if err := host.RouteReplace(route); err != nil {
			return fmt.Errorf("route %s: %w", r, err)
		}
	}
	for _, r := range plan.Rules {
		if err := addRule(host, r.netlinkRule()); err != nil {
			return fmt.Errorf("rule %s: %w", r, err)
		}
	}
	return nil
}

// removeStaleBranchRules deletes every priority-10 rule "iif hostVeth"
// and the 512/1536 rules of ip.
func removeStaleBranchRules(host handle, hostVeth string, ip net.IP) error {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		filter := netlink.NewRule()
		filter.Priority = VlanRulePriority
		rules, err := host.RuleListFiltered(family, filter, netlink.RT_FILTER_PRIORITY)
		if err != nil {
			return fmt.Errorf("list priority-%d rules: %w", VlanRulePriority, err)
		}
		for _, r := range rules {
			if r.IifName != hostVeth {
				continue
			}
			if err := host.RuleDel(&r); err != nil && !isNotFound(err) {
				return fmt.Errorf("delete stale rule %s: %w", r, err)
			}
		}
	}
	return podrules.Remove(host, ip)
}

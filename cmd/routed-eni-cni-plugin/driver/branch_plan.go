package driver

import (
	"fmt"
	"net"
	"strconv"

	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// SGMode is the netconf's podSGEnforcingMode: how a branch-ENI pod's
// traffic is routed on the node.
type SGMode string

const (
	// SGModeStrict sends every packet of the pod through its branch ENI
	// (iif rules at priority 10), so the ENI's security groups see all of
	// it, node and pod-to-pod traffic included.
	SGModeStrict SGMode = "strict"
	// SGModeStandard routes the pod like a regular pod (512/1536 rules),
	// with the branch ENI's table for traffic leaving the node.
	SGModeStandard SGMode = "standard"
)

// VLAN names and tables, as upstream's plugin has them (ipamd and policy
// engines read them).
const (
	vlanLinkPrefix  = "vlan.eth."
	vlanTableOffset = 100
)

// VLANLinkName is the node's link for a branch ENI's VLAN.
func VLANLinkName(vlanID int) string { return vlanLinkPrefix + strconv.Itoa(vlanID) }

// VLANTable is the route table of a branch ENI's VLAN.
func VLANTable(vlanID int) int { return vlanID + vlanTableOffset }

// PlannedRoute is one route of a plan; Dev is a link name, resolved to an
// index when the plan is applied.
type PlannedRoute struct {
	Table int
	Dst   *net.IPNet
	Gw    net.IP // nil: a directly connected route
	Dev   string
	Scope netlink.Scope
}

// String reads like `ip route`.
func (r PlannedRoute) String() string {
	s := fmt.Sprintf("table %d: ", r.Table)
	if r.Dst == nil || isDefault(r.Dst) {
		s += "default"
	} else {
		s += r.Dst.String()
	}
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	s += " dev " + r.Dev
	if r.Scope == netlink.SCOPE_LINK {
		s += " scope link"
	}
	return s
}

// PlannedRule is one policy rule of a plan.
type PlannedRule struct {
	Family   int
	Priority int
	Table    int
	IIF      string
	Src, Dst *net.IPNet
}

// String reads like `ip rule`.
func (r PlannedRule) String() string {
	s := fmt.Sprintf("%d:", r.Priority)
	if r.Family == netlink.FAMILY_V6 {
		s = "v6 " + s
	}
	if r.IIF != "" {
		s += " iif " + r.IIF
	}
	if r.Src != nil {
		s += " from " + r.Src.String()
	}
	if r.Dst != nil {
		s += " to " + r.Dst.String()
	}
	table := strconv.Itoa(r.Table)
	if r.Table == MainTable {
		table = "main"
	}
	return s + " lookup " + table
}

// netlinkRule is r as a netlink request.
func (r PlannedRule) netlinkRule() *netlink.Rule {
	nr := netlink.NewRule()
	nr.Family = r.Family
	nr.Priority = r.Priority
	nr.Table = r.Table
	nr.IifName = r.IIF
	nr.Src = r.Src
	nr.Dst = r.Dst
	return nr
}

// BranchPlan is the node-side routing of a branch-ENI pod: the VLAN link,
// its table, and the routes and rules to install, in order.
type BranchPlan struct {
	VLANLink string
	Table    int
	Routes   []PlannedRoute
	Rules    []PlannedRule
}

// PlanBranch decides the node-side routes and rules of a branch-ENI pod
// with address ip on VLAN vlanID behind the subnet gateway gw, whose host
// veth is hostVeth. It is a pure function of its inputs.
//
// Both modes: in table vlan+100, "gw/32 dev vlan.eth.<vlan> scope link"
// and "default via gw dev vlan.eth.<vlan>" (/128 and ::/0 for IPv6).
//
// Strict: "ip dev <hostVeth> scope link" in table vlan+100, and rules
// "iif vlan.eth.<vlan> lookup vlan+100" and "iif <hostVeth> lookup
// vlan+100" at priority 10: everything the pod sends or receives crosses
// the branch ENI.
//
// Standard: as a regular pod, with table vlan+100 as the ENI's table:
// "ip dev <hostVeth> scope link" in main, "to ip lookup main" at 512 and
// "from ip lookup vlan+100" at 1536.
func PlanBranch(ip, gw net.IP, vlanID int, hostVeth string, mode SGMode) BranchPlan {
	vlan := VLANLinkName(vlanID)
	table := VLANTable(vlanID)
	family := podrules.Family(ip)
	p := BranchPlan{VLANLink: vlan, Table: table}
	p.Routes = []PlannedRoute{
		{Table: table, Dst: podrules.HostPrefix(gw), Dev: vlan, Scope: netlink.SCOPE_LINK},
		{Table: table, Dst: defaultDst(ip), Gw: gw, Dev: vlan, Scope: netlink.SCOPE_UNIVERSE},
	}
	switch mode {
	case SGModeStandard:
		p.Routes = append(p.Routes, PlannedRoute{Table: MainTable, Dst: podrules.HostPrefix(ip), Dev: hostVeth, Scope: netlink.SCOPE_LINK})
		p.Rules = []PlannedRule{
			{Family: family, Priority: ToContainerRulePriority, Table: MainTable, Dst: podrules.HostPrefix(ip)},
			{Family: family, Priority: FromPodRulePriority, Table: table, Src: podrules.HostPrefix(ip)},
		}
	default: // strict
		p.Routes = append(p.Routes, PlannedRoute{Table: table, Dst: podrules.HostPrefix(ip), Dev: hostVeth, Scope: netlink.SCOPE_LINK})
		p.Rules = []PlannedRule{
			{Family: family, Priority: VlanRulePriority, Table: table, IIF: vlan},
			{Family: family, Priority: VlanRulePriority, Table: table, IIF: hostVeth},
		}
	}
	return p
}

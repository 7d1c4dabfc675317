package networkutils

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Security groups for pods in strict mode (ENABLE_POD_ENI=true,
// POD_SECURITY_GROUP_ENFORCING_MODE=strict) sends a branch pod's traffic
// through its VLAN's route table with `iif` rules at priority 10. The
// kernel's own `from all lookup local` rule sits at priority 0 and would
// deliver traffic for node addresses before those rules are read, so, as
// upstream, ipamd moves it: `lookup local` at priority 20, the one at 0
// deleted. In IPv6 mode the VPC router's neighbour discovery must still
// reach the node: `from fe80:ec2::1 ipproto ipv6-icmp lookup local` stays
// at priority 0.
//
// The node must never be left without a local-table rule (it would stop
// receiving anything addressed to itself): the new rule is always added
// before the old one is deleted, in both directions. So a node switched
// to standard mode, or with pod ENI turned off (a roll-back), gets its
// priority-0 rule back before the priority-20 one goes; ipamd stopping
// leaves the priority-20 rule, which still serves.
//
// Outside strict mode ipamd only undoes its own move: the priority-0 rule
// comes back only while our priority-20 rule is there. With no such rule
// the local-table rules are another tool's business (Cilium, for one,
// moves `lookup local` to priority 100) and stay exactly as they are.
// Priorities of the local-table rules.
const (
	// LocalRulePriority is where strict mode moves `lookup local`.
	LocalRulePriority = 20
	// DefaultLocalRulePriority is the kernel's own `lookup local` rule.
	DefaultLocalRulePriority = 0

	localTable = unix.RT_TABLE_LOCAL
)

// vpcRouterLinkLocal is EC2's router on every ENI (IPv6).
var vpcRouterLinkLocal = ENIIPv6Gateway

// LocalRuleMoved reports whether the host setup moves the local-table rule
// to priority 20: pod ENI on in strict mode.
func LocalRuleMoved(podENI, strict bool) bool { return podENI && strict }

// SyncLocalTableRules applies the local-table layout the configuration
// asks for, in the cluster's family.
func (h *Host) SyncLocalTableRules() error {
	family := netlink.FAMILY_V4
	if h.cfg.IPv6 {
		family = netlink.FAMILY_V6
	}
	moved := newRule(family, LocalRulePriority, localTable)
	kernel := newRule(family, DefaultLocalRulePriority, localTable)
	isPlain := func(w *netlink.Rule) func(netlink.Rule) bool {
		return func(r netlink.Rule) bool { return sameRule(r, w) }
	}
	routerICMP := newRule(netlink.FAMILY_V6, DefaultLocalRulePriority, localTable)
	routerICMP.Src = ipNet(netip.PrefixFrom(vpcRouterLinkLocal, 128))
	routerICMP.IPProto = unix.IPPROTO_ICMPV6
	isRouterICMP := func(r netlink.Rule) bool {
		return r.Priority == DefaultLocalRulePriority && r.Table == localTable && r.IPProto == unix.IPPROTO_ICMPV6 &&
			prefixEq(r.Src, netip.PrefixFrom(vpcRouterLinkLocal, 128))
	}
	type step struct {
		family int
		ours   func(netlink.Rule) bool
		want   []*netlink.Rule
	}
	var steps []step
	if LocalRuleMoved(h.cfg.PodENI, h.cfg.PodSGStrict) {
		steps = append(steps, step{family, isPlain(moved), []*netlink.Rule{moved}})
		if h.cfg.IPv6 {
			steps = append(steps, step{netlink.FAMILY_V6, isRouterICMP, []*netlink.Rule{routerICMP}})
		}
		steps = append(steps, step{family, isPlain(kernel), nil})
	} else {
		rules, err := h.listRules(family)
		if err != nil {
			return fmt.Errorf("local-table rules: %w", err)
		}
		if !slices.ContainsFunc(rules, isPlain(moved)) {
			return nil // not moved by us: left to whoever placed it
		}
		// The priority-20 rule goes last, so a failure on the way leaves
		// it for the next start to finish the job.
		steps = append(steps,
			step{family, isPlain(kernel), []*netlink.Rule{kernel}},
			step{netlink.FAMILY_V6, isRouterICMP, nil},
			step{family, isPlain(moved), nil})
	}
	for _, s := range steps {
		if s.family == netlink.FAMILY_V6 && !h.cfg.IPv6 {
			continue // an IPv4 node has no IPv6 rule of ours
		}
		if err := h.syncRules(s.family, s.ours, s.want); err != nil {
			return fmt.Errorf("local-table rules: %w", err)
		}
	}
	return nil
}

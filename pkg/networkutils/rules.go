package networkutils

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ip rule priorities programmed by ipamd (upstream values; the CNI plugin
// uses 512 and 1536 around them).
const (
	// HostRulePriority: fwmark <mark>/<mark> lookup main, so connmarked
	// traffic leaves through the primary ENI.
	HostRulePriority = 1024
	// ExternalServiceRulePriority: to <AWS_EXTERNAL_SERVICE_CIDRS entry>
	// lookup main.
	ExternalServiceRulePriority = 1535
	// FromENIPrimaryIPRulePriority: from <ENI primary IP> lookup <ENI table>.
	FromENIPrimaryIPRulePriority = 32765

	mainTable = unix.RT_TABLE_MAIN
)

// syncFwmarkRule makes `fwmark <mark>/<mark> lookup main` at priority 1024
// exist once when want, and removes any other fwmark rule at 1024 → main
// (for example one with an old mark value). The rule is in the cluster's
// family (IPv6 in IPv6 mode, as upstream); the other family's rules are
// left alone.
func (h *Host) syncFwmarkRule(want bool) error {
	family := netlink.FAMILY_V4
	if h.cfg.IPv6 {
		family = netlink.FAMILY_V6
	}
	var wanted []*netlink.Rule
	if want {
		r := newRule(family, HostRulePriority, mainTable)
		mark := h.cfg.ConnmarkMark
		r.Mark, r.Mask = mark, &mark
		wanted = append(wanted, r)
	}
	err := h.syncRules(family, func(r netlink.Rule) bool {
		return r.Priority == HostRulePriority && r.Table == mainTable && (r.Mark != 0 || r.Mask != nil)
	}, wanted)
	if err != nil {
		return fmt.Errorf("fwmark rule: %w", err)
	}
	return nil
}

// syncExternalServiceRules makes `to <cidr> lookup main` at priority 1535
// exist once per IPv4 cidr and removes every other 1535 → main rule.
func (h *Host) syncExternalServiceRules(cidrs []netip.Prefix) error {
	var wanted []*netlink.Rule
	for _, c := range ipv4Prefixes(cidrs) {
		r := newRule(netlink.FAMILY_V4, ExternalServiceRulePriority, mainTable)
		r.Dst = ipNet(c)
		wanted = append(wanted, r)
	}
	err := h.syncRules(netlink.FAMILY_V4, func(r netlink.Rule) bool {
		return r.Priority == ExternalServiceRulePriority && r.Table == mainTable
	}, wanted)
	if err != nil {
		return fmt.Errorf("external service CIDR rules: %w", err)
	}
	return nil
}

// syncENIRule makes `from <ip>/32 lookup <table>` (/128 for IPv6) at
// priority 32765 exist exactly once and removes other 32765 rules from
// that IP.
func (h *Host) syncENIRule(ip netip.Addr, table int) error {
	src := netip.PrefixFrom(ip, ip.BitLen())
	r := newRule(netlinkFamily(ip), FromENIPrimaryIPRulePriority, table)
	r.Src = ipNet(src)
	err := h.syncRules(netlinkFamily(ip), func(r netlink.Rule) bool {
		return r.Priority == FromENIPrimaryIPRulePriority && prefixEq(r.Src, src)
	}, []*netlink.Rule{r})
	if err != nil {
		return fmt.Errorf("rule from %s lookup %d: %w", ip, table, err)
	}
	return nil
}

// ensureENIRule gives the ENI its rule from its primary IP: on a card
// above 0, a rule from that IP to table already there (at any priority,
// amazon-ec2-net-utils') is reused and ours is not added; otherwise, and
// on card 0 always, syncENIRule.
func (h *Host) ensureENIRule(eni ENI, table int) error {
	if eni.NetworkCard > 0 {
		reused, err := h.hasRuleFrom(eni.PrimaryIP, table)
		if err != nil {
			return err
		}
		if reused {
			return nil
		}
	}
	return h.syncENIRule(eni.PrimaryIP, table)
}

// hasRuleFrom: a rule `from <ip>/32 lookup <table>` (/128 for IPv6) at a
// priority other than ours exists.
func (h *Host) hasRuleFrom(ip netip.Addr, table int) (bool, error) {
	src := netip.PrefixFrom(ip, ip.BitLen())
	h.rulesMu.Lock()
	defer h.rulesMu.Unlock()
	rules, err := h.listRules(netlinkFamily(ip))
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(rules, func(r netlink.Rule) bool {
		return r.Table == table && r.Priority != FromENIPrimaryIPRulePriority && prefixEq(r.Src, src)
	}), nil
}

// reusedRule: r is a rule ipamd reuses and never added (ensureENIRule):
// to a table of a card above 0, at a priority other than ours.
func reusedRule(r netlink.Rule) bool {
	return r.Table >= RouteTableFor(1, 0) && r.Priority != FromENIPrimaryIPRulePriority
}

// deleteRulesFrom deletes every rule whose source is exactly ip/32 (or
// ip/128) but the ones ipamd reused (reusedRule).
func (h *Host) deleteRulesFrom(ip netip.Addr) error {
	src := netip.PrefixFrom(ip, ip.BitLen())
	ours := func(r netlink.Rule) bool { return prefixEq(r.Src, src) && !reusedRule(r) }
	if err := h.syncRules(netlinkFamily(ip), ours, nil); err != nil {
		return fmt.Errorf("delete rules from %s: %w", ip, err)
	}
	return nil
}

// syncRules is the one ip-rule reconciler. Among the rules of family that
// ours selects, each wanted rule keeps the first listed rule equal to it;
// every other one of ours is deleted; wanted rules without a match are
// added.
func (h *Host) syncRules(family int, ours func(netlink.Rule) bool, wanted []*netlink.Rule) error {
	h.rulesMu.Lock()
	defer h.rulesMu.Unlock()
	rules, err := h.listRules(family)
	if err != nil {
		return err
	}
	kept := make([]bool, len(wanted))
	var errs []error
	for _, r := range rules {
		if !ours(r) {
			continue
		}
		if i := slices.IndexFunc(wanted, func(w *netlink.Rule) bool { return sameRule(r, w) }); i >= 0 && !kept[i] {
			kept[i] = true
			continue
		}
		if err := h.nl.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete %s: %w", r, err))
		}
	}
	for i, w := range wanted {
		if kept[i] {
			continue
		}
		if err := h.nl.RuleAdd(w); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("add %s: %w", w, err))
		}
	}
	return errors.Join(errs...)
}

// sameRule compares a listed rule with one we would write, on every field
// we set (the IP protocol too), and requires the listed one to have no
// other selector or action.
func sameRule(r netlink.Rule, w *netlink.Rule) bool {
	maskEq := (r.Mask == nil && w.Mask == nil) || (r.Mask != nil && w.Mask != nil && *r.Mask == *w.Mask)
	return r.Priority == w.Priority && r.Table == w.Table && r.Mark == w.Mark && maskEq &&
		netEq(r.Src, w.Src) && netEq(r.Dst, w.Dst) &&
		!r.Invert && r.IifName == "" && r.OifName == "" && r.Tos == 0 && r.IPProto == w.IPProto &&
		r.Dport == nil && r.Sport == nil && r.UIDRange == nil && r.Goto <= 0 && r.TunID == 0 &&
		(r.Type == 0 || r.Type == unix.RTN_UNICAST)
}

func netEq(a, b *net.IPNet) bool {
	pa, oka := prefixOf(a)
	pb, okb := prefixOf(b)
	return oka == okb && pa == pb
}

// listRules lists the rules of family, retrying a dump interrupted by a
// change.
func (h *Host) listRules(family int) ([]netlink.Rule, error) {
	var err error
	for range 5 {
		var rules []netlink.Rule
		rules, err = h.nl.RuleList(family)
		if err == nil {
			return rules, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return nil, fmt.Errorf("list ip rules: %w", err)
}

func newRule(family, priority, table int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = family
	r.Priority = priority
	r.Table = table
	return r
}

// netlinkFamily is the netlink family of a.
func netlinkFamily(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// prefixOf converts a netlink address with mask into a prefix.
func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, bits := n.Mask.Size()
	if bits == 0 || bits != a.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}

func prefixEq(n *net.IPNet, p netip.Prefix) bool {
	q, ok := prefixOf(n)
	return ok && q == p
}

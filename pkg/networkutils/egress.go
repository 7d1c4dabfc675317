package networkutils

import (
	"context"
	"errors"
	"net/netip"
)

// The egress plugin (egress-cni) gives each pod a second interface with an
// address from a node-local range: IPv4 from 169.254.172.0/22 in IPv6
// clusters, IPv6 from fd00::ac:0/118 in IPv4 clusters with
// ENABLE_V6_EGRESS, SNATed to the node on the way out. Those addresses
// must never be reachable from outside the pod's own egress, so ipamd
// rejects NEW connections forwarded to the range with one filter FORWARD
// rule, inserted at the top of the chain as upstream does.
//
// The rule is ours by its comment. When present it is left where it is
// (another tool may have inserted rules above it since), extra copies are
// deleted (upstream agents before the existence check inserted one per
// restart), and it is removed in a mode that does not want it. Failing to
// remove an unwanted rule only logs: the rule is harmless, and a node
// whose kernel lacks IPv6 must still start in IPv4 mode.

const (
	tableFilter   = "filter"
	chainForward  = "FORWARD"
	commentV4Deny = "Block Node Local Pod access via IPv4"
	commentV6Deny = "Block Node Local Pod access via IPv6"
)

var (
	// EgressV4Range is where egress-cni addresses pods' IPv4 egress
	// interfaces in IPv6 clusters.
	EgressV4Range = netip.MustParsePrefix("169.254.172.0/22")
	// EgressV6Range is where egress-cni addresses pods' IPv6 egress
	// interfaces in IPv4 clusters (upstream spells it fd00::ac:00/118).
	EgressV6Range = netip.MustParsePrefix("fd00::ac:00/118")
)

// egressRejectRule is the REJECT rule for r, spelled as `iptables -S`
// prints it: the kernel's default --reject-with is written out so the
// listed rule compares equal token by token (the rule is the same one
// upstream's `-j REJECT` installs).
func egressRejectRule(r netip.Prefix, comment string) ruleSpec {
	with := "icmp-port-unreachable"
	if r.Addr().Is6() {
		with = "icmp6-port-unreachable"
	}
	return ruleSpec{"-d", r.Masked().String(), "-m", "conntrack", "--ctstate", "NEW",
		"-m", "comment", "--comment", comment, "-j", "REJECT", "--reject-with", with}
}

// syncEgressRejectRules makes the IPv4 rule exist in IPv6 mode and the
// IPv6 rule (ip6tables) exist in IPv4 mode with V6Egress; each is removed
// otherwise.
func (h *Host) syncEgressRejectRules(ctx context.Context) error {
	h.iptMu.Lock()
	defer h.iptMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	wantV4 := h.cfg.IPv6
	wantV6 := !h.cfg.IPv6 && h.cfg.V6Egress
	errV4 := h.syncEgressReject(h.ipt, EgressV4Range, commentV4Deny, wantV4)
	var errV6 error
	if h.ipt6 != nil {
		errV6 = h.syncEgressReject(h.ipt6, EgressV6Range, commentV6Deny, wantV6)
	}
	return errors.Join(wrap("IPv4 egress REJECT rule", errV4), wrap("IPv6 egress REJECT rule", errV6))
}

func (h *Host) syncEgressReject(ipt ipTables, r netip.Prefix, comment string, want bool) error {
	var rule ruleSpec
	if want {
		rule = egressRejectRule(r, comment)
	}
	inserted, err := syncTopRule(ipt, tableFilter, chainForward, ownedByComment(comment), rule)
	switch {
	case err != nil && !want:
		h.log.Warn("could not remove an egress REJECT rule this mode does not use", "comment", comment, "error", err)
		return nil
	case err != nil:
		return err
	case inserted:
		h.log.Info("rejecting new connections forwarded to the pods' egress range", "range", r.String())
	}
	return nil
}

// syncTopRule makes want (nil: none) the only rule of ours in a shared
// chain: inserted at position 1 when missing, kept where it is when
// present; every other rule of ours, and extra copies, are deleted.
func syncTopRule(ipt ipTables, table, chain string, owned func(ruleSpec) bool, want ruleSpec) (inserted bool, err error) {
	listed, err := ipt.Rules(table, chain)
	if err != nil {
		return false, err
	}
	var keep []ruleSpec
	if want != nil {
		keep = []ruleSpec{want}
		if !containsRule(listed, want) {
			if err := ipt.Insert(table, chain, 1, want); err != nil {
				return false, err
			}
			inserted = true
		}
	}
	return inserted, deleteUnwanted(ipt, table, chain, listed, owned, keep)
}

package networkutils

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// iptables names and comments that upstream uses; other tools and people
// look for them, so they are part of the contract.
const (
	tableNAT    = "nat"
	tableMangle = "mangle"

	snatChain       = "AWS-SNAT-CHAIN-0"
	snatChainPrefix = "AWS-SNAT-CHAIN"

	commentSNATChain     = "AWS SNAT CHAIN"
	commentSNATExclusion = "AWS SNAT CHAIN EXCLUSION"
	commentSNAT          = "AWS, SNAT"
	commentPrimaryENI    = "AWS, primary ENI"
)

// UpdateSNATRules reconciles the IPv4 iptables rules for SNAT (nat
// POSTROUTING → AWS-SNAT-CHAIN-0), the primary-ENI connmark rules (mangle
// PREROUTING) and the connmark of SNATed pod traffic (nat PREROUTING →
// AWS-CONNMARK-CHAIN-0, or the nftables table `ip aws-cni`, by backend)
// for the given VPC CIDRs (IPv6 entries ignored).
// ipamd calls it at start and whenever the VPC's CIDR set changes. All
// three parts are attempted; the errors are joined. In IPv6 mode it does
// nothing, as upstream: pods' IPv6 addresses are not translated, and the
// egress plugin SNATs their IPv4 egress itself; IPv4 rules already on
// such a node are left alone.
func (h *Host) UpdateSNATRules(ctx context.Context, vpcCIDRs []netip.Prefix) error {
	if h.cfg.IPv6 {
		return ctx.Err()
	}
	if !h.cfg.ExternalSNAT && !h.cfg.PrimaryIP.Is4() {
		return fmt.Errorf("update SNAT rules: primary IP %v is not IPv4", h.cfg.PrimaryIP)
	}
	primary, err := h.linkByMAC(ctx, h.cfg.PrimaryMAC)
	if err != nil {
		return fmt.Errorf("update SNAT rules: primary link: %w", err)
	}
	vpc := ipv4Prefixes(vpcCIDRs)

	h.iptMu.Lock()
	defer h.iptMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(
		wrap("SNAT rules", h.syncSNAT(vpc)),
		wrap("primary ENI connmark rules", h.syncPrimaryENIConnmark(primary.Attrs().Name)),
		wrap("pod connmark rules", countConnmarkReconcile(h.syncConnmark(vpc))),
	)
}

// syncSNAT reconciles nat POSTROUTING's jump and AWS-SNAT-CHAIN-0.
func (h *Host) syncSNAT(vpc []netip.Prefix) error {
	jump := ruleSpec{"-m", "comment", "--comment", commentSNATChain, "-j", snatChain}
	var err error
	if h.cfg.ExternalSNAT {
		err = errors.Join(
			syncTaggedRules(h.ipt, tableNAT, "POSTROUTING", ownedByComment(commentSNATChain), nil),
			removeChain(h.ipt, tableNAT, snatChain),
		)
	} else {
		err = errors.Join(
			syncOwnedChain(h.ipt, tableNAT, snatChain, h.snatReturnRules(vpc), h.snatRule()),
			syncTaggedRules(h.ipt, tableNAT, "POSTROUTING", ownedByComment(commentSNATChain), []ruleSpec{jump}),
		)
	}
	return errors.Join(err, h.flushOtherSNATChains())
}

// snatReturnRules are the chain's RETURN rules: VPC CIDRs, then excluded
// CIDRs, each once.
func (h *Host) snatReturnRules(vpc []netip.Prefix) []ruleSpec {
	var rules []ruleSpec
	add := func(p netip.Prefix, comment string) {
		r := append(destMatch(p), "-m", "comment", "--comment", comment, "-j", "RETURN")
		if !containsRule(rules, r) {
			rules = append(rules, r)
		}
	}
	for _, p := range vpc {
		add(p, commentSNATChain)
	}
	for _, p := range ipv4Prefixes(h.cfg.ExcludeSNATCIDRs) {
		add(p, commentSNATExclusion)
	}
	return rules
}

// snatRule is the chain's last rule, SNAT to the primary IP.
func (h *Host) snatRule() ruleSpec {
	r := ruleSpec{"!", "-o", "vlan+", "-m", "comment", "--comment", commentSNAT,
		"-m", "addrtype", "!", "--dst-type", "LOCAL", "-j", "SNAT", "--to-source", h.cfg.PrimaryIP.String()}
	return append(r, snatRandomArgs(h.cfg.RandomizeSNAT, h.ipt.HasRandomFully())...)
}

// snatRandomArgs maps AWS_VPC_K8S_CNI_RANDOMIZESNAT to SNAT options.
func snatRandomArgs(mode string, hasRandomFully bool) []string {
	switch mode {
	case RandomizeSNATNone:
		return nil
	case RandomizeSNATHashRandom:
		return []string{"--random"}
	default:
		if hasRandomFully {
			return []string{"--random-fully"}
		}
		return []string{"--random"}
	}
}

// flushOtherSNATChains empties every AWS-SNAT-CHAIN* chain except ours:
// all their rules are stale (old multi-chain layout). The chains
// themselves go in CleanUpStaleAWSChains.
func (h *Host) flushOtherSNATChains() error {
	chains, err := h.ipt.ListChains(tableNAT)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range chains {
		if c == snatChain || !strings.HasPrefix(c, snatChainPrefix) {
			continue
		}
		rules, err := h.ipt.Rules(tableNAT, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(rules) > 0 {
			errs = append(errs, h.ipt.ClearChain(tableNAT, c))
		}
	}
	return errors.Join(errs...)
}

// syncPrimaryENIConnmark reconciles mangle PREROUTING's "AWS, primary ENI"
// rules: mark connections arriving on the primary ENI for local addresses
// (NodePort), and restore that mark on replies from pods so they route
// back out of the primary ENI.
func (h *Host) syncPrimaryENIConnmark(primaryIf string) error {
	mark := h.cfg.ConnmarkMark
	restore := func(inIf string) ruleSpec {
		return ruleSpec{"-i", inIf, "-m", "comment", "--comment", commentPrimaryENI,
			"-j", "CONNMARK", "--restore-mark", "--nfmask", hexMark(mark), "--ctmask", hexMark(mark)}
	}
	var want []ruleSpec
	if h.cfg.NodePortSupport {
		want = append(want, ruleSpec{"-i", primaryIf, "-m", "comment", "--comment", commentPrimaryENI,
			"-m", "addrtype", "--dst-type", "LOCAL", "--limit-iface-in",
			"-j", "CONNMARK", "--set-xmark", hexMark(mark) + "/" + hexMark(mark)})
	}
	if h.cfg.NodePortSupport || !h.cfg.ExternalSNAT {
		want = append(want, restore(h.cfg.VethPrefix+"+"))
	}
	if h.cfg.NodePortSupport {
		want = append(want, restore("vlan+"))
	}
	return syncTaggedRules(h.ipt, tableMangle, "PREROUTING", ownedByComment(commentPrimaryENI), want)
}

var staleChainName = regexp.MustCompile(`^AWS-(SNAT|CONNMARK)-CHAIN-([0-9]+)$`)

// CleanUpStaleAWSChains removes the chains of upstream's old multi-chain
// layout: when AWS-SNAT-CHAIN-1 exists, every AWS-SNAT-CHAIN-N and
// AWS-CONNMARK-CHAIN-N with N > 0 is deleted, after removing the rules
// that jump to them from other chains. In IPv6 mode it does nothing:
// upstream looks in ip6tables' nat table there, and IPv6 mode creates no
// numbered chain in it.
func (h *Host) CleanUpStaleAWSChains(ctx context.Context) error {
	if h.cfg.IPv6 {
		return ctx.Err()
	}
	h.iptMu.Lock()
	defer h.iptMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	chains, err := h.ipt.ListChains(tableNAT)
	if err != nil {
		return fmt.Errorf("clean up stale AWS chains: %w", err)
	}
	if !slices.Contains(chains, snatChainPrefix+"-1") {
		return nil
	}
	var stale []string
	for _, c := range chains {
		if m := staleChainName.FindStringSubmatch(c); m != nil {
			if n, err := strconv.Atoi(m[2]); err == nil && n > 0 {
				stale = append(stale, c)
			}
		}
	}
	for _, c := range chains {
		if slices.Contains(stale, c) {
			continue
		}
		rules, err := h.ipt.Rules(tableNAT, c)
		if err != nil {
			return fmt.Errorf("clean up stale AWS chains: %w", err)
		}
		for _, r := range rules {
			if slices.Contains(stale, r.target()) {
				if err := h.ipt.Delete(tableNAT, c, r); err != nil {
					return fmt.Errorf("clean up stale AWS chains: %w", err)
				}
			}
		}
	}
	for _, c := range stale {
		if err := h.ipt.ClearChain(tableNAT, c); err != nil {
			return fmt.Errorf("clean up stale AWS chains: %w", err)
		}
	}
	for _, c := range stale {
		if err := h.ipt.DeleteChain(tableNAT, c); err != nil {
			return fmt.Errorf("clean up stale AWS chains: %w", err)
		}
		h.log.Info("deleted stale iptables chain", "table", tableNAT, "chain", c)
	}
	return nil
}

// destMatch is "-d <cidr>", or nothing for 0.0.0.0/0 (as upstream writes it).
func destMatch(p netip.Prefix) ruleSpec {
	if p.Bits() == 0 {
		return ruleSpec{}
	}
	return ruleSpec{"-d", p.Masked().String()}
}

// hexMark prints a mark the way iptables -S does.
func hexMark(m uint32) string { return "0x" + strconv.FormatUint(uint64(m), 16) }

// ipv4Prefixes keeps the valid IPv4 prefixes, masked, each once, in order.
func ipv4Prefixes(in []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range in {
		if p.IsValid() && p.Addr().Is4() && !slices.Contains(out, p.Masked()) {
			out = append(out, p.Masked())
		}
	}
	return out
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

package networkutils

import (
	"errors"
	"net/netip"
)

// The iptables connmark backend (iptables-legacy hosts): nat PREROUTING
// jumps pods' traffic to AWS-CONNMARK-CHAIN-0, which RETURNs for exempt
// CIDRs and sets the connmark bit otherwise; a restore rule after the jump
// copies the bit to the packet mark.
const (
	connmarkChain = "AWS-CONNMARK-CHAIN-0"

	commentOutbound      = "AWS, outbound connections"
	commentConnmark      = "AWS, CONNMARK"
	commentConnmarkChain = "AWS CONNMARK CHAIN"
)

// syncIPTConnmark reconciles the iptables backend's rules; its first
// success also drops the nftables backend's table.
func (h *Host) syncIPTConnmark(exempt []netip.Prefix) error {
	if err := h.syncIPTConnmarkRules(exempt, !h.cfg.ExternalSNAT); err != nil {
		return err
	}
	h.dropNFTConnmarkTable()
	return nil
}

// syncIPTConnmarkRules sets the iptables connmark rules up (want) or
// removes them (!want). The nftables backend removes them this way too.
func (h *Host) syncIPTConnmarkRules(exempt []netip.Prefix, want bool) error {
	if !want {
		return removeIPTConnmarkRules(h.ipt)
	}
	owned := ownedByComment(commentOutbound, commentConnmark)
	mark := hexMark(h.cfg.ConnmarkMark)
	jump := ruleSpec{"-i", h.cfg.VethPrefix + "+", "-m", "comment", "--comment", commentOutbound, "-j", connmarkChain}
	restore := ruleSpec{"-m", "comment", "--comment", commentConnmark,
		"-j", "CONNMARK", "--restore-mark", "--nfmask", mark, "--ctmask", mark}
	setMark := ruleSpec{"-m", "comment", "--comment", commentConnmark,
		"-j", "CONNMARK", "--set-xmark", mark + "/" + mark}
	return errors.Join(
		syncOwnedChain(h.ipt, tableNAT, connmarkChain, connmarkExemptRules(exempt), setMark),
		// The jump must come before the restore rule.
		syncTaggedRules(h.ipt, tableNAT, "PREROUTING", owned, []ruleSpec{jump, restore}),
	)
}

// removeIPTConnmarkRules removes the iptables backend's connmark rules
// (the PREROUTING jump and restore rule, the chain) from ipt's tables.
func removeIPTConnmarkRules(ipt ipTables) error {
	return errors.Join(
		syncTaggedRules(ipt, tableNAT, "PREROUTING", ownedByComment(commentOutbound, commentConnmark), nil),
		removeChain(ipt, tableNAT, connmarkChain),
	)
}

// connmarkExemptRules RETURN early for the exempt CIDRs.
func connmarkExemptRules(exempt []netip.Prefix) []ruleSpec {
	var rules []ruleSpec
	for _, p := range exempt {
		rules = append(rules, append(destMatch(p), "-m", "comment", "--comment", commentConnmarkChain, "-j", "RETURN"))
	}
	return rules
}

// dropNFTConnmarkTable deletes the nftables backend's table once per
// Host (over netlink: the image carries no nft tool), so a node that ran
// the nftables backend is not marked by two diverging rule sets. It is
// best effort: a kernel without nf_tables has no such table, and a
// failure is logged once rather than failing every SNAT update.
func (h *Host) dropNFTConnmarkTable() {
	if h.nftChecked {
		return
	}
	h.nftChecked = true
	deleted := false
	c, err := h.nftConn()
	if err == nil {
		deleted, err = nftDeleteTable(c)
	}
	if err != nil {
		h.log.Warn("cannot remove the nftables connmark table", "table", nftFamily+" "+nftTable, "error", err)
		return
	}
	if deleted {
		h.log.Info("deleted the nftables connmark table", "table", nftFamily+" "+nftTable)
	}
}

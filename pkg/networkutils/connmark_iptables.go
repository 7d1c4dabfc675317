package networkutils

import (
	"errors"
	"net/netip"
	"strings"
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
	owned := ownedByComment(commentOutbound, commentConnmark)
	if !want {
		return errors.Join(
			syncTaggedRules(h.ipt, tableNAT, "PREROUTING", owned, nil),
			removeChain(h.ipt, tableNAT, connmarkChain),
		)
	}
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

// connmarkExemptRules RETURN early for the exempt CIDRs.
func connmarkExemptRules(exempt []netip.Prefix) []ruleSpec {
	var rules []ruleSpec
	for _, p := range exempt {
		rules = append(rules, append(destMatch(p), "-m", "comment", "--comment", commentConnmarkChain, "-j", "RETURN"))
	}
	return rules
}

// dropNFTConnmarkTable deletes the nftables backend's table once per
// Host, so a node that ran the nftables backend is not marked by two
// diverging rule sets. It is best effort: without the nft tool there is
// nothing to do, and a failing nft (a kernel without nf_tables) is logged
// once rather than failing every SNAT update.
func (h *Host) dropNFTConnmarkTable() {
	if h.nftChecked {
		return
	}
	h.nftChecked = true
	out, found, err := runNFT(h.netns, "list", "tables", nftFamily)
	if err != nil {
		h.log.Warn("cannot look for the nftables connmark table", "table", nftFamily+" "+nftTable, "error", err)
		return
	}
	if !found || !hasNFTTable(out, nftFamily, nftTable) {
		return
	}
	if _, _, err := runNFT(h.netns, "delete", "table", nftFamily, nftTable); err != nil {
		h.log.Warn("cannot delete the nftables connmark table", "table", nftFamily+" "+nftTable, "error", err)
		return
	}
	h.log.Info("deleted the nftables connmark table", "table", nftFamily+" "+nftTable)
}

// hasNFTTable reports whether `nft list tables` output names the table.
func hasNFTTable(listing, family, name string) bool {
	want := "table " + family + " " + name
	for _, line := range strings.Split(listing, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}

package networkutils

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
)

// Connmark of SNATed pod traffic, iptables backend (see the package doc for
// why it is the only backend). A new connection from a pod (in on a
// <vethPrefix>+ interface) to a destination outside the exempt CIDRs gets
// the connmark bit; the restore rule copies it to the packet mark, so the
// priority-1024 fwmark rule routes it through the main table, out of the
// primary ENI, where it is SNATed.
const (
	connmarkChain = "AWS-CONNMARK-CHAIN-0"

	commentOutbound      = "AWS, outbound connections"
	commentConnmark      = "AWS, CONNMARK"
	commentConnmarkChain = "AWS CONNMARK CHAIN"

	// nftables table of upstream's nftables connmark backend.
	nftFamily = "ip"
	nftTable  = "aws-cni"
)

// syncConnmark sets the connmark rules up (exempting the VPC and excluded
// CIDRs), or removes them with external SNAT.
func (h *Host) syncConnmark(vpc []netip.Prefix) error {
	owned := ownedByComment(commentOutbound, commentConnmark)
	var err error
	if h.cfg.ExternalSNAT {
		err = errors.Join(
			syncTaggedRules(h.ipt, tableNAT, "PREROUTING", owned, nil),
			removeChain(h.ipt, tableNAT, connmarkChain),
		)
	} else {
		mark := hexMark(h.cfg.ConnmarkMark)
		jump := ruleSpec{"-i", h.cfg.VethPrefix + "+", "-m", "comment", "--comment", commentOutbound, "-j", connmarkChain}
		restore := ruleSpec{"-m", "comment", "--comment", commentConnmark,
			"-j", "CONNMARK", "--restore-mark", "--nfmask", mark, "--ctmask", mark}
		setMark := ruleSpec{"-m", "comment", "--comment", commentConnmark,
			"-j", "CONNMARK", "--set-xmark", mark + "/" + mark}
		err = errors.Join(
			syncOwnedChain(h.ipt, tableNAT, connmarkChain, h.connmarkExemptRules(vpc), setMark),
			// The jump must come before the restore rule.
			syncTaggedRules(h.ipt, tableNAT, "PREROUTING", owned, []ruleSpec{jump, restore}),
		)
	}
	if err != nil {
		return err
	}
	h.dropNFTConnmarkTable()
	return nil
}

// connmarkExemptRules RETURN early for VPC and excluded CIDRs, each once.
func (h *Host) connmarkExemptRules(vpc []netip.Prefix) []ruleSpec {
	var rules []ruleSpec
	for _, p := range slices.Concat(vpc, ipv4Prefixes(h.cfg.ExcludeSNATCIDRs)) {
		r := append(destMatch(p), "-m", "comment", "--comment", commentConnmarkChain, "-j", "RETURN")
		if !containsRule(rules, r) {
			rules = append(rules, r)
		}
	}
	return rules
}

// dropNFTConnmarkTable deletes upstream's nftables connmark table once per
// Host, so a node that ran upstream's nftables backend is not marked by
// two diverging rule sets. It is best effort: without the nft tool there
// is nothing to do, and a failing nft (a kernel without nf_tables) is
// logged once rather than failing every SNAT update.
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
	h.log.Info("deleted the nftables connmark table of upstream's nftables backend", "table", nftFamily+" "+nftTable)
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

package networkutils

import (
	"net/netip"
	"slices"
)

// Connmark of SNATed pod traffic. A new connection from a pod (in on a
// <vethPrefix> interface) to a destination outside the exempt CIDRs (the
// VPC's and the excluded ones) gets the connmark bit; a restore rule copies
// it to the packet mark, so the priority-1024 fwmark rule routes it through
// the main table, out of the primary ENI, where it is SNATed. Two backends
// program it (see the package doc and connmark_backend.go): the nat table
// of iptables, or the native nftables table `ip aws-cni`.

// syncConnmark sets the connmark rules of the Host's backend up, or
// removes them with external SNAT.
func (h *Host) syncConnmark(vpc []netip.Prefix) error {
	exempt := connmarkExemptCIDRs(vpc, ipv4Prefixes(h.cfg.ExcludeSNATCIDRs))
	if h.connmarkBackend == BackendNFTables {
		return h.syncNFTConnmark(exempt)
	}
	return h.syncIPTConnmark(exempt)
}

// connmarkExemptCIDRs are the VPC CIDRs then the excluded ones, each once.
func connmarkExemptCIDRs(vpc, excluded []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range slices.Concat(vpc, excluded) {
		p = p.Masked()
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

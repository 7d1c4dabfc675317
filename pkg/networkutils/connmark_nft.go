package networkutils

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/coreos/go-iptables/iptables"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// syncNFTConnmark reconciles the nftables backend's table `ip aws-cni`:
// set up for the exempt CIDRs, or deleted with external SNAT. Its first
// success also removes the iptables backend's rules.
func (h *Host) syncNFTConnmark(exempt []netip.Prefix) error {
	c, err := h.nftConn()
	if err != nil {
		return err
	}
	if h.cfg.ExternalSNAT {
		_, err = nftDeleteTable(c)
	} else {
		err = h.nftSetup(c, exempt)
	}
	if err != nil {
		return err
	}
	h.dropIPTConnmarkRules()
	return nil
}

// nftConn opens a netlink connection to nf_tables in the Host's namespace.
func (h *Host) nftConn() (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if h.netns != nil {
		opts = append(opts, nftables.WithNetNSFd(int(h.netns.Fd())))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return c, nil
}

// nftFindTable returns our table, or nil.
func nftFindTable(c *nftables.Conn) (*nftables.Table, error) {
	tables, err := c.ListTablesOfFamily(nftTableFamily)
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == nftTable {
			return t, nil
		}
	}
	return nil, nil
}

// nftDeleteTable deletes our table if it exists, and reports whether it did.
func nftDeleteTable(c *nftables.Conn) (deleted bool, err error) {
	t, err := nftFindTable(c)
	if err != nil || t == nil {
		return false, err
	}
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return false, fmt.Errorf("delete table %s %s: %w", nftFamily, nftTable, err)
	}
	return true, nil
}

// nftSetup brings the table to the wanted layout in one transaction,
// touching nothing that is already right.
func (h *Host) nftSetup(c *nftables.Conn, exempt []netip.Prefix) error {
	table, err := nftFindTable(c)
	if err != nil {
		return err
	}
	changed := false
	var base, mark *nftables.Chain
	var foreign []*nftables.Chain // ours to remove: the table is ours alone
	if table == nil {
		table = c.AddTable(&nftables.Table{Family: nftTableFamily, Name: nftTable})
		changed = true
	} else {
		chains, err := c.ListChainsOfTableFamily(nftTableFamily)
		if err != nil {
			return fmt.Errorf("list nftables chains: %w", err)
		}
		for _, ch := range chains {
			if ch.Table.Name != nftTable {
				continue
			}
			switch ch.Name {
			case nftBaseChain:
				base = ch
			case nftMarkChain:
				mark = ch
			default:
				foreign = append(foreign, ch)
			}
		}
	}

	// snat-mark first: the base chain jumps to it.
	exemptRules := map[string][]expr.Any{}
	var exemptTexts []string
	for _, p := range exempt {
		r := nftExemptRule(p)
		text := renderExprs(r)
		exemptRules[text] = r
		exemptTexts = append(exemptTexts, text)
	}
	tail := nftSetMarkRule(h.cfg.ConnmarkMark)
	var listed []listedRule
	if mark == nil {
		mark = c.AddChain(&nftables.Chain{Table: table, Name: nftMarkChain})
		changed = true
	} else if listed, err = nftListRules(c, table, mark); err != nil {
		return err
	}
	plan := planMarkChain(listed, exemptTexts, renderExprs(tail))
	for _, handle := range plan.delete {
		if err := c.DelRule(&nftables.Rule{Table: table, Chain: mark, Handle: handle}); err != nil {
			return fmt.Errorf("delete rule %d of %s: %w", handle, nftMarkChain, err)
		}
	}
	// Each insert goes to the top, so the last is inserted first.
	for i := len(plan.insert) - 1; i >= 0; i-- {
		c.InsertRule(&nftables.Rule{Table: table, Chain: mark, Exprs: exemptRules[plan.insert[i]]})
	}
	if plan.appendTail {
		c.AddRule(&nftables.Rule{Table: table, Chain: mark, Exprs: tail})
	}
	changed = changed || !plan.empty()

	baseRules := nftBaseRules(h.cfg.VethPrefix, h.cfg.ConnmarkMark)
	var want, have []string
	for _, r := range baseRules {
		want = append(want, renderExprs(r))
	}
	if base != nil {
		listedBase, err := nftListRules(c, table, base)
		if err != nil {
			return err
		}
		for _, r := range listedBase {
			have = append(have, r.text)
		}
	}
	action := planBaseChain(base, have, want)
	switch action {
	case baseRecreate:
		c.FlushChain(base)
		c.DelChain(base)
		base = nil
	case baseRefill:
		c.FlushChain(base)
	}
	if base == nil {
		prio := nftables.ChainPriority(nftBasePrio)
		policy := nftables.ChainPolicyAccept
		base = c.AddChain(&nftables.Chain{Table: table, Name: nftBaseChain,
			Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPrerouting,
			Priority: &prio, Policy: &policy})
	}
	if action != baseKeep {
		for _, r := range baseRules {
			c.AddRule(&nftables.Rule{Table: table, Chain: base, Exprs: r})
		}
		changed = true
	}
	// Chains of an earlier writer (another layout, a hand edit) could mark
	// beside ours. Last in the transaction: ours no longer jump to them.
	for _, ch := range foreign {
		c.FlushChain(ch)
		c.DelChain(ch)
		changed = true
	}
	if !changed {
		return nil
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("program table %s %s: %w", nftFamily, nftTable, err)
	}
	return nil
}

// nftListRules reads a chain's rules back, rendered.
func nftListRules(c *nftables.Conn, table *nftables.Table, chain *nftables.Chain) ([]listedRule, error) {
	rules, err := c.GetRules(table, chain)
	if err != nil {
		return nil, fmt.Errorf("list rules of %s: %w", chain.Name, err)
	}
	out := make([]listedRule, 0, len(rules))
	for _, r := range rules {
		out = append(out, listedRule{handle: r.Handle, text: renderExprs(r.Exprs)})
	}
	return out, nil
}

// dropIPTConnmarkRules removes the iptables backend's connmark rules once
// per Host (after the first success of the nftables backend), so a node
// that ran the iptables backend is not marked twice: from the tables the
// node's iptables writes, and from iptables-legacy's when that tool is
// there (an agent whose iptables was legacy wrote them there, and the
// kernel runs both). A failure is logged and retried at the next
// reconcile.
func (h *Host) dropIPTConnmarkRules() {
	if h.iptConnmarkDropped {
		return
	}
	err := removeIPTConnmarkRules(h.ipt)
	if legacy, lerr := newNSIPTablesBinary(h.netns, "iptables-legacy", iptables.ProtocolIPv4); lerr == nil {
		err = errors.Join(err, removeIPTConnmarkRules(legacy))
	} else if !errors.Is(lerr, errNoBinary) {
		err = errors.Join(err, lerr)
	}
	if err != nil {
		h.log.Warn("cannot remove the iptables connmark rules", "chain", connmarkChain, "error", err)
		return
	}
	h.iptConnmarkDropped = true
}

package networkutils

import (
	"fmt"
	"slices"
)

// Reconcilers for the two shapes of iptables state we own. Both add what
// is missing before removing what is stale, so traffic never sees a chain
// without its SNAT / RETURN rules during an update, and both make no
// change at all when the chain is already right.

// ensureChain creates chain in table unless it exists.
func ensureChain(ipt ipTables, table, chain string) error {
	chains, err := ipt.ListChains(table)
	if err != nil {
		return err
	}
	if slices.Contains(chains, chain) {
		return nil
	}
	return ipt.NewChain(table, chain)
}

// removeChain flushes and deletes chain if it exists.
func removeChain(ipt ipTables, table, chain string) error {
	chains, err := ipt.ListChains(table)
	if err != nil {
		return err
	}
	if !slices.Contains(chains, chain) {
		return nil
	}
	if err := ipt.ClearChain(table, chain); err != nil {
		return err
	}
	return ipt.DeleteChain(table, chain)
}

// syncOwnedChain makes a chain we own hold exactly head (any order, each
// once) followed by tail as the last rule. Missing head rules are inserted
// at the top, so they always precede tail; every other rule is deleted.
func syncOwnedChain(ipt ipTables, table, chain string, head []ruleSpec, tail ruleSpec) error {
	if err := ensureChain(ipt, table, chain); err != nil {
		return err
	}
	listed, err := ipt.Rules(table, chain)
	if err != nil {
		return err
	}
	// Insert in reverse so a fresh chain reads in the order of head.
	for i := len(head) - 1; i >= 0; i-- {
		if !containsRule(listed, head[i]) {
			if err := ipt.Insert(table, chain, 1, head[i]); err != nil {
				return err
			}
		}
	}
	if !containsRule(listed, tail) {
		if err := ipt.Append(table, chain, tail); err != nil {
			return err
		}
	}
	want := append(slices.Clone(head), tail)
	if err := deleteUnwanted(ipt, table, chain, listed, func(ruleSpec) bool { return true }, want); err != nil {
		return err
	}
	// tail must be last; a pre-existing copy may sit before other rules.
	listed, err = ipt.Rules(table, chain)
	if err != nil {
		return err
	}
	if n := len(listed); n > 0 && !listed[n-1].equal(tail) {
		if err := ipt.Delete(table, chain, tail); err != nil {
			return err
		}
		if err := ipt.Append(table, chain, tail); err != nil {
			return err
		}
	}
	return nil
}

// syncTaggedRules reconciles our rules inside a shared chain (POSTROUTING,
// PREROUTING): a listed rule is ours if owned says so. Missing wanted rules
// are appended; ours that are not wanted (or duplicated) are deleted;
// others' rules are never touched. Wanted rules keep their relative order:
// from the first one found out of order on, they are moved to the end.
func syncTaggedRules(ipt ipTables, table, chain string, owned func(ruleSpec) bool, want []ruleSpec) error {
	listed, err := ipt.Rules(table, chain)
	if err != nil {
		return err
	}
	for _, w := range want {
		if !containsRule(listed, w) {
			if err := ipt.Append(table, chain, w); err != nil {
				return err
			}
		}
	}
	if err := deleteUnwanted(ipt, table, chain, listed, owned, want); err != nil {
		return err
	}
	if len(want) < 2 {
		return nil
	}
	listed, err = ipt.Rules(table, chain)
	if err != nil {
		return err
	}
	last := -1
	for i, w := range want {
		pos := indexRule(listed, w)
		if pos > last {
			last = pos
			continue
		}
		for _, m := range want[i:] {
			if err := ipt.Delete(table, chain, m); err != nil {
				return err
			}
			if err := ipt.Append(table, chain, m); err != nil {
				return err
			}
		}
		break
	}
	return nil
}

// deleteUnwanted deletes, from listed, every owned rule not in want and
// every extra copy of a wanted rule. Deletion is by spec, not position, so
// concurrent writers to a shared chain cannot make us delete their rule.
func deleteUnwanted(ipt ipTables, table, chain string, listed []ruleSpec, owned func(ruleSpec) bool, want []ruleSpec) error {
	seen := make([]bool, len(want))
	for _, r := range listed {
		if !owned(r) {
			continue
		}
		if i := indexRule(want, r); i >= 0 && !seen[i] {
			seen[i] = true
			continue
		}
		if err := ipt.Delete(table, chain, r); err != nil {
			return fmt.Errorf("remove stale rule: %w", err)
		}
	}
	return nil
}

func indexRule(rules []ruleSpec, r ruleSpec) int {
	return slices.IndexFunc(rules, r.equal)
}

func containsRule(rules []ruleSpec, r ruleSpec) bool { return indexRule(rules, r) >= 0 }

// ownedByComment matches rules whose --comment is one of comments.
func ownedByComment(comments ...string) func(ruleSpec) bool {
	return func(r ruleSpec) bool { return slices.Contains(comments, r.comment()) }
}

package networkutils

import (
	"slices"

	"github.com/google/nftables"
)

// baseChainAction is what the base chain needs.
type baseChainAction int

const (
	baseKeep     baseChainAction = iota // right attributes, right rules
	baseCreate                          // missing: create and fill
	baseRefill                          // rules missing or out of order: flush and fill
	baseRecreate                        // wrong type/hook/priority/policy: delete, create, fill
)

// planBaseChain decides what the base chain (nil when missing) with the
// given rendered rules needs to match want exactly.
func planBaseChain(c *nftables.Chain, rules, want []string) baseChainAction {
	switch {
	case c == nil:
		return baseCreate
	case !isNFTBaseChain(c):
		return baseRecreate
	case !slices.Equal(rules, want):
		return baseRefill
	}
	return baseKeep
}

// isNFTBaseChain reports whether c has the base chain's attributes: type
// nat, hook prerouting, priority -90, policy accept.
func isNFTBaseChain(c *nftables.Chain) bool {
	return c.Type == nftables.ChainTypeNAT &&
		c.Hooknum != nil && *c.Hooknum == *nftables.ChainHookPrerouting &&
		c.Priority != nil && *c.Priority == nftBasePrio &&
		(c.Policy == nil || *c.Policy == nftables.ChainPolicyAccept)
}

// listedRule is a rule read back from the kernel: its handle and its
// rendering (renderExprs).
type listedRule struct {
	handle uint64
	text   string
}

// markChainPlan is how snat-mark is brought to want: delete these
// handles, insert these exempt rules at the top (they end in this order),
// and append the set-mark rule if it is missing.
type markChainPlan struct {
	delete     []uint64
	insert     []string
	appendTail bool
}

func (p markChainPlan) empty() bool {
	return len(p.delete) == 0 && len(p.insert) == 0 && !p.appendTail
}

// planMarkChain keeps each wanted exempt rule once if it comes before the
// set-mark rule (tail), keeps the first tail, and deletes everything else:
// unknown rules, exempt CIDRs no longer wanted, duplicates, and exempt
// rules after the tail (they would never be reached; they are re-inserted
// at the top). Exempt order among kept rules is left alone.
func planMarkChain(listed []listedRule, exempt []string, tail string) markChainPlan {
	var p markChainPlan
	kept := map[string]bool{}
	tailSeen := false
	for _, r := range listed {
		switch {
		case r.text == tail && !tailSeen:
			tailSeen = true
		case !tailSeen && !kept[r.text] && slices.Contains(exempt, r.text):
			kept[r.text] = true
		default:
			p.delete = append(p.delete, r.handle)
		}
	}
	for _, e := range exempt {
		if !kept[e] && !slices.Contains(p.insert, e) {
			p.insert = append(p.insert, e)
		}
	}
	p.appendTail = !tailSeen
	return p
}

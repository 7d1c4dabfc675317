package networkutils

import (
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
)

func TestChooseConnmarkBackend(t *testing.T) {
	for _, tc := range []struct {
		name, version, want string
	}{
		{"legacy iptables gets the iptables backend", "iptables v1.8.4 (legacy)", BackendIPTables},
		{"nf_tables iptables gets the nftables backend", "iptables v1.8.9 (nf_tables)", BackendNFTables},
		{"an old iptables without a backend tag gets the nftables backend", "iptables v1.6.1", BackendNFTables},
		{"no answer gets the nftables backend", "", BackendNFTables},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, chooseConnmarkBackend(tc.version))
		})
	}
}

func TestPlanBaseChain(t *testing.T) {
	prio := func(p int32) *nftables.ChainPriority { v := nftables.ChainPriority(p); return &v }
	policy := func(p nftables.ChainPolicy) *nftables.ChainPolicy { return &p }
	chain := func(mod func(*nftables.Chain)) *nftables.Chain {
		c := &nftables.Chain{Name: nftBaseChain, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPrerouting,
			Priority: prio(nftBasePrio), Policy: policy(nftables.ChainPolicyAccept)}
		if mod != nil {
			mod(c)
		}
		return c
	}
	want := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name  string
		chain *nftables.Chain
		rules []string
		want  baseChainAction
	}{
		{"a missing chain is created", nil, nil, baseCreate},
		{"the right chain with the right rules is kept", chain(nil), want, baseKeep},
		{"missing rules are refilled", chain(nil), []string{"a", "b"}, baseRefill},
		{"rules out of order are refilled", chain(nil), []string{"b", "a", "c"}, baseRefill},
		{"an extra rule is refilled away", chain(nil), []string{"a", "b", "c", "x"}, baseRefill},
		{"a wrong priority is recreated", chain(func(c *nftables.Chain) { c.Priority = prio(-100) }), want, baseRecreate},
		{"a wrong hook is recreated", chain(func(c *nftables.Chain) { c.Hooknum = nftables.ChainHookInput }), want, baseRecreate},
		{"a wrong type is recreated", chain(func(c *nftables.Chain) { c.Type = nftables.ChainTypeFilter }), want, baseRecreate},
		{"a drop policy is recreated", chain(func(c *nftables.Chain) { c.Policy = policy(nftables.ChainPolicyDrop) }), want, baseRecreate},
		{"a regular chain of that name is recreated", chain(func(c *nftables.Chain) { c.Hooknum, c.Priority, c.Type = nil, nil, "" }), want, baseRecreate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, planBaseChain(tc.chain, tc.rules, want))
		})
	}
}

func TestPlanMarkChain(t *testing.T) {
	rules := func(texts ...string) []listedRule {
		var out []listedRule
		for i, s := range texts {
			out = append(out, listedRule{handle: uint64(i + 1), text: s})
		}
		return out
	}
	exempt := []string{"vpc", "excl"}
	for _, tc := range []struct {
		name   string
		listed []listedRule
		want   markChainPlan
	}{
		{"an empty chain gets every exempt rule and the tail", nil,
			markChainPlan{insert: []string{"vpc", "excl"}, appendTail: true}},
		{"a right chain is kept", rules("vpc", "excl", "tail"), markChainPlan{}},
		{"exempt order among kept rules is left alone", rules("excl", "vpc", "tail"), markChainPlan{}},
		{"a new CIDR is inserted at the top", rules("vpc", "tail"), markChainPlan{insert: []string{"excl"}}},
		{"a CIDR no longer wanted is deleted", rules("old", "vpc", "excl", "tail"), markChainPlan{delete: []uint64{1}}},
		{"an unknown rule is deleted", rules("vpc", "excl", "tail", "x"), markChainPlan{delete: []uint64{4}}},
		{"a duplicate is deleted", rules("vpc", "vpc", "excl", "tail", "tail"), markChainPlan{delete: []uint64{2, 5}}},
		{"an exempt rule after the tail moves to the top", rules("vpc", "tail", "excl"),
			markChainPlan{delete: []uint64{3}, insert: []string{"excl"}}},
		{"a missing tail is appended", rules("vpc", "excl"), markChainPlan{appendTail: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, planMarkChain(tc.listed, exempt, "tail"))
		})
	}
}

func TestNFTExemptRuleEncodesLikeTheNFTTool(t *testing.T) {
	for _, tc := range []struct {
		name, cidr, want string
	}{
		{"a byte-aligned prefix compares only its bytes", "10.0.0.0/16",
			"payload op0 base1 +16 len 2 > r1 < r0; cmp r1 op0 0a00; counter; verdict -5 "},
		{"a host compares four bytes", "10.1.2.3/32",
			"payload op0 base1 +16 len 4 > r1 < r0; cmp r1 op0 0a010203; counter; verdict -5 "},
		{"another prefix is masked", "172.16.0.0/12",
			"payload op0 base1 +16 len 4 > r1 < r0; bitwise r1 > r1 len 4 mask fff00000 xor 00000000; cmp r1 op0 ac100000; counter; verdict -5 "},
		{"everything is masked with zero", "0.0.0.0/0",
			"payload op0 base1 +16 len 4 > r1 < r0; bitwise r1 > r1 len 4 mask 00000000 xor 00000000; cmp r1 op0 00000000; counter; verdict -5 "},
		{"host bits are dropped", "10.0.0.7/8",
			"payload op0 base1 +16 len 1 > r1 < r0; cmp r1 op0 0a; counter; verdict -5 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, renderExprs(nftExemptRule(netip.MustParsePrefix(tc.cidr))))
		})
	}
}

func TestConnmarkExemptCIDRsAreVPCThenExcludedEachOnce(t *testing.T) {
	got := connmarkExemptCIDRs(prefixes("10.0.0.0/16", "10.1.0.0/16"), prefixes("10.0.0.0/16", "192.168.0.0/16"))
	assert.Equal(t, prefixes("10.0.0.0/16", "10.1.0.0/16", "192.168.0.0/16"), got)
}

package networkutils

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLocalRuleMovesOnlyForPodENIInStrictMode(t *testing.T) {
	tests := []struct {
		podENI, strict, moved bool
	}{
		{false, false, false},
		{false, true, false},
		{true, false, false},
		{true, true, true},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.moved, LocalRuleMoved(tc.podENI, tc.strict), "podENI=%t strict=%t", tc.podENI, tc.strict)
	}
}

// The local-table rule sits at priority 20 (strict) or 0 (otherwise), and
// every switch between modes, either way, and every restart, ends with
// exactly one local-table rule for all traffic: the node never loses it.
// Outside strict mode only a rule ipamd moved to 20 is moved back: a local
// rule another tool placed elsewhere (Cilium's at 100) is left alone.
func TestLocalTableRuleFollowsPodSGModeAndIsNeverLeftMissing(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	local := []string{"lookup 255"}
	otherTool := [][]string{
		{"rule", "add", "pref", "100", "lookup", "local"},
		{"rule", "del", "pref", "0", "lookup", "local"},
	}
	cfgs := []struct {
		name             string
		before           [][]string // ip commands run on the node first
		podENI, strict   bool
		at0, at20, at100 []string
	}{
		{"pod ENI off", nil, false, false, local, nil, nil},
		{"strict", nil, true, true, nil, local, nil},
		{"strict again (restart)", nil, true, true, nil, local, nil},
		{"standard", nil, true, false, local, nil, nil},
		{"strict after standard", nil, true, true, nil, local, nil},
		{"roll back: pod ENI off", nil, false, true, local, nil, nil},
		{"pod ENI off again", nil, false, false, local, nil, nil},
		{"another tool's rule at 100, pod ENI off", otherTool, false, false, nil, nil, local},
		{"another tool's rule at 100, standard", nil, true, false, nil, nil, local},
		{"another tool's rule at 100, strict", nil, true, true, nil, local, local},
		{"another tool's rule at 100, roll back", nil, false, false, local, nil, local},
	}
	for _, c := range cfgs {
		for _, args := range c.before {
			node.ip(t, args...)
		}
		cfg := baseConfig()
		cfg.PodENI, cfg.PodSGStrict = c.podENI, c.strict
		h, _ := node.host(t, cfg)
		require.NoError(t, h.SetupHostNetwork(ctx), c.name)
		assert.Equal(t, c.at0, node.rulesAt(t, DefaultLocalRulePriority), "%s: priority 0", c.name)
		assert.Equal(t, c.at20, node.rulesAt(t, LocalRulePriority), "%s: priority 20", c.name)
		assert.Equal(t, c.at100, node.rulesAt(t, 100), "%s: priority 100", c.name)
		assert.Empty(t, node.rules6At(t, LocalRulePriority), "%s: an IPv4 node's IPv6 rules are left alone", c.name)
	}
}

// IPv6 mode moves the IPv6 local rule and keeps the VPC router's ICMPv6
// (neighbour discovery) on the local table at priority 0; both go back
// when strict mode ends.
func TestIPv6LocalTableRulesKeepTheRoutersICMPv6(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	cfg := v6Config()
	cfg.PodENI, cfg.PodSGStrict = true, true
	h, _ := node.host(t, cfg)
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Equal(t, []string{"from fe80:ec2::1/128 lookup 255"}, node.rules6At(t, DefaultLocalRulePriority))
	assert.Contains(t, node.ip(t, "-6", "rule"), "0:\tfrom fe80:ec2::1 ipproto ipv6-icmp lookup local")
	assert.Equal(t, []string{"lookup 255"}, node.rules6At(t, LocalRulePriority))
	assert.Equal(t, []string{"lookup 255"}, node.rulesAt(t, DefaultLocalRulePriority), "the IPv4 rule of an IPv6 node stays")
	// A rule added after ours at the same priority is listed after it
	// for as long as ours is not deleted and added again.
	node.ip(t, "-6", "rule", "add", "pref", "0", "from", "fe80::5", "lookup", "main")
	require.NoError(t, h.SetupHostNetwork(ctx), "restart")
	assert.Equal(t, []string{"from fe80::5/128 lookup 254", "from fe80:ec2::1/128 lookup 255"}, node.rules6At(t, DefaultLocalRulePriority))
	rules := node.ip(t, "-6", "rule")
	assert.Less(t, strings.Index(rules, "from fe80:ec2::1 ipproto ipv6-icmp lookup local"), strings.Index(rules, "from fe80::5 lookup main"),
		"a restart keeps the router's ICMPv6 rule in place:\n%s", rules)
	node.ip(t, "-6", "rule", "del", "pref", "0", "from", "fe80::5", "lookup", "main")

	cfg.PodSGStrict = false
	h, _ = node.host(t, cfg)
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Equal(t, []string{"lookup 255"}, node.rules6At(t, DefaultLocalRulePriority))
	assert.Empty(t, node.rules6At(t, LocalRulePriority))
}

// The trunk ENI's link is set up like a secondary ENI's (address, routes
// in table device+1) but gets no rule from its primary IP.
func TestTrunkENIHasNoRuleFromItsPrimaryIP(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))
	trunk := eni1
	trunk.Trunk = true
	require.NoError(t, h.SetupENINetwork(ctx, trunk))
	assert.Empty(t, node.rulesAt(t, FromENIPrimaryIPRulePriority))
	assert.Equal(t, []string{"0.0.0.0/0 via 10.0.1.1 dev eth1 scope 0", "10.0.1.1/32 dev eth1 scope 253"}, node.routesIn(t, 3))
	assert.Equal(t, 9001, node.link(t, "eth1").Attrs().MTU)
}

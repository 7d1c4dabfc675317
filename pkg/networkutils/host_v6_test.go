package networkutils

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// v6Config is an IPv6 node: ipamd hands over the node's IPv6 address and
// the VPC's IPv6 CIDR; the environment is as in baseConfig.
func v6Config() Config {
	c := baseConfig()
	c.IPv6 = true
	c.PrimaryIP = netip.MustParseAddr("2001:db8::10")
	c.VPCCIDRs = prefixes("2001:db8::/56")
	return c
}

// As `iptables -S FORWARD` / `ip6tables -S FORWARD` print them.
const (
	forwardPolicy = "-P FORWARD ACCEPT\n"
	rejectV4      = `-A FORWARD -d 169.254.172.0/22 -m conntrack --ctstate NEW -m comment --comment "Block Node Local Pod access via IPv4" -j REJECT --reject-with icmp-port-unreachable` + "\n"
	rejectV6      = `-A FORWARD -d fd00::ac:0/118 -m conntrack --ctstate NEW -m comment --comment "Block Node Local Pod access via IPv6" -j REJECT --reject-with icmp6-port-unreachable` + "\n"
	foreignV4     = "-A FORWARD -s 10.9.0.0/16 -j ACCEPT\n"
	foreignV6     = "-A FORWARD -s fd99::/64 -j ACCEPT\n"
)

// countIPv6 counts the writes of h's ip6tables as node.host counts iptables'.
func countIPv6(t *testing.T, h *Host) *countingIPT {
	t.Helper()
	require.NotNil(t, h.ipt6)
	c := &countingIPT{ipTables: h.ipt6}
	h.ipt6 = c
	return c
}

// v6State is the rules, IPv4 routes and iptables state SetupHostNetwork
// may change, as text. Links and IPv6 routes are left out: the kernel
// changes them on its own for a while after a link comes up (operstate,
// link-local addresses finishing duplicate address detection).
func (n *testNode) v6State(t *testing.T) string {
	t.Helper()
	return strings.Join([]string{
		n.ip(t, "rule"),
		n.ip(t, "-6", "rule"),
		n.ip(t, "route", "show", "table", "all"),
		n.save(t, "nat"),
		n.save(t, "mangle"),
		n.forward(t, "iptables"),
		n.forward(t, "ip6tables"),
	}, "\n")
}

func TestIPv6ModeHostNetwork(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	// Someone else's rules are already in FORWARD: ours goes above them.
	node.iptables(t, "-A", "FORWARD", "-s", "10.9.0.0/16", "-j", "ACCEPT")
	node.ip6tables(t, "-A", "FORWARD", "-s", "fd99::/64", "-j", "ACCEPT")

	h, ipt := node.host(t, v6Config())
	ipt6 := countIPv6(t, h)
	require.NoError(t, h.SetupHostNetwork(ctx))

	assert.Equal(t, 9001, node.link(t, "eth0").Attrs().MTU)
	assert.Equal(t, forwardPolicy+rejectV4+foreignV4, node.forward(t, "iptables"), "REJECT rule at position 1")
	assert.Equal(t, forwardPolicy+foreignV6, node.forward(t, "ip6tables"), "no IPv6 REJECT rule in IPv6 mode")
	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rules6At(t, HostRulePriority))
	assert.Contains(t, node.ip(t, "-6", "rule"), "1024:\tfrom all fwmark 0x80/0x80 lookup main")
	assert.Empty(t, node.rulesAt(t, HostRulePriority), "no IPv4 fwmark rule")
	assert.Equal(t, []string{"to 198.51.100.0/24 lookup 254", "to 203.0.113.0/24 lookup 254"}, node.rulesAt(t, ExternalServiceRulePriority))
	// No SNAT and no connmark: not in nat or mangle, not in either family.
	assert.Equal(t, natHeader+"COMMIT\n", node.save(t, "nat"))
	assert.Equal(t, mangleHeader+"COMMIT\n", node.save(t, "mangle"))
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		assert.NotContains(t, node.exec(t, save), "AWS-", save)
	}

	// A restart changes nothing and writes nothing; UpdateSNATRules and the
	// stale-chain cleanup are no-ops.
	before := node.v6State(t)
	ipt.writes.Store(0)
	require.NoError(t, h.SetupHostNetwork(ctx))
	require.NoError(t, h.UpdateSNATRules(ctx, prefixes("2001:db8::/56", "10.0.0.0/16")))
	require.NoError(t, h.CleanUpStaleAWSChains(ctx))
	assert.Zero(t, ipt.writes.Load()+ipt6.writes.Load(), "iptables writes on the second run")
	assert.Equal(t, before, node.v6State(t))
	assert.Equal(t, 1, strings.Count(node.forward(t, "iptables"), "Block Node Local Pod access"))

	// A new agent on the same node (ipamd restarted) is just as quiet.
	h2, ipt2 := node.host(t, v6Config())
	require.NoError(t, h2.SetupHostNetwork(ctx))
	assert.Zero(t, ipt2.writes.Load())
	assert.Equal(t, before, node.v6State(t))
}

// The IPv6 node runs its host setup against IPv4 rules an IPv4 agent left:
// they stay (upstream's IPv6 mode does not touch IPv4 SNAT), and the IPv4
// fwmark rule is not the IPv6 mode's to remove.
func TestIPv6ModeLeavesIPv4SNATAlone(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))

	h6, _ := node.host(t, v6Config())
	require.NoError(t, h6.SetupHostNetwork(ctx))
	assert.Equal(t, wantBaseNAT, node.save(t, "nat"))
	assert.Equal(t, wantBaseMangle, node.save(t, "mangle"))
	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rulesAt(t, HostRulePriority))
	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rules6At(t, HostRulePriority))
}

func TestIPv6ModeFwmarkRuleFollowsSNATSettings(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	cfg := v6Config()
	cfg.ConnmarkMark = 0x40
	h, _ := node.host(t, cfg)
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Equal(t, []string{"fwmark 0x40/0x40 lookup 254"}, node.rules6At(t, HostRulePriority))

	// External SNAT and no node-port support: no fwmark rule, as upstream.
	cfg.ExternalSNAT, cfg.NodePortSupport = true, false
	h, _ = node.host(t, cfg)
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Empty(t, node.rules6At(t, HostRulePriority))
	assert.Equal(t, forwardPolicy+rejectV4, node.forward(t, "iptables"), "the REJECT rule does not depend on SNAT")
}

func TestEgressRejectRuleDuplicatesAndModeChanges(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	// Older upstream agents inserted the rule on every start, without
	// --reject-with (the kernel default), so a node can hold copies.
	for range 3 {
		node.iptables(t, "-I", "FORWARD", "1", "-d", "169.254.172.0/22", "-m", "conntrack", "--ctstate", "NEW",
			"-m", "comment", "--comment", "Block Node Local Pod access via IPv4", "-j", "REJECT")
	}
	node.iptables(t, "-A", "FORWARD", "-s", "10.9.0.0/16", "-j", "ACCEPT")

	h, _ := node.host(t, v6Config())
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Equal(t, forwardPolicy+rejectV4+foreignV4, node.forward(t, "iptables"))

	// The same node in IPv4 mode: the IPv4 rule goes, SNAT is as always.
	h, _ = node.host(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Equal(t, forwardPolicy+foreignV4, node.forward(t, "iptables"))
	assert.Equal(t, forwardPolicy, node.forward(t, "ip6tables"))
	assert.Equal(t, wantBaseNAT, node.save(t, "nat"))
	// Each mode owns the fwmark rule of its own family only.
	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rulesAt(t, HostRulePriority))
	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rules6At(t, HostRulePriority))
}

func TestV6EgressInIPv4Mode(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	node.ip6tables(t, "-A", "FORWARD", "-s", "fd99::/64", "-j", "ACCEPT")
	cfg := baseConfig()
	cfg.V6Egress = true
	h, ipt := node.host(t, cfg)
	ipt6 := countIPv6(t, h)
	require.NoError(t, h.SetupHostNetwork(ctx))

	assert.Equal(t, forwardPolicy+rejectV6+foreignV6, node.forward(t, "ip6tables"), "ip6tables REJECT rule at position 1")
	assert.Equal(t, forwardPolicy, node.forward(t, "iptables"))
	// Everything else is the IPv4 node's usual layout.
	assert.Equal(t, wantBaseNAT, node.save(t, "nat"))
	assert.Equal(t, wantBaseMangle, node.save(t, "mangle"))
	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rulesAt(t, HostRulePriority))
	assert.Empty(t, node.rules6At(t, HostRulePriority))

	before := node.v6State(t)
	ipt.writes.Store(0)
	ipt6.writes.Store(0)
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Zero(t, ipt.writes.Load()+ipt6.writes.Load())
	assert.Equal(t, before, node.v6State(t))

	// ENABLE_V6_EGRESS turned off: the rule goes, the foreign one stays.
	cfg.V6Egress = false
	h, _ = node.host(t, cfg)
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Equal(t, forwardPolicy+foreignV6, node.forward(t, "ip6tables"))

	// V6Egress means nothing in IPv6 mode.
	cfg = v6Config()
	cfg.V6Egress = true
	h, _ = node.host(t, cfg)
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Equal(t, forwardPolicy+foreignV6, node.forward(t, "ip6tables"))
	assert.Equal(t, forwardPolicy+rejectV4, node.forward(t, "iptables"))
}

var eni1v6 = ENI{
	MAC:          eni1MAC,
	DeviceNumber: 2,
	PrimaryIP:    netip.MustParseAddr("2001:db8:1::20"),
	SubnetCIDR:   netip.MustParsePrefix("2001:db8:1::/64"),
}

func TestSetupIPv6ENINetwork(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	// No duplicate address detection: addresses are usable at once, so the
	// kernel's routes do not change under the comparisons below.
	node.exec(t, "sysctl", "-q", "-w", "net.ipv6.conf.eth1.accept_dad=0")
	node.ip(t, "link", "set", "eth1", "up")
	node.ip(t, "-6", "addr", "add", "2001:db8:1::99/64", "dev", "eth1")
	node.ip(t, "-6", "route", "add", "2001:db8:5::/64", "dev", "eth1", "table", "3")
	h, _ := node.host(t, v6Config())

	require.NoError(t, h.SetupENINetwork(ctx, eni1v6))
	eth1 := node.link(t, "eth1")
	assert.Equal(t, 9001, eth1.Attrs().MTU)
	addrs, err := node.nl.AddrList(eth1, netlink.FAMILY_V6)
	require.NoError(t, err)
	var global []string
	for _, a := range addrs {
		if a.Scope == int(netlink.SCOPE_UNIVERSE) {
			global = append(global, a.IPNet.String())
		}
	}
	assert.Equal(t, []string{"2001:db8:1::20/64"}, global)
	assert.Equal(t, []string{"::/0 via fe80:ec2::1 dev eth1 scope 0", "fe80:ec2::1/128 dev eth1 scope 0"}, node.routes6In(t, 3))
	assert.NotContains(t, node.ip(t, "-6", "route", "show", "table", "main"), "2001:db8:1::/64")
	assert.Equal(t, []string{"from 2001:db8:1::20/128 lookup 3"}, node.rules6At(t, FromENIPrimaryIPRulePriority))
	assert.Contains(t, node.ip(t, "-6", "rule"), "32765:\tfrom 2001:db8:1::20 lookup 3")
	assert.Empty(t, node.rulesAt(t, FromENIPrimaryIPRulePriority))

	state := func() string {
		return strings.Join([]string{node.ip(t, "-6", "rule"), node.ip(t, "-6", "route", "show", "table", "all", "dev", "eth1"), node.ip(t, "-6", "addr", "show", "dev", "eth1")}, "\n")
	}
	before := state()
	require.NoError(t, h.SetupENINetwork(ctx, eni1v6))
	assert.Equal(t, before, state(), "a second setup changes nothing")

	require.NoError(t, h.TeardownENINetwork(ctx, eni1v6.PrimaryIP))
	assert.Empty(t, node.rules6At(t, FromENIPrimaryIPRulePriority))
	require.NoError(t, h.TeardownENINetwork(ctx, eni1v6.PrimaryIP), "teardown is idempotent")
}

func TestIPv6ENIValidate(t *testing.T) {
	assert.NoError(t, eni1v6.validate())
	for name, f := range map[string]func(*ENI){
		"v4 subnet":   func(e *ENI) { e.SubnetCIDR = netip.MustParsePrefix("10.0.1.0/24") },
		"no subnet":   func(e *ENI) { e.SubnetCIDR = netip.Prefix{} },
		"outside":     func(e *ENI) { e.PrimaryIP = netip.MustParseAddr("2001:db8:2::20") },
		"link-local":  func(e *ENI) { e.PrimaryIP = netip.MustParseAddr("fe80::20") },
		"zoned":       func(e *ENI) { e.PrimaryIP = netip.MustParseAddr("2001:db8:1::20%eth1") },
		"4in6":        func(e *ENI) { e.PrimaryIP = netip.MustParseAddr("::ffff:10.0.1.20") },
		"unspecified": func(e *ENI) { e.PrimaryIP = netip.Addr{} },
	} {
		e := eni1v6
		f(&e)
		assert.Error(t, e.validate(), name)
	}
}

func TestEgressRejectRuleSpelling(t *testing.T) {
	assert.Equal(t, "fd00::ac:0/118", EgressV6Range.String())
	assert.Equal(t, ruleSpec{"-d", "169.254.172.0/22", "-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
		"Block Node Local Pod access via IPv4", "-j", "REJECT", "--reject-with", "icmp-port-unreachable"},
		egressRejectRule(EgressV4Range, commentV4Deny))
	assert.Equal(t, "icmp6-port-unreachable", egressRejectRule(EgressV6Range, commentV6Deny)[13])
}

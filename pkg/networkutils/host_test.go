package networkutils

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func baseConfig() Config {
	return Config{
		PrimaryMAC:           primaryMAC,
		PrimaryIP:            primaryIP,
		VPCCIDRs:             prefixes("10.0.0.0/16", "100.64.0.0/16"),
		ExcludeSNATCIDRs:     prefixes("172.16.0.0/12", "192.168.0.0/16"),
		RandomizeSNAT:        RandomizeSNATPRNG,
		NodePortSupport:      true,
		ConnmarkMark:         0x80,
		MTU:                  9001,
		VethPrefix:           "eni",
		ExternalServiceCIDRs: prefixes("198.51.100.0/24", "203.0.113.0/24"),
	}
}

// host opens a Host on the node namespace whose iptables calls are counted.
func (n *testNode) host(t *testing.T, cfg Config) (*Host, *countingIPT) {
	t.Helper()
	h, err := New(cfg, WithNetNS(n.path), WithLinkRetry(3, 20*time.Millisecond), withConnmarkBackend(BackendIPTables))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Close()) })
	c := &countingIPT{ipTables: h.ipt}
	h.ipt = c
	return h, c
}

const natHeader = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
`

const mangleHeader = `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
`

// The full layout for baseConfig.
const wantBaseNAT = natHeader + `:AWS-CONNMARK-CHAIN-0 - [0:0]
:AWS-SNAT-CHAIN-0 - [0:0]
-A PREROUTING -i eni+ -m comment --comment "AWS, outbound connections" -j AWS-CONNMARK-CHAIN-0
-A PREROUTING -m comment --comment "AWS, CONNMARK" -j CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80
-A POSTROUTING -m comment --comment "AWS SNAT CHAIN" -j AWS-SNAT-CHAIN-0
-A AWS-CONNMARK-CHAIN-0 -d 10.0.0.0/16 -m comment --comment "AWS CONNMARK CHAIN" -j RETURN
-A AWS-CONNMARK-CHAIN-0 -d 100.64.0.0/16 -m comment --comment "AWS CONNMARK CHAIN" -j RETURN
-A AWS-CONNMARK-CHAIN-0 -d 172.16.0.0/12 -m comment --comment "AWS CONNMARK CHAIN" -j RETURN
-A AWS-CONNMARK-CHAIN-0 -d 192.168.0.0/16 -m comment --comment "AWS CONNMARK CHAIN" -j RETURN
-A AWS-CONNMARK-CHAIN-0 -m comment --comment "AWS, CONNMARK" -j CONNMARK --set-xmark 0x80/0x80
-A AWS-SNAT-CHAIN-0 -d 10.0.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j RETURN
-A AWS-SNAT-CHAIN-0 -d 100.64.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j RETURN
-A AWS-SNAT-CHAIN-0 -d 172.16.0.0/12 -m comment --comment "AWS SNAT CHAIN EXCLUSION" -j RETURN
-A AWS-SNAT-CHAIN-0 -d 192.168.0.0/16 -m comment --comment "AWS SNAT CHAIN EXCLUSION" -j RETURN
-A AWS-SNAT-CHAIN-0 ! -o vlan+ -m comment --comment "AWS, SNAT" -m addrtype ! --dst-type LOCAL -j SNAT --to-source 10.0.0.10 --random-fully
COMMIT
`

const wantBaseMangle = mangleHeader + `-A PREROUTING -i eth0 -m comment --comment "AWS, primary ENI" -m addrtype --dst-type LOCAL --limit-iface-in -j CONNMARK --set-xmark 0x80/0x80
-A PREROUTING -i eni+ -m comment --comment "AWS, primary ENI" -j CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80
-A PREROUTING -i vlan+ -m comment --comment "AWS, primary ENI" -j CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80
COMMIT
`

func TestSetupHostAndENINetwork(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, ipt := node.host(t, baseConfig())

	start := time.Now()
	require.NoError(t, h.SetupHostNetwork(ctx))
	require.NoError(t, h.SetupENINetwork(ctx, eni1))
	t.Logf("first SetupHostNetwork+SetupENINetwork: %v, %d iptables writes", time.Since(start), ipt.writes.Load())

	// Links.
	assert.Equal(t, 9001, node.link(t, "eth0").Attrs().MTU)
	eth1 := node.link(t, "eth1")
	assert.Equal(t, 9001, eth1.Attrs().MTU)
	assert.NotZero(t, eth1.Attrs().RawFlags&1, "eth1 is up") // IFF_UP
	addrs, err := node.nl.AddrList(eth1, netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, addrs, 1)
	assert.Equal(t, "10.0.1.20/24", addrs[0].IPNet.String())

	// Rules.
	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rulesAt(t, 1024))
	assert.Equal(t, []string{"to 198.51.100.0/24 lookup 254", "to 203.0.113.0/24 lookup 254"}, node.rulesAt(t, 1535))
	assert.Equal(t, []string{"from 10.0.1.20/32 lookup 3"}, node.rulesAt(t, 32765))

	// Routes: the ENI table, and no subnet route for eth1 in main.
	assert.Equal(t, []string{"0.0.0.0/0 via 10.0.1.1 dev eth1 scope 0", "10.0.1.1/32 dev eth1 scope 253"}, node.routesIn(t, 3))
	assert.Equal(t, []string{"0.0.0.0/0 via 10.0.0.1 dev eth0 scope 0", "10.0.0.0/24 dev eth0 scope 253"}, node.routesIn(t, 254))

	// iptables.
	assert.Equal(t, wantBaseNAT, node.save(t, "nat"))
	assert.Equal(t, wantBaseMangle, node.save(t, "mangle"))

	// A second run changes nothing and writes nothing.
	before := node.state(t)
	ipt.writes.Store(0)
	start = time.Now()
	require.NoError(t, h.SetupHostNetwork(ctx))
	require.NoError(t, h.SetupENINetwork(ctx, eni1))
	require.NoError(t, h.CleanUpStaleAWSChains(ctx))
	t.Logf("second run: %v", time.Since(start))
	assert.Zero(t, ipt.writes.Load(), "iptables writes on the second run")
	assert.Equal(t, before, node.state(t))

	// Freeing the ENI removes its rule only.
	require.NoError(t, h.TeardownENINetwork(ctx, eni1.PrimaryIP))
	assert.Empty(t, node.rulesAt(t, 32765))
	assert.Len(t, node.rulesAt(t, 1024), 1)
	require.NoError(t, h.TeardownENINetwork(ctx, eni1.PrimaryIP), "teardown is idempotent")
}

func TestConfigChangesRemoveStaleRules(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	setup := func(cfg Config) {
		t.Helper()
		h, _ := node.host(t, cfg)
		require.NoError(t, h.SetupHostNetwork(ctx))
	}
	setup(baseConfig())
	require.Equal(t, wantBaseNAT, node.save(t, "nat"))

	// One exclusion and one external service CIDR dropped, no randomisation.
	cfg := baseConfig()
	cfg.ExcludeSNATCIDRs = prefixes("172.16.0.0/12")
	cfg.ExternalServiceCIDRs = prefixes("203.0.113.0/24")
	cfg.RandomizeSNAT = RandomizeSNATNone
	setup(cfg)
	nat := node.save(t, "nat")
	assert.NotContains(t, nat, "192.168.0.0/16")
	assert.Contains(t, nat, "-A AWS-SNAT-CHAIN-0 -d 172.16.0.0/12 -m comment --comment \"AWS SNAT CHAIN EXCLUSION\" -j RETURN\n")
	assert.Contains(t, nat, "-A AWS-CONNMARK-CHAIN-0 -d 172.16.0.0/12 -m comment --comment \"AWS CONNMARK CHAIN\" -j RETURN\n")
	assert.True(t, strings.HasSuffix(nat, "-A AWS-SNAT-CHAIN-0 ! -o vlan+ -m comment --comment \"AWS, SNAT\" -m addrtype ! --dst-type LOCAL -j SNAT --to-source 10.0.0.10\nCOMMIT\n"), nat)
	assert.Equal(t, 1, strings.Count(nat, "-j SNAT"))
	assert.Equal(t, []string{"to 203.0.113.0/24 lookup 254"}, node.rulesAt(t, 1535))

	// hashrandom.
	cfg.RandomizeSNAT = RandomizeSNATHashRandom
	setup(cfg)
	nat = node.save(t, "nat")
	assert.Contains(t, nat, "-j SNAT --to-source 10.0.0.10 --random\n")
	assert.Equal(t, 1, strings.Count(nat, "-j SNAT"))

	// External SNAT with node-port support: no SNAT and no pod connmark,
	// the primary-ENI connmark rules and the fwmark rule stay.
	cfg.ExternalSNAT = true
	setup(cfg)
	assert.Equal(t, natHeader+"COMMIT\n", node.save(t, "nat"))
	assert.Equal(t, wantBaseMangle, node.save(t, "mangle"))
	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rulesAt(t, 1024))

	// External SNAT without node-port support: nothing of ours is left.
	cfg.NodePortSupport = false
	cfg.ExternalServiceCIDRs = nil
	setup(cfg)
	assert.Equal(t, natHeader+"COMMIT\n", node.save(t, "nat"))
	assert.Equal(t, mangleHeader+"COMMIT\n", node.save(t, "mangle"))
	assert.Empty(t, node.rulesAt(t, 1024))
	assert.Empty(t, node.rulesAt(t, 1535))

	// Node-port support off, SNAT on: only the pod-veth restore rule in mangle.
	cfg = baseConfig()
	cfg.NodePortSupport = false
	setup(cfg)
	assert.Equal(t, mangleHeader+`-A PREROUTING -i eni+ -m comment --comment "AWS, primary ENI" -j CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80
COMMIT
`, node.save(t, "mangle"))
	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rulesAt(t, 1024))

	// Back to the base configuration: the original layout.
	setup(baseConfig())
	assert.Equal(t, wantBaseNAT, node.save(t, "nat"))
	assert.Equal(t, wantBaseMangle, node.save(t, "mangle"))
}

func TestConnmarkAndVethPrefixChange(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))

	cfg := baseConfig()
	cfg.ConnmarkMark = 0x100000
	cfg.VethPrefix = "cali"
	h, _ = node.host(t, cfg)
	require.NoError(t, h.SetupHostNetwork(ctx))
	nat, mangle := node.save(t, "nat"), node.save(t, "mangle")
	assert.NotContains(t, nat+mangle, "0x80")
	assert.NotContains(t, nat+mangle, "eni+")
	assert.Contains(t, nat, "-A PREROUTING -i cali+ -m comment --comment \"AWS, outbound connections\" -j AWS-CONNMARK-CHAIN-0\n"+
		"-A PREROUTING -m comment --comment \"AWS, CONNMARK\" -j CONNMARK --restore-mark --nfmask 0x100000 --ctmask 0x100000\n")
	assert.Contains(t, nat, "-j CONNMARK --set-xmark 0x100000/0x100000\n")
	assert.Contains(t, mangle, "-A PREROUTING -i cali+ -m comment --comment \"AWS, primary ENI\" -j CONNMARK --restore-mark --nfmask 0x100000 --ctmask 0x100000\n")
	assert.Equal(t, []string{"fwmark 0x100000/0x100000 lookup 254"}, node.rulesAt(t, 1024))
}

func TestUpdateSNATRulesFollowsVPCCIDRs(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	cfg := baseConfig()
	cfg.ExcludeSNATCIDRs = nil
	h, ipt := node.host(t, cfg)
	require.NoError(t, h.SetupHostNetwork(ctx))

	require.NoError(t, h.UpdateSNATRules(ctx, prefixes("10.0.0.0/16", "10.1.0.0/16", "fd00::/56")))
	nat := node.save(t, "nat")
	assert.NotContains(t, nat, "100.64.0.0/16")
	assert.NotContains(t, nat, "fd00")
	for _, chain := range []string{"AWS-SNAT-CHAIN-0", "AWS-CONNMARK-CHAIN-0"} {
		assert.Contains(t, nat, "-A "+chain+" -d 10.1.0.0/16 ")
		assert.Equal(t, 2, strings.Count(nat, "-A "+chain+" -d "), chain)
	}
	assert.True(t, strings.HasSuffix(nat, "--to-source 10.0.0.10 --random-fully\nCOMMIT\n"), "SNAT rule stays last:\n%s", nat)

	ipt.writes.Store(0)
	require.NoError(t, h.UpdateSNATRules(ctx, prefixes("10.1.0.0/16", "10.0.0.0/16")))
	assert.Zero(t, ipt.writes.Load(), "same CIDR set in another order changes nothing")
}

func TestExcludeEverything(t *testing.T) {
	node := newTestNode(t)
	cfg := baseConfig()
	cfg.ExcludeSNATCIDRs = prefixes("0.0.0.0/0")
	h, _ := node.host(t, cfg)
	require.NoError(t, h.SetupHostNetwork(context.Background()))
	nat := node.save(t, "nat")
	assert.Contains(t, nat, "-A AWS-SNAT-CHAIN-0 -m comment --comment \"AWS SNAT CHAIN EXCLUSION\" -j RETURN\n")
	assert.Contains(t, nat, "-A AWS-CONNMARK-CHAIN-0 -m comment --comment \"AWS CONNMARK CHAIN\" -j RETURN\n")
}

func TestRandomFullyFallback(t *testing.T) {
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())
	h.ipt = noRandomFully{h.ipt}
	require.NoError(t, h.SetupHostNetwork(context.Background()))
	nat := node.save(t, "nat")
	assert.Contains(t, nat, "-j SNAT --to-source 10.0.0.10 --random\n")
	assert.NotContains(t, nat, "--random-fully")
}

func TestForeignAndStaleRules(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)

	// What an older agent, another tool and a previous configuration left.
	node.iptables(t, "-t", "nat", "-N", "AWS-SNAT-CHAIN-0")
	node.iptables(t, "-t", "nat", "-N", "AWS-SNAT-CHAIN-1")
	node.iptables(t, "-t", "nat", "-N", "AWS-CONNMARK-CHAIN-0")
	node.iptables(t, "-t", "nat", "-A", "AWS-SNAT-CHAIN-0", "-d", "10.0.0.0/16", "-m", "comment", "--comment", "AWS SNAT CHAIN", "-j", "AWS-SNAT-CHAIN-1")
	node.iptables(t, "-t", "nat", "-A", "AWS-SNAT-CHAIN-0", "-j", "SNAT", "--to-source", "10.0.0.99")
	node.iptables(t, "-t", "nat", "-A", "AWS-SNAT-CHAIN-0", "-d", "10.99.0.0/16", "-m", "comment", "--comment", "AWS SNAT CHAIN", "-j", "RETURN")
	node.iptables(t, "-t", "nat", "-A", "AWS-SNAT-CHAIN-1", "-j", "RETURN")
	node.iptables(t, "-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "AWS SNAT CHAIN", "-j", "AWS-SNAT-CHAIN-0")
	node.iptables(t, "-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "AWS SNAT CHAIN", "-j", "AWS-SNAT-CHAIN-0")
	node.iptables(t, "-t", "nat", "-A", "POSTROUTING", "-s", "10.9.0.0/16", "-m", "comment", "--comment", "someone else", "-j", "MASQUERADE")
	node.iptables(t, "-t", "nat", "-A", "PREROUTING", "-m", "comment", "--comment", "AWS, CONNMARK", "-j", "CONNMARK", "--restore-mark", "--mask", "0x80")
	node.iptables(t, "-t", "nat", "-A", "PREROUTING", "-i", "eni+", "-m", "comment", "--comment", "AWS, outbound connections", "-m", "state", "--state", "NEW", "-j", "AWS-CONNMARK-CHAIN-0")
	node.iptables(t, "-t", "mangle", "-A", "PREROUTING", "-i", "eth9", "-m", "comment", "--comment", "AWS, primary ENI", "-j", "CONNMARK", "--restore-mark", "--mask", "0x80")
	node.iptables(t, "-t", "mangle", "-A", "PREROUTING", "-i", "eth0", "-j", "MARK", "--set-mark", "0x1")
	node.ip(t, "rule", "add", "fwmark", "0x40/0x40", "lookup", "main", "priority", "1024")
	node.ip(t, "rule", "add", "fwmark", "0x80/0x80", "lookup", "main", "priority", "1024")
	node.ip(t, "rule", "add", "fwmark", "0x80", "lookup", "main", "priority", "1024")
	node.ip(t, "rule", "add", "to", "10.9.9.0/24", "lookup", "main", "priority", "1535")
	node.ip(t, "rule", "add", "to", "10.9.9.0/24", "lookup", "100", "priority", "1535")
	node.ip(t, "rule", "add", "from", "10.0.1.20", "lookup", "7", "priority", "32765")
	node.ip(t, "rule", "add", "from", "10.0.1.20", "lookup", "3", "priority", "32765")
	node.ip(t, "rule", "add", "from", "10.0.1.20", "iif", "eth1", "lookup", "3", "priority", "32765")

	h, _ := node.host(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))
	require.NoError(t, h.SetupENINetwork(ctx, eni1))

	nat := node.save(t, "nat")
	// Ours as designed; the other tool's rule kept; AWS-SNAT-CHAIN-1 emptied.
	want := strings.Replace(wantBaseNAT, ":AWS-SNAT-CHAIN-0 - [0:0]\n", ":AWS-SNAT-CHAIN-0 - [0:0]\n:AWS-SNAT-CHAIN-1 - [0:0]\n", 1)
	want = strings.Replace(want, "-A POSTROUTING -m comment --comment \"AWS SNAT CHAIN\" -j AWS-SNAT-CHAIN-0\n",
		"-A POSTROUTING -m comment --comment \"AWS SNAT CHAIN\" -j AWS-SNAT-CHAIN-0\n"+
			"-A POSTROUTING -s 10.9.0.0/16 -m comment --comment \"someone else\" -j MASQUERADE\n", 1)
	assert.Equal(t, want, nat)
	mangle := node.save(t, "mangle")
	foreign := "-A PREROUTING -i eth0 -j MARK --set-xmark 0x1/0xffffffff\n"
	assert.Contains(t, mangle, foreign, "foreign mangle rule kept")
	assert.Equal(t, wantBaseMangle, strings.Replace(mangle, foreign, "", 1))

	assert.Equal(t, []string{"fwmark 0x80/0x80 lookup 254"}, node.rulesAt(t, 1024))
	assert.Equal(t, []string{"to 10.9.9.0/24 lookup 100", "to 198.51.100.0/24 lookup 254", "to 203.0.113.0/24 lookup 254"}, node.rulesAt(t, 1535))
	assert.Equal(t, []string{"from 10.0.1.20/32 lookup 3"}, node.rulesAt(t, 32765))
}

func TestCleanUpStaleAWSChains(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))

	// Without AWS-SNAT-CHAIN-1, other numbered chains are left alone.
	node.iptables(t, "-t", "nat", "-N", "AWS-CONNMARK-CHAIN-1")
	require.NoError(t, h.CleanUpStaleAWSChains(ctx))
	assert.Contains(t, node.save(t, "nat"), ":AWS-CONNMARK-CHAIN-1 - [0:0]")

	// The old multi-chain layout, referenced from our chain and from nat
	// PREROUTING.
	for _, c := range []string{"AWS-SNAT-CHAIN-1", "AWS-SNAT-CHAIN-2", "AWS-CONNMARK-CHAIN-2"} {
		node.iptables(t, "-t", "nat", "-N", c)
	}
	node.iptables(t, "-t", "nat", "-A", "AWS-SNAT-CHAIN-1", "-j", "AWS-SNAT-CHAIN-2")
	node.iptables(t, "-t", "nat", "-A", "AWS-SNAT-CHAIN-2", "-j", "RETURN")
	node.iptables(t, "-t", "nat", "-I", "AWS-SNAT-CHAIN-0", "1", "-d", "10.5.0.0/16", "-j", "AWS-SNAT-CHAIN-1")
	node.iptables(t, "-t", "nat", "-A", "PREROUTING", "-i", "eni+", "-j", "AWS-CONNMARK-CHAIN-1")
	node.iptables(t, "-t", "nat", "-A", "AWS-CONNMARK-CHAIN-1", "-j", "AWS-CONNMARK-CHAIN-2")

	require.NoError(t, h.CleanUpStaleAWSChains(ctx))
	assert.Equal(t, wantBaseNAT, node.save(t, "nat"))
	require.NoError(t, h.CleanUpStaleAWSChains(ctx))
	assert.Equal(t, wantBaseNAT, node.save(t, "nat"))
}

func TestSetupENINetworkReconcilesAddressesAndRoutes(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())

	node.ip(t, "link", "set", "eth1", "up")
	node.ip(t, "addr", "add", "10.0.1.99/24", "dev", "eth1")
	node.ip(t, "addr", "add", "10.0.1.20/16", "dev", "eth1")
	node.ip(t, "route", "add", "10.0.1.1/32", "dev", "eth1", "scope", "link", "table", "3")
	node.ip(t, "route", "add", "10.50.0.0/16", "via", "10.0.1.1", "dev", "eth1", "table", "3")
	node.ip(t, "route", "add", "10.0.9.1/32", "dev", "eth1", "scope", "link", "table", "3")
	node.ip(t, "route", "add", "default", "via", "10.0.9.1", "dev", "eth1", "table", "3")

	require.NoError(t, h.SetupENINetwork(ctx, eni1))
	addrs, err := node.nl.AddrList(node.link(t, "eth1"), netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, addrs, 1)
	assert.Equal(t, "10.0.1.20/24", addrs[0].IPNet.String())
	assert.Equal(t, []string{"0.0.0.0/0 via 10.0.1.1 dev eth1 scope 0", "10.0.1.1/32 dev eth1 scope 253"}, node.routesIn(t, 3))
	assert.NotContains(t, node.ip(t, "route", "show", "table", "main"), "10.0.1.0/24")
	assert.NotContains(t, node.ip(t, "route", "show", "table", "main"), "10.0.0.0/16 dev eth1")
	assert.Equal(t, []string{"from 10.0.1.20/32 lookup 3"}, node.rulesAt(t, 32765))
}

func TestSetupENINetworkErrors(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())

	missing := eni1
	missing.MAC = "02:00:00:00:09:09"
	start := time.Now()
	err := h.SetupENINetwork(ctx, missing)
	assert.ErrorIs(t, err, ErrLinkNotFound)
	assert.Less(t, time.Since(start), 2*time.Second)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = h.SetupENINetwork(cctx, missing)
	assert.True(t, errors.Is(err, context.Canceled) || errors.Is(err, ErrLinkNotFound), "%v", err)

	bad := eni1
	bad.DeviceNumber = 0
	assert.Error(t, h.SetupENINetwork(ctx, bad))
	bad = eni1
	bad.PrimaryIP = netip.MustParseAddr("10.0.2.5")
	assert.Error(t, h.SetupENINetwork(ctx, bad))
	assert.Error(t, h.TeardownENINetwork(ctx, netip.Addr{}))

	_, err = New(baseConfig(), WithNetNS("/run/netns/does-not-exist-networkutils"))
	assert.Error(t, err)
}

func TestDropsNFTablesConnmarkTable(t *testing.T) {
	node := newTestNode(t)
	if _, found, _ := runNFT(nil, "--version"); !found {
		t.Skip("nft tool not installed")
	}
	node.exec(t, "nft", "add", "table", "ip", "aws-cni")
	node.exec(t, "nft", "add", "table", "ip", "keep-me")
	h, _ := node.host(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(context.Background()))
	tables := node.exec(t, "nft", "list", "tables", "ip")
	assert.NotContains(t, tables, "aws-cni")
	assert.Contains(t, tables, "keep-me")
}

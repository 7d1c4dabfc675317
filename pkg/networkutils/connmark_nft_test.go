package networkutils

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nftHost opens a Host on the node namespace with the nftables connmark
// backend.
func (n *testNode) nftHost(t *testing.T, cfg Config) (*Host, *countingIPT) {
	t.Helper()
	requireNFT(t)
	h, err := New(cfg, WithNetNS(n.path), WithLinkRetry(3, 20*time.Millisecond), withConnmarkBackend(BackendNFTables))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Close()) })
	c := &countingIPT{ipTables: h.ipt}
	h.ipt = c
	return h, c
}

func requireNFT(t *testing.T) {
	t.Helper()
	if _, err := binaryPath("nft"); err != nil {
		t.Skip("needs the nft tool to read the table back (apt-get install -y nftables)")
	}
}

var nftHandles = regexp.MustCompile(` # handle [0-9]+`)

// nftTableListing is `nft list table ip aws-cni` inside the node, counters
// zeroed; "" when the table is missing.
func (n *testNode) nftTableListing(t *testing.T) string {
	t.Helper()
	if !hasNFTTable(n.exec(t, "nft", "list", "tables", "ip"), "ip", "aws-cni") {
		return ""
	}
	return nftCounters.ReplaceAllString(n.exec(t, "nft", "list", "table", "ip", "aws-cni"), "packets 0 bytes 0")
}

// nftHandleListing lists the table with rule handles, to tell a kept rule
// from a re-created one.
func (n *testNode) nftHandleListing(t *testing.T) string {
	t.Helper()
	return nftCounters.ReplaceAllString(n.exec(t, "nft", "-a", "list", "table", "ip", "aws-cni"), "packets 0 bytes 0")
}

const wantNFTTable = `table ip aws-cni {
	chain snat-mark {
		ip daddr 10.0.0.0/16 counter packets 0 bytes 0 return
		ip daddr 100.64.0.0/16 counter packets 0 bytes 0 return
		ip daddr 172.16.0.0/12 counter packets 0 bytes 0 return
		ip daddr 192.168.0.0/16 counter packets 0 bytes 0 return
		counter packets 0 bytes 0 ct mark set ct mark | 0x00000080
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat + 10; policy accept;
		fib daddr type local return
		iifname "eni*" counter packets 0 bytes 0 jump snat-mark
		counter packets 0 bytes 0 meta mark set ct mark & 0x00000080
	}
}
`

func TestNFTConnmarkSetupProgramsTheTableAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.nftHost(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))
	assert.Equal(t, wantNFTTable, node.nftTableListing(t))
	assert.NotContains(t, node.save(t, "nat"), connmarkChain, "the nftables backend programs no iptables connmark rule")

	before := node.nftHandleListing(t)
	require.NoError(t, h.UpdateSNATRules(ctx, baseConfig().VPCCIDRs))
	assert.Equal(t, before, node.nftHandleListing(t), "a second setup changes nothing")

	h2, _ := node.nftHost(t, baseConfig())
	require.NoError(t, h2.SetupHostNetwork(ctx))
	assert.Equal(t, before, node.nftHandleListing(t), "a restarted agent changes nothing")
}

func TestNFTConnmarkFollowsExemptCIDRs(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	cfg := baseConfig()
	cfg.ExcludeSNATCIDRs = prefixes("0.0.0.0/0")
	h, _ := node.nftHost(t, cfg)
	require.NoError(t, h.SetupHostNetwork(ctx))
	kept := handleOf(t, node.nftHandleListing(t), "ip daddr 10.0.0.0/16 ")

	require.NoError(t, h.UpdateSNATRules(ctx, prefixes("10.0.0.0/16", "10.1.0.0/32")))
	listing := node.nftTableListing(t)
	assert.Contains(t, listing, "\t\tip daddr 10.1.0.0 counter packets 0 bytes 0 return\n\t\tip daddr 10.0.0.0/16 counter packets 0 bytes 0 return\n",
		"a new CIDR is inserted at the top")
	assert.Contains(t, listing, "\t\tip daddr 0.0.0.0/0 counter packets 0 bytes 0 return\n")
	assert.NotContains(t, listing, "100.64.0.0/16", "a CIDR no longer wanted is deleted")
	assert.True(t, strings.Contains(listing, "return\n\t\tcounter packets 0 bytes 0 ct mark set ct mark | 0x00000080\n\t}"), "set-mark stays last:\n%s", listing)
	assert.Equal(t, kept, handleOf(t, node.nftHandleListing(t), "ip daddr 10.0.0.0/16 "), "a CIDR still wanted keeps its rule")
}

func TestNFTConnmarkRepairsTheBaseChain(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage []string
	}{
		{name: "a wrong-priority chain is recreated", damage: []string{
			"delete table ip aws-cni",
			"add table ip aws-cni",
			"add chain ip aws-cni snat-mark",
			"add chain ip aws-cni nat-prerouting { type nat hook prerouting priority -100; policy accept; }",
			"add rule ip aws-cni nat-prerouting fib daddr type local return",
			"add rule ip aws-cni nat-prerouting iifname \"eni*\" counter jump snat-mark",
			"add rule ip aws-cni nat-prerouting counter meta mark set ct mark & 0x80",
		}},
		{name: "an extra rule is deleted", damage: []string{
			"add rule ip aws-cni nat-prerouting counter accept",
		}},
		{name: "an unknown rule in snat-mark is deleted", damage: []string{
			"insert rule ip aws-cni snat-mark ip daddr 8.8.8.8 counter return",
			"add rule ip aws-cni snat-mark ip daddr 10.0.0.0/16 counter return",
			"add rule ip aws-cni snat-mark ip daddr 10.9.9.9 counter return",
			"add rule ip aws-cni snat-mark ip daddr 0.0.0.0/0 counter return",
		}},
		{name: "rules out of order are refilled", damage: []string{
			"flush chain ip aws-cni nat-prerouting",
			"add rule ip aws-cni nat-prerouting iifname \"eni*\" counter jump snat-mark",
			"add rule ip aws-cni nat-prerouting fib daddr type local return",
			"add rule ip aws-cni nat-prerouting counter meta mark set ct mark & 0x80",
		}},
		{name: "a missing set-mark rule is appended", damage: []string{
			"flush chain ip aws-cni snat-mark",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newTestNode(t)
			h, _ := node.nftHost(t, baseConfig())
			require.NoError(t, h.SetupHostNetwork(ctx))
			for _, cmd := range tc.damage {
				node.exec(t, "nft", cmd)
			}
			require.NotEqual(t, wantNFTTable, node.nftTableListing(t))
			require.NoError(t, h.UpdateSNATRules(ctx, baseConfig().VPCCIDRs))
			assert.Equal(t, wantNFTTable, node.nftTableListing(t))
		})
	}
}

func TestNFTConnmarkExternalSNATDeletesTheTable(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.nftHost(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))
	require.NotEmpty(t, node.nftTableListing(t))

	cfg := baseConfig()
	cfg.ExternalSNAT = true
	ext, _ := node.nftHost(t, cfg)
	require.NoError(t, ext.UpdateSNATRules(ctx, cfg.VPCCIDRs))
	assert.Empty(t, node.nftTableListing(t))
	require.NoError(t, ext.UpdateSNATRules(ctx, cfg.VPCCIDRs), "nothing to delete is fine")
}

func TestSwitchingConnmarkBackends(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	ipt, _ := node.host(t, baseConfig())
	require.NoError(t, ipt.SetupHostNetwork(ctx))
	require.Contains(t, node.save(t, "nat"), connmarkChain)

	nft, _ := node.nftHost(t, baseConfig())
	require.NoError(t, nft.SetupHostNetwork(ctx))
	nat := node.save(t, "nat")
	for _, gone := range []string{connmarkChain, commentOutbound, commentConnmark} {
		assert.NotContains(t, nat, gone, "the nftables backend removes the iptables connmark rules")
	}
	assert.Contains(t, nat, "AWS-SNAT-CHAIN-0", "SNAT rules stay")
	assert.Equal(t, wantNFTTable, node.nftTableListing(t))

	back, _ := node.host(t, baseConfig())
	require.NoError(t, back.SetupHostNetwork(ctx))
	assert.Empty(t, node.nftTableListing(t), "the iptables backend deletes the nftables table")
	assert.Contains(t, node.save(t, "nat"), connmarkChain)
}

// handleOf finds the handle of the listing's line that contains s.
func handleOf(t *testing.T, listing, s string) string {
	t.Helper()
	for _, line := range strings.Split(listing, "\n") {
		if strings.Contains(line, s) {
			if m := nftHandles.FindString(line); m != "" {
				return m
			}
		}
	}
	t.Fatalf("no rule with %q in\n%s", s, listing)
	return ""
}

// The rules we program are the ones the nft tool writes for the same
// text, so a table written by nft (upstream's layout) is kept as it is.
func TestNFTConnmarkKeepsTheSameTableWrittenByNFT(t *testing.T) {
	node := newTestNode(t)
	requireNFT(t)
	for _, cmd := range []string{
		"add table ip aws-cni",
		"add chain ip aws-cni snat-mark",
		"add chain ip aws-cni nat-prerouting { type nat hook prerouting priority -90; policy accept; }",
		"add rule ip aws-cni nat-prerouting fib daddr type local return",
		"add rule ip aws-cni nat-prerouting iifname \"eni*\" counter jump snat-mark",
		"add rule ip aws-cni nat-prerouting counter meta mark set ct mark & 0x80",
		"add rule ip aws-cni snat-mark ip daddr 10.0.0.0/16 counter return",
		"add rule ip aws-cni snat-mark ip daddr 10.9.9.9 counter return",
		"add rule ip aws-cni snat-mark ip daddr 0.0.0.0/0 counter return",
		"add rule ip aws-cni snat-mark ip daddr 100.64.0.0/16 counter return",
		"add rule ip aws-cni snat-mark ip daddr 172.16.0.0/12 counter return",
		"add rule ip aws-cni snat-mark ip daddr 192.168.0.0/16 counter return",
		"add rule ip aws-cni snat-mark counter ct mark set ct mark | 0x80",
	} {
		node.exec(t, "nft", cmd)
	}
	before := node.nftHandleListing(t)
	cfg := baseConfig()
	cfg.ExcludeSNATCIDRs = append(cfg.ExcludeSNATCIDRs, prefixes("10.9.9.9/32", "0.0.0.0/0")...)
	h, _ := node.nftHost(t, cfg)
	require.NoError(t, h.UpdateSNATRules(context.Background(), prefixes("10.0.0.0/16", "100.64.0.0/16", "172.16.0.0/12", "192.168.0.0/16")))
	assert.Equal(t, before, node.nftHandleListing(t))
}

// A node whose earlier agent ran iptables-legacy keeps its connmark rules
// in legacy's tables, which the kernel runs beside nf_tables: the nftables
// backend removes them there too.
func TestNFTConnmarkRemovesIptablesLegacyRules(t *testing.T) {
	if _, err := binaryPath("iptables-legacy"); err != nil {
		t.Skip("needs iptables-legacy (Debian's iptables package has it)")
	}
	node := newTestNode(t)
	for _, cmd := range [][]string{
		{"-t", "nat", "-N", connmarkChain},
		{"-t", "nat", "-A", connmarkChain, "-d", "10.0.0.0/16", "-m", "comment", "--comment", commentConnmarkChain, "-j", "RETURN"},
		{"-t", "nat", "-A", connmarkChain, "-m", "comment", "--comment", commentConnmark, "-j", "CONNMARK", "--set-xmark", "0x80/0x80"},
		{"-t", "nat", "-A", "PREROUTING", "-i", "eni+", "-m", "comment", "--comment", commentOutbound, "-j", connmarkChain},
		{"-t", "nat", "-A", "PREROUTING", "-m", "comment", "--comment", commentConnmark, "-j", "CONNMARK", "--restore-mark", "--mask", "0x80"},
	} {
		node.exec(t, append([]string{"iptables-legacy"}, cmd...)...)
	}
	h, _ := node.nftHost(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(context.Background()))
	legacy := node.exec(t, "iptables-legacy-save", "-t", "nat")
	for _, gone := range []string{connmarkChain, commentOutbound, commentConnmark} {
		assert.NotContains(t, legacy, gone, "iptables-legacy's nat table")
	}
	assert.Equal(t, wantNFTTable, node.nftTableListing(t))
}

// The iptables backend removes the nftables table over netlink: the
// image has no nft tool.
func TestIPTConnmarkRemovesTheNFTTableWithoutTheNFTTool(t *testing.T) {
	node := newTestNode(t)
	nft, _ := node.nftHost(t, baseConfig())
	require.NoError(t, nft.SetupHostNetwork(context.Background()))
	require.NotEmpty(t, node.nftTableListing(t))

	t.Setenv("PATH", t.TempDir()) // no nft (nor anything else) on PATH
	h, _ := node.host(t, baseConfig())
	h.dropNFTConnmarkTable()
	t.Setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
	assert.Empty(t, node.nftTableListing(t), "the table is gone")
}

// The table is ours alone: a chain of an earlier writer that could mark
// beside ours goes at the next reconcile.
func TestNFTConnmarkRemovesChainsNotItsOwn(t *testing.T) {
	node := newTestNode(t)
	h, _ := node.nftHost(t, baseConfig())
	ctx := context.Background()
	require.NoError(t, h.SetupHostNetwork(ctx))
	node.exec(t, "nft", "add chain ip aws-cni old-prerouting { type nat hook prerouting priority -100; policy accept; }")
	node.exec(t, "nft", "add rule ip aws-cni old-prerouting ct mark set ct mark | 0x80")
	h2, _ := node.nftHost(t, baseConfig())
	require.NoError(t, h2.SetupHostNetwork(ctx))
	assert.Equal(t, wantNFTTable, node.nftTableListing(t))
}

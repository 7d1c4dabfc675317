package networkutils

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

func TestSplitRuleLine(t *testing.T) {
	got, err := splitRuleLine(`-A AWS-SNAT-CHAIN-0 ! -o vlan+ -m comment --comment "AWS, SNAT" -m addrtype ! --dst-type LOCAL -j SNAT --to-source 10.0.0.10`)
	require.NoError(t, err)
	assert.Equal(t, []string{"-A", "AWS-SNAT-CHAIN-0", "!", "-o", "vlan+", "-m", "comment", "--comment", "AWS, SNAT",
		"-m", "addrtype", "!", "--dst-type", "LOCAL", "-j", "SNAT", "--to-source", "10.0.0.10"}, got)

	got, err = splitRuleLine(`-A X -m comment --comment "say \"hi\"" -j RETURN`)
	require.NoError(t, err)
	assert.Equal(t, []string{"-A", "X", "-m", "comment", "--comment", `say "hi"`, "-j", "RETURN"}, got)

	got, err = splitRuleLine(`-A X -m comment --comment "" -j RETURN`)
	require.NoError(t, err)
	assert.Equal(t, []string{"-A", "X", "-m", "comment", "--comment", "", "-j", "RETURN"}, got)

	_, err = splitRuleLine(`-A X --comment "open`)
	assert.Error(t, err)
}

func TestRuleSpecHelpers(t *testing.T) {
	r := ruleSpec{"-d", "10.0.0.0/16", "-m", "comment", "--comment", "AWS SNAT CHAIN", "-j", "RETURN"}
	assert.Equal(t, "AWS SNAT CHAIN", r.comment())
	assert.Equal(t, "RETURN", r.target())
	assert.Equal(t, `-d 10.0.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j RETURN`, r.String())
	assert.True(t, r.equal(append(ruleSpec{}, r...)))
	assert.False(t, r.equal(r[:4]))
	assert.Equal(t, "", ruleSpec{"-j", "ACCEPT"}.comment())
	assert.Equal(t, "AWS-SNAT-CHAIN-1", ruleSpec{"-g", "AWS-SNAT-CHAIN-1"}.target())
}

func TestSNATRandomArgs(t *testing.T) {
	assert.Equal(t, []string{"--random-fully"}, snatRandomArgs(RandomizeSNATPRNG, true))
	assert.Equal(t, []string{"--random"}, snatRandomArgs(RandomizeSNATPRNG, false))
	assert.Equal(t, []string{"--random"}, snatRandomArgs(RandomizeSNATHashRandom, true))
	assert.Nil(t, snatRandomArgs(RandomizeSNATNone, true))
}

func TestENIValidate(t *testing.T) {
	ok := eni1
	assert.NoError(t, ok.validate())
	for name, f := range map[string]func(*ENI){
		"device 0":         func(e *ENI) { e.DeviceNumber = 0 },
		"negative device":  func(e *ENI) { e.NetworkCard, e.DeviceNumber = 1, -1 },
		"negative card":    func(e *ENI) { e.NetworkCard = -1 },
		"ipv6 ip":          func(e *ENI) { e.PrimaryIP = netip.MustParseAddr("fd00::1") },
		"no subnet":        func(e *ENI) { e.SubnetCIDR = netip.Prefix{} },
		"ip outside":       func(e *ENI) { e.PrimaryIP = netip.MustParseAddr("10.9.9.9") },
		"subnet too small": func(e *ENI) { e.SubnetCIDR = netip.MustParsePrefix("10.0.1.20/32") },
	} {
		e := eni1
		f(&e)
		assert.Error(t, e.validate(), name)
	}
	onCard1 := eni1
	onCard1.NetworkCard, onCard1.DeviceNumber = 1, 0
	assert.NoError(t, onCard1.validate(), "device 0 of a card above 0 is a secondary ENI")
}

func TestHelpers(t *testing.T) {
	assert.Equal(t, "0x80", hexMark(0x80))
	assert.Equal(t, "0xffffffff", hexMark(0xffffffff))
	assert.Equal(t, ruleSpec{}, destMatch(netip.MustParsePrefix("0.0.0.0/0")))
	assert.Equal(t, ruleSpec{"-d", "10.0.0.0/8"}, destMatch(netip.MustParsePrefix("10.1.2.3/8")))
	assert.Equal(t, prefixes("10.0.0.0/8", "192.168.0.0/16"),
		ipv4Prefixes(prefixes("10.1.0.0/8", "fd00::/8", "10.0.0.0/8", "192.168.0.0/16")))

	p, ok := prefixOf(&net.IPNet{IP: net.ParseIP("10.0.1.20"), Mask: net.CIDRMask(32, 32)})
	assert.True(t, ok)
	assert.Equal(t, netip.MustParsePrefix("10.0.1.20/32"), p)
	_, ok = prefixOf(nil)
	assert.False(t, ok)
	assert.True(t, netEq(nil, nil))
	assert.True(t, netEq(&net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, ipNet(netip.MustParsePrefix("0.0.0.0/0"))))

	assert.True(t, hasNFTTable("table ip nat\ntable ip aws-cni\n", "ip", "aws-cni"))
	assert.False(t, hasNFTTable("table ip aws-cni-x\n", "ip", "aws-cni"))

	mask := uint32(0x80)
	w := newRule(netlink.FAMILY_V4, HostRulePriority, mainTable)
	w.Mark, w.Mask = 0x80, &mask
	listed := *w
	assert.True(t, sameRule(listed, w))
	listed.IifName = "eth0"
	assert.False(t, sameRule(listed, w))
}

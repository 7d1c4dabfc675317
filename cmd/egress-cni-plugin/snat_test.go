package main

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSNATFlag(t *testing.T) {
	for _, tc := range []struct {
		randomize string
		fully     bool
		want      string
	}{
		{"prng", true, "--random-fully"},
		{"", true, "--random-fully"},
		{"anything", true, "--random-fully"},
		{"prng", false, "--random"},
		{"hashrandom", true, "--random"},
		{"hashrandom", false, "--random"},
		{"none", true, ""},
		{"none", false, ""},
	} {
		assert.Equal(t, tc.want, snatFlag(tc.randomize, tc.fully), "%q fully=%v", tc.randomize, tc.fully)
	}
}

func TestSNATRules(t *testing.T) {
	c := `name: "aws-cni" id: "abc"`
	assert.Equal(t, [][]string{
		{"-d", "224.0.0.0/4", "-j", "ACCEPT", "-m", "comment", "--comment", c},
		{"-j", "SNAT", "--to-source", "10.0.0.1", "-m", "comment", "--comment", c, "--random-fully"},
	}, snatRules(v4Egress, net.ParseIP("10.0.0.1"), "--random-fully", c))
	assert.Equal(t, [][]string{
		{"-d", "ff00::/8", "-j", "ACCEPT", "-m", "comment", "--comment", c},
		{"-j", "SNAT", "--to-source", "2600:1f14::10", "-m", "comment", "--comment", c},
	}, snatRules(v6Egress, net.ParseIP("2600:1f14::10"), "", c))
	assert.Equal(t, []string{"-s", "169.254.172.2", "-j", "CNI-E4-x", "-m", "comment", "--comment", c},
		jumpRule(net.ParseIP("169.254.172.2"), "CNI-E4-x", c))
}

// jumpSpec reads `iptables -S` lines (comments quoted, inner quotes
// escaped) back into arguments for a delete.
func TestJumpSpec(t *testing.T) {
	line := `-A POSTROUTING -s 169.254.172.2/32 -m comment --comment "name: \"aws-cni\" id: \"abc\"" -j CNI-E4-0123456789abcdef01234`
	spec, ok := jumpSpec(line, "CNI-E4-0123456789abcdef01234")
	assert.True(t, ok)
	assert.Equal(t, []string{"-s", "169.254.172.2/32", "-m", "comment", "--comment", `name: "aws-cni" id: "abc"`, "-j", "CNI-E4-0123456789abcdef01234"}, spec)

	for _, l := range []string{
		line[:len(line)-1], // another chain
		`-A CNI-E4-0123456789abcdef01234 -j SNAT --to-source 10.0.0.1`,
		`-P POSTROUTING ACCEPT`,
		`-A POSTROUTING -m comment --comment "unterminated -j CNI-E4-0123456789abcdef01234`,
	} {
		_, ok := jumpSpec(l, "CNI-E4-0123456789abcdef01234")
		assert.False(t, ok, l)
	}
	out, err := splitRule(`a "b c" d\e "f\\g"`)
	assert.NoError(t, err)
	assert.Equal(t, []string{"a", "b c", `d\e`, `f\g`}, out)
}

package networkutils

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A listed rule is the one we would write only when every field we set
// matches, the IP protocol included, and it has no selector we do not set.
func TestSameRuleMatchesOnlyTheRuleWeWouldWrite(t *testing.T) {
	routerICMP := func() *netlink.Rule {
		r := newRule(netlink.FAMILY_V6, DefaultLocalRulePriority, localTable)
		r.Src = ipNet(netip.MustParsePrefix("fe80:ec2::1/128"))
		r.IPProto = unix.IPPROTO_ICMPV6
		return r
	}
	plainLocal := func() *netlink.Rule { return newRule(netlink.FAMILY_V4, DefaultLocalRulePriority, localTable) }
	tests := []struct {
		name   string
		listed func() *netlink.Rule
		wanted *netlink.Rule
		same   bool
	}{
		{"router ICMPv6 rule as written", routerICMP, routerICMP(), true},
		{"router rule without the protocol", func() *netlink.Rule {
			r := routerICMP()
			r.IPProto = 0
			return r
		}, routerICMP(), false},
		{"router rule for TCP", func() *netlink.Rule {
			r := routerICMP()
			r.IPProto = unix.IPPROTO_TCP
			return r
		}, routerICMP(), false},
		{"plain local rule as written", plainLocal, plainLocal(), true},
		{"local rule limited to a protocol", func() *netlink.Rule {
			r := plainLocal()
			r.IPProto = unix.IPPROTO_UDP
			return r
		}, plainLocal(), false},
		{"local rule at another priority", func() *netlink.Rule {
			r := plainLocal()
			r.Priority = 100
			return r
		}, plainLocal(), false},
		{"local rule with an input interface", func() *netlink.Rule {
			r := plainLocal()
			r.IifName = "vlan.eth.1"
			return r
		}, plainLocal(), false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.same, sameRule(*tc.listed(), tc.wanted), tc.name)
	}
}

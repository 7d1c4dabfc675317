package podrules_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/hostlock"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// nodeRules lists the 512 and 1536 rules of family in the namespace of h.
func nodeRules(t *testing.T, h *netlink.Handle, family int) []netlink.Rule {
	t.Helper()
	rules, err := h.RuleList(family)
	require.NoError(t, err)
	var out []netlink.Rule
	for _, r := range rules {
		if r.Priority == podrules.ToPodPriority || r.Priority == podrules.FromPodPriority {
			out = append(out, r)
		}
	}
	return out
}

// rulesOf are the 512/1536 rules naming ip as source or destination.
func rulesOf(rules []netlink.Rule, ip net.IP) []netlink.Rule {
	var out []netlink.Rule
	for _, r := range rules {
		if (r.Src != nil && r.Src.IP.Equal(ip)) || (r.Dst != nil && r.Dst.IP.Equal(ip)) {
			out = append(out, r)
		}
	}
	return out
}

// A removal for a gone pod's address leaves no 512 or 1536 rule for it
// (1536 rules into any table, leftovers included), and only for it.
func TestRemoveIfOwnedLeavesNoNodeRuleForTheAddress(t *testing.T) {
	netnsutil.RequireRoot(t)
	for _, tc := range []struct {
		name, ip, other string
		tables          []int
	}{
		{"ipv4, one ENI table", "10.0.1.5", "10.0.1.6", []int{2}},
		{"ipv4, leftovers in other tables", "10.0.1.5", "10.0.1.6", []int{2, 3, 4}},
		{"ipv4, primary ENI (512 only)", "10.0.1.5", "10.0.1.6", nil},
		{"ipv6", "2001:db8::5", "2001:db8::6", []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := netnsutil.New(t)
			h := netnsutil.Handle(t, node)
			ip, other := net.ParseIP(tc.ip), net.ParseIP(tc.other)
			for _, addr := range []net.IP{ip, other} {
				require.NoError(t, h.RuleAdd(podrules.To(addr)))
				for _, table := range tc.tables {
					require.NoError(t, h.RuleAdd(podrules.From(addr, table)))
				}
			}
			family := netlink.FAMILY_V4
			if ip.To4() == nil {
				family = netlink.FAMILY_V6
			}
			r := podrules.Remover{NetNS: node.Path(), Locks: hostlock.New(t.TempDir(), nil)}
			removed, err := r.RemoveIfOwned(netip.MustParseAddr(tc.ip), func() bool { return true })
			require.NoError(t, err)
			assert.True(t, removed)
			left := nodeRules(t, h, family)
			assert.Empty(t, rulesOf(left, ip), "rules left for the freed address")
			assert.Len(t, rulesOf(left, other), 1+len(tc.tables), "another address's rules must stay")

			removed, err = r.RemoveIfOwned(netip.MustParseAddr(tc.ip), func() bool { return true })
			require.NoError(t, err, "a second removal finds nothing and is fine")
			assert.True(t, removed)
		})
	}
}

// A new pod's rules for a reused address are never removed: when the
// address no longer belongs to the gone pod (owned says so under the
// lock), the rules are left, and owned is asked only with the lock held.
func TestRemoveIfOwnedNeverRemovesANewPodsRules(t *testing.T) {
	netnsutil.RequireRoot(t)
	for _, tc := range []struct {
		name  string
		owned bool
		kept  int
	}{
		{"address handed to a new pod: rules stay", false, 2},
		{"address still the gone pod's: rules go", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := netnsutil.New(t)
			h := netnsutil.Handle(t, node)
			ip := net.ParseIP("10.0.1.5")
			require.NoError(t, h.RuleAdd(podrules.To(ip)))
			require.NoError(t, h.RuleAdd(podrules.From(ip, 2)))
			locks := hostlock.New(t.TempDir(), nil)
			locks.Timeout = 50e6 // 50ms
			r := podrules.Remover{NetNS: node.Path(), Locks: locks}
			lockedWhenAsked := false
			removed, err := r.RemoveIfOwned(netip.MustParseAddr("10.0.1.5"), func() bool {
				// Another taker (an ADD) must wait: the lock is held.
				_, err := locks.Lock(ip)
				lockedWhenAsked = err != nil
				return tc.owned
			})
			require.NoError(t, err)
			assert.Equal(t, tc.owned, removed)
			assert.True(t, lockedWhenAsked, "owned must be asked under the address's lock")
			assert.Len(t, rulesOf(nodeRules(t, h, netlink.FAMILY_V4), ip), tc.kept)
		})
	}
}

// A route to the address through a link means a pod on the node still
// uses it, whatever ipamd's datastore says: its rules stay and the
// removal says why.
func TestRemoveIfOwnedLeavesTheRulesOfARoutedAddress(t *testing.T) {
	netnsutil.RequireRoot(t)
	node := netnsutil.New(t)
	h := netnsutil.Handle(t, node)
	ip := net.ParseIP("10.0.1.5")
	require.NoError(t, h.RuleAdd(podrules.To(ip)))
	require.NoError(t, h.RuleAdd(podrules.From(ip, 2)))
	link := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "veth-live"}, PeerName: "veth-pod"}
	require.NoError(t, h.LinkAdd(link))
	require.NoError(t, h.LinkSetUp(link))
	require.NoError(t, h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Scope: netlink.SCOPE_LINK,
		Dst: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}}))

	r := podrules.Remover{NetNS: node.Path(), Locks: hostlock.New(t.TempDir(), nil)}
	removed, err := r.RemoveIfOwned(netip.MustParseAddr("10.0.1.5"), func() bool { return true })
	require.ErrorIs(t, err, podrules.ErrStillRouted)
	assert.False(t, removed)
	assert.Len(t, rulesOf(nodeRules(t, h, netlink.FAMILY_V4), ip), 2, "a routed address keeps its rules")
}

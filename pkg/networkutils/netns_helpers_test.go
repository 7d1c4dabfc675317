package networkutils

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Test topology: a "node" namespace with veth eth0 (primary ENI) and eth1
// (a secondary ENI), whose peers up0 / up1 sit in an "upstream" namespace.
// Namespace names carry the pid and a counter so parallel runs cannot
// collide.

const (
	primaryMAC = "02:00:00:00:00:01"
	eni1MAC    = "02:00:00:00:01:01"
)

var (
	primaryIP = netip.MustParseAddr("10.0.0.10")
	eni1      = ENI{
		MAC:          eni1MAC,
		DeviceNumber: 2,
		PrimaryIP:    netip.MustParseAddr("10.0.1.20"),
		SubnetCIDR:   netip.MustParsePrefix("10.0.1.0/24"),
	}
	nsCounter atomic.Int32
)

type testNode struct {
	name, path string          // node namespace
	upstream   string          // upstream namespace
	nl         *netlink.Handle // handle inside the node namespace, for assertions
}

func requireRootAndIPTables(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, veths and iptables rules inside them")
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		if _, err := binaryPath(bin); err != nil {
			t.Skip("needs the iptables and ip6tables binaries (apt-get install -y iptables): " + err.Error())
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to create namespaces")
	}
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	requireRootAndIPTables(t)
	n := nsCounter.Add(1)
	node := &testNode{
		name:     fmt.Sprintf("nwu%d-node%d", os.Getpid(), n),
		upstream: fmt.Sprintf("nwu%d-up%d", os.Getpid(), n),
	}
	node.path = "/run/netns/" + node.name
	for _, name := range []string{node.name, node.upstream} {
		run(t, "ip", "netns", "add", name)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v: %s", name, err, out)
			}
		})
	}
	nodeNS, err := netns.GetFromName(node.name)
	require.NoError(t, err)
	defer nodeNS.Close()
	upNS, err := netns.GetFromName(node.upstream)
	require.NoError(t, err)
	defer upNS.Close()

	node.nl, err = netlink.NewHandleAt(nodeNS)
	require.NoError(t, err)
	t.Cleanup(node.nl.Close)
	upNL, err := netlink.NewHandleAt(upNS)
	require.NoError(t, err)
	defer upNL.Close()

	for _, v := range []struct{ name, peer, mac string }{
		{"eth0", "up0", primaryMAC},
		{"eth1", "up1", eni1MAC},
	} {
		mac, err := net.ParseMAC(v.mac)
		require.NoError(t, err)
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: v.name, HardwareAddr: mac, MTU: 1500},
			PeerName:      v.peer,
			PeerNamespace: netlink.NsFd(int(upNS)),
		}
		require.NoError(t, node.nl.LinkAdd(veth), "create veth %s", v.name)
		peer, err := upNL.LinkByName(v.peer)
		require.NoError(t, err)
		require.NoError(t, upNL.LinkSetUp(peer))
	}
	for _, name := range []string{"lo", "eth0"} {
		l, err := node.nl.LinkByName(name)
		require.NoError(t, err)
		require.NoError(t, node.nl.LinkSetUp(l))
	}
	// The primary ENI as DHCP leaves it: address and default route.
	node.ip(t, "addr", "add", "10.0.0.10/24", "dev", "eth0")
	node.ip(t, "route", "add", "default", "via", "10.0.0.1", "dev", "eth0")
	return node
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	return string(out)
}

// exec runs a command inside the node namespace.
func (n *testNode) exec(t *testing.T, args ...string) string {
	t.Helper()
	return run(t, "ip", append([]string{"netns", "exec", n.name}, args...)...)
}

func (n *testNode) ip(t *testing.T, args ...string) string {
	t.Helper()
	return n.exec(t, append([]string{"ip"}, args...)...)
}

func (n *testNode) iptables(t *testing.T, args ...string) {
	t.Helper()
	n.exec(t, append([]string{"iptables"}, args...)...)
}

func (n *testNode) ip6tables(t *testing.T, args ...string) {
	t.Helper()
	n.exec(t, append([]string{"ip6tables"}, args...)...)
}

// forward is `iptables -S FORWARD` (cmd "ip6tables": the IPv6 one) in the
// node: the policy line, then the rules in order.
func (n *testNode) forward(t *testing.T, cmd string) string {
	t.Helper()
	return n.exec(t, cmd, "-t", "filter", "-S", "FORWARD")
}

// save is `iptables-save -t table` inside the node, without the
// timestamp comment lines and with packet counters zeroed.
func (n *testNode) save(t *testing.T, table string) string {
	t.Helper()
	var keep []string
	for _, l := range strings.Split(n.exec(t, "iptables-save", "-t", table), "\n") {
		if !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return normaliseSave(strings.Join(keep, "\n"))
}

// state is everything SetupHostNetwork / SetupENINetwork may change,
// as text, for before/after comparisons.
func (n *testNode) state(t *testing.T) string {
	t.Helper()
	return strings.Join([]string{
		n.ip(t, "rule"),
		n.ip(t, "route", "show", "table", "all"),
		n.ip(t, "-4", "addr"),
		n.ip(t, "link"),
		n.save(t, "nat"),
		n.save(t, "mangle"),
	}, "\n")
}

func (n *testNode) link(t *testing.T, name string) netlink.Link {
	t.Helper()
	l, err := n.nl.LinkByName(name)
	require.NoError(t, err)
	return l
}

// rulesAt lists the node's IPv4 rules at priority, as `ip rule` would
// print the selector part, sorted.
func (n *testNode) rulesAt(t *testing.T, priority int) []string {
	t.Helper()
	return n.rulesOf(t, netlink.FAMILY_V4, priority)
}

// rules6At is rulesAt for IPv6 rules.
func (n *testNode) rules6At(t *testing.T, priority int) []string {
	t.Helper()
	return n.rulesOf(t, netlink.FAMILY_V6, priority)
}

func (n *testNode) rulesOf(t *testing.T, family, priority int) []string {
	t.Helper()
	rules, err := n.nl.RuleList(family)
	require.NoError(t, err)
	var out []string
	for _, r := range rules {
		if r.Priority != priority {
			continue
		}
		var parts []string
		if r.Src != nil {
			parts = append(parts, "from "+r.Src.String())
		}
		if r.Dst != nil {
			parts = append(parts, "to "+r.Dst.String())
		}
		if r.Mark != 0 || r.Mask != nil {
			m := fmt.Sprintf("fwmark %#x", r.Mark)
			if r.Mask != nil {
				m += fmt.Sprintf("/%#x", *r.Mask)
			}
			parts = append(parts, m)
		}
		parts = append(parts, fmt.Sprintf("lookup %d", r.Table))
		out = append(out, strings.Join(parts, " "))
	}
	sort.Strings(out)
	return out
}

// routesIn lists the node's IPv4 routes in table as "dst via gw dev scope".
func (n *testNode) routesIn(t *testing.T, table int) []string {
	t.Helper()
	return n.routesOf(t, netlink.FAMILY_V4, table)
}

// routes6In is routesIn for IPv6 routes.
func (n *testNode) routes6In(t *testing.T, table int) []string {
	t.Helper()
	return n.routesOf(t, netlink.FAMILY_V6, table)
}

func (n *testNode) routesOf(t *testing.T, family, table int) []string {
	t.Helper()
	routes, err := n.nl.RouteListFiltered(family, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	var out []string
	for _, r := range routes {
		dev := "?"
		if l, err := n.nl.LinkByIndex(r.LinkIndex); err == nil {
			dev = l.Attrs().Name
		}
		s := r.Dst.String()
		if r.Gw != nil {
			s += " via " + r.Gw.String()
		}
		s += fmt.Sprintf(" dev %s scope %d", dev, r.Scope)
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// countingIPT counts the iptables calls that change state.
type countingIPT struct {
	ipTables
	writes atomic.Int32
}

func (c *countingIPT) NewChain(table, chain string) error {
	c.writes.Add(1)
	return c.ipTables.NewChain(table, chain)
}

func (c *countingIPT) ClearChain(table, chain string) error {
	c.writes.Add(1)
	return c.ipTables.ClearChain(table, chain)
}

func (c *countingIPT) DeleteChain(table, chain string) error {
	c.writes.Add(1)
	return c.ipTables.DeleteChain(table, chain)
}

func (c *countingIPT) Insert(table, chain string, pos int, spec ruleSpec) error {
	c.writes.Add(1)
	return c.ipTables.Insert(table, chain, pos, spec)
}

func (c *countingIPT) Append(table, chain string, spec ruleSpec) error {
	c.writes.Add(1)
	return c.ipTables.Append(table, chain, spec)
}

func (c *countingIPT) Delete(table, chain string, spec ruleSpec) error {
	c.writes.Add(1)
	return c.ipTables.Delete(table, chain, spec)
}

// noRandomFully pretends the iptables binary predates --random-fully.
type noRandomFully struct{ ipTables }

func (noRandomFully) HasRandomFully() bool { return false }

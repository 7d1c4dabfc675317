package driver

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/hostlock"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// inNode runs f on a thread inside the node namespace, which is what the
// driver takes as "the node" (the plugin binary runs there).
func inNode(t *testing.T, node ns.NetNS, f func() error) error {
	t.Helper()
	var err error
	require.NoError(t, node.Do(func(ns.NetNS) error { err = f(); return nil }))
	return err
}

// testLocks are address locks private to the test.
func testLocks(t testing.TB) *hostlock.Locker {
	return hostlock.New(t.TempDir(), quiet)
}

func rulesFor(t *testing.T, node ns.NetNS, ip net.IP) (to, from []netlink.Rule) {
	t.Helper()
	rules, err := netnsutil.Handle(t, node).RuleList(netlink.FAMILY_V4)
	require.NoError(t, err)
	for _, r := range rules {
		if r.Priority == ToContainerRulePriority && r.Dst != nil && r.Dst.IP.Equal(ip) {
			to = append(to, r)
		}
		if r.Priority == FromPodRulePriority && r.Src != nil && r.Src.IP.Equal(ip) {
			from = append(from, r)
		}
	}
	return to, from
}

func TestSetupCheckAndRelease(t *testing.T) {
	netnsutil.RequireRoot(t)
	locks := testLocks(t)
	node, pod := netnsutil.New(t), netnsutil.New(t)
	ip := net.IPv4(10, 250, 1, 7).To4()
	p := PodNetwork{HostVeth: "enitest0000001", ContainerIf: "eth0", NetnsPath: pod.Path(), IP: ip, RouteTable: 2, MTU: 9001}
	require.NoError(t, inNode(t, node, func() error { return Setup(p, locks, quiet) }))
	require.NoError(t, inNode(t, node, func() error { return Check(p) }))
	to, from := rulesFor(t, node, ip)
	require.Len(t, to, 1)
	require.Len(t, from, 1)
	assert.Equal(t, 2, from[0].Table)

	// Without this pod's veth to go by, a live route means another pod
	// holds the address: route and rules stay.
	err := inNode(t, node, func() error { return ReleaseHostRouting(ip, 0, locks, quiet) })
	require.ErrorIs(t, err, ErrAddressInUse)
	to, _ = rulesFor(t, node, ip)
	require.Len(t, to, 1)

	// The pod's own veth, found from inside its namespace.
	var peer int
	require.NoError(t, inNode(t, node, func() (err error) { peer, err = HostPeer(pod.Path(), "eth0", quiet); return err }))
	hl, err := netnsutil.Handle(t, node).LinkByName(p.HostVeth)
	require.NoError(t, err)
	require.Equal(t, hl.Attrs().Index, peer)

	// Its route and the rules go; the veth is left to the namespace.
	require.NoError(t, inNode(t, node, func() error { return ReleaseHostRouting(ip, peer, locks, quiet) }))
	require.NoError(t, inNode(t, node, func() error { return ReleaseHostRouting(ip, peer, locks, quiet) }), "twice")
	to, from = rulesFor(t, node, ip)
	assert.Empty(t, to)
	assert.Empty(t, from)
	assert.Empty(t, mainRoutesTo(t, node, ip))
	_, err = netnsutil.Handle(t, node).LinkByName(p.HostVeth)
	require.NoError(t, err, "host veth left for the namespace's deletion")

	// Where the namespace outlives the DEL, the pair is deleted explicitly.
	require.NoError(t, inNode(t, node, func() error { return RemoveContainerLink(pod.Path(), "eth0", quiet) }))
	require.NoError(t, inNode(t, node, func() error { return RemoveContainerLink(pod.Path(), "eth0", quiet) }), "twice")
	_, err = netnsutil.Handle(t, node).LinkByName(p.HostVeth)
	assert.Error(t, err, "host veth gone with its peer")
	require.NoError(t, inNode(t, node, func() (err error) { peer, err = HostPeer(pod.Path(), "eth0", quiet); return err }))
	assert.Zero(t, peer, "no pair, no peer")
	require.Error(t, inNode(t, node, func() error { return Check(p) }))
}

// After the route and rules of a pod are released and its namespace is
// deleted (by the runtime), nothing of it is left on the node: the veth
// pair goes with the namespace.
func TestReleaseThenNamespaceDeletionLeavesNothing(t *testing.T) {
	netnsutil.RequireRoot(t)
	locks := testLocks(t)
	node, pod := netnsutil.New(t), netnsutil.New(t)
	ip := net.IPv4(10, 250, 1, 10).To4()
	p := PodNetwork{HostVeth: "enitest0000005", ContainerIf: "eth0", NetnsPath: pod.Path(), IP: ip, RouteTable: 3, MTU: 9001}
	require.NoError(t, inNode(t, node, func() error { return Setup(p, locks, quiet) }))
	var peer int
	require.NoError(t, inNode(t, node, func() (err error) { peer, err = HostPeer(pod.Path(), "eth0", quiet); return err }))
	require.Positive(t, peer)
	require.NoError(t, inNode(t, node, func() error { return ReleaseHostRouting(ip, peer, locks, quiet) }))
	netnsutil.Delete(t, pod)
	requireNodeEmpty(t, node, ip)
}

// Releasing an address removes every 1536 rule from it, whatever the
// table (leftovers of earlier pods on other ENIs included), and no rule of
// another address or priority.
func TestReleaseRemovesFromRulesOfEveryTable(t *testing.T) {
	netnsutil.RequireRoot(t)
	locks := testLocks(t)
	node := netnsutil.New(t)
	h := netnsutil.Handle(t, node)
	ip := net.IPv4(10, 250, 1, 12).To4()
	other := net.IPv4(10, 250, 1, 13).To4()
	for _, table := range []int{2, 7, 300} {
		require.NoError(t, h.RuleAdd(ruleFrom(ip, table)))
	}
	require.NoError(t, h.RuleAdd(ruleTo(ip)))
	require.NoError(t, h.RuleAdd(ruleFrom(other, 2)))
	require.NoError(t, h.RuleAdd(ruleTo(other)))
	sameSrcOtherPriority := ruleFrom(ip, 2)
	sameSrcOtherPriority.Priority = FromPodRulePriority + 1
	require.NoError(t, h.RuleAdd(sameSrcOtherPriority))

	require.NoError(t, inNode(t, node, func() error { return ReleaseHostRouting(ip, 0, locks, quiet) }))
	to, from := rulesFor(t, node, ip)
	assert.Empty(t, to)
	assert.Empty(t, from)
	to, from = rulesFor(t, node, other)
	assert.Len(t, to, 1, "the other address keeps its rules")
	assert.Len(t, from, 1, "the other address keeps its rules")
	rules, err := h.RuleList(netlink.FAMILY_V4)
	require.NoError(t, err)
	kept := false
	for _, r := range rules {
		kept = kept || (r.Priority == FromPodRulePriority+1 && r.Src != nil && r.Src.IP.Equal(ip))
	}
	assert.True(t, kept, "a rule from the address at another priority is not the plugin's")
	// Nothing left to remove is not an error.
	require.NoError(t, inNode(t, node, func() error { return ReleaseHostRouting(ip, 0, locks, quiet) }))
}

// A late release of an old pod whose veth still exists, after a new pod
// (another veth) was set up with the same address: only the old pod's own
// route could go, so the new pod's route and rules stay whole.
func TestReleaseOfAnOldPodSparesTheNewOwner(t *testing.T) {
	netnsutil.RequireRoot(t)
	locks := testLocks(t)
	node, oldPod, newPod := netnsutil.New(t), netnsutil.New(t), netnsutil.New(t)
	ip := net.IPv4(10, 250, 1, 11).To4()
	old := PodNetwork{HostVeth: "enitest0000006", ContainerIf: "eth0", NetnsPath: oldPod.Path(), IP: ip, RouteTable: 2, MTU: 9001}
	fresh := PodNetwork{HostVeth: "enitest0000007", ContainerIf: "eth0", NetnsPath: newPod.Path(), IP: ip, RouteTable: 2, MTU: 9001}
	require.NoError(t, inNode(t, node, func() error { return Setup(old, locks, quiet) }))
	var oldPeer int
	require.NoError(t, inNode(t, node, func() (err error) { oldPeer, err = HostPeer(oldPod.Path(), "eth0", quiet); return err }))
	require.NoError(t, inNode(t, node, func() error { return Setup(fresh, locks, quiet) }))

	err := inNode(t, node, func() error { return ReleaseHostRouting(ip, oldPeer, locks, quiet) })
	require.ErrorIs(t, err, ErrAddressInUse)
	require.NoError(t, inNode(t, node, func() error { return Check(fresh) }))
	to, from := rulesFor(t, node, ip)
	assert.Len(t, to, 1)
	assert.Len(t, from, 1)
}

// HostPeer only reports a peer that is in the node namespace.
func TestHostPeerIgnoresPairsNotIntoTheNode(t *testing.T) {
	netnsutil.RequireRoot(t)
	node, pod, other := netnsutil.New(t), netnsutil.New(t), netnsutil.New(t)
	netnsutil.Veth(t, pod, "eth0", other, "x0")
	for _, c := range []struct{ path, ifName string }{
		{pod.Path(), "eth0"}, // a veth into another namespace
		{pod.Path(), "lo"},   // not a veth
		{pod.Path(), "eth9"}, // no such interface
		{"", "eth0"},         // no namespace given
		{"/nonexistent/ns", "eth0"},
	} {
		var peer int
		require.NoError(t, inNode(t, node, func() (err error) { peer, err = HostPeer(c.path, c.ifName, quiet); return err }), "%+v", c)
		assert.Zero(t, peer, "%+v", c)
	}
}

// mainRoutesTo lists the node's main-table routes to ip (/32 or /128).
func mainRoutesTo(t *testing.T, node ns.NetNS, ip net.IP) []netlink.Route {
	t.Helper()
	routes, err := netnsutil.Handle(t, node).RouteListFiltered(podrules.Family(ip),
		&netlink.Route{Dst: podrules.HostPrefix(ip), Table: MainTable}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	return routes
}

// requireNodeEmpty waits for the node to hold no link but lo (the kernel
// destroys a deleted namespace, and the veths in it, asynchronously), then
// requires no route to and no 512/1536 rule for any of ips.
func requireNodeEmpty(t *testing.T, node ns.NetNS, ips ...net.IP) {
	t.Helper()
	require.Eventually(t, func() bool {
		names, err := netnsutil.LinkNames(node)
		return err == nil && len(names) == 1 && names[0] == "lo"
	}, 5*time.Second, 10*time.Millisecond, "veths gone with the namespace")
	h := netnsutil.Handle(t, node)
	for _, ip := range ips {
		assert.Empty(t, mainRoutesTo(t, node, ip), "route to %s", ip)
		rules, err := h.RuleList(podrules.Family(ip))
		require.NoError(t, err)
		for _, r := range rules {
			if r.Priority == ToContainerRulePriority || r.Priority == FromPodRulePriority {
				t.Errorf("rule left: %s", r)
			}
		}
	}
}

func TestSetupReplacesStaleState(t *testing.T) {
	netnsutil.RequireRoot(t)
	locks := testLocks(t)
	node, pod := netnsutil.New(t), netnsutil.New(t)
	ip := net.IPv4(10, 250, 0, 9).To4()
	// A stale 1536 rule for this address into another ENI's table.
	stale := ruleFrom(ip, 7)
	require.NoError(t, netnsutil.Handle(t, node).RuleAdd(stale))
	p := PodNetwork{HostVeth: "enitest0000002", ContainerIf: "eth0", NetnsPath: pod.Path(), IP: ip, RouteTable: 254, MTU: 1500}
	require.NoError(t, inNode(t, node, func() error { return Setup(p, locks, quiet) }))
	_, from := rulesFor(t, node, ip)
	assert.Empty(t, from, "stale from-rule removed; the primary ENI needs none")
	// Setting up again (a retried ADD) replaces the veth pair.
	require.NoError(t, inNode(t, node, func() error { return Setup(p, locks, quiet) }))
	require.NoError(t, inNode(t, node, func() error { return Check(p) }))
	hl, err := netnsutil.Handle(t, node).LinkByName(p.HostVeth)
	require.NoError(t, err)
	assert.Equal(t, 1500, hl.Attrs().MTU)
}

// Stale 1536 rules of the address into other tables go; the pod's ENI
// table gets exactly one, also when a retried ADD finds it in place.
func TestSetupLeavesOneFromRuleIntoThePodsTable(t *testing.T) {
	netnsutil.RequireRoot(t)
	locks := testLocks(t)
	node, pod := netnsutil.New(t), netnsutil.New(t)
	ip := net.IPv4(10, 250, 0, 10).To4()
	h := netnsutil.Handle(t, node)
	for _, table := range []int{7, 300} {
		require.NoError(t, h.RuleAdd(ruleFrom(ip, table)))
	}
	p := PodNetwork{HostVeth: "enitest0000012", ContainerIf: "eth0", NetnsPath: pod.Path(), IP: ip, RouteTable: 3, MTU: 9001}
	for range 2 {
		require.NoError(t, inNode(t, node, func() error { return Setup(p, locks, quiet) }))
		to, from := rulesFor(t, node, ip)
		assert.Len(t, to, 1)
		require.Len(t, from, 1)
		assert.Equal(t, 3, from[0].Table)
	}
}

func TestSetupFailureRollsBack(t *testing.T) {
	netnsutil.RequireRoot(t)
	locks := testLocks(t)
	node, pod, other := netnsutil.New(t), netnsutil.New(t), netnsutil.New(t)
	netnsutil.Veth(t, pod, "eth0", other, "x0") // eth0 is taken
	ip := net.IPv4(10, 250, 1, 8).To4()
	p := PodNetwork{HostVeth: "enitest0000003", ContainerIf: "eth0", NetnsPath: pod.Path(), IP: ip, RouteTable: 2, MTU: 9001}
	require.Error(t, inNode(t, node, func() error { return Setup(p, locks, quiet) }))
	names, err := netnsutil.LinkNames(node)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo"}, names)
	to, from := rulesFor(t, node, ip)
	assert.Empty(t, to)
	assert.Empty(t, from)
	// The pod's own eth0 is untouched.
	_, err = netnsutil.Handle(t, pod).LinkByName("eth0")
	require.NoError(t, err)

	// Invalid requests never touch the kernel.
	for _, bad := range []PodNetwork{
		{HostVeth: "h", ContainerIf: "eth0", NetnsPath: pod.Path(), IP: net.ParseIP("2001:db8::1")},
		{HostVeth: "abcdefghijklmnop", ContainerIf: "eth0", NetnsPath: pod.Path(), IP: ip},
		{HostVeth: "h", ContainerIf: "eth0", IP: ip},
		{HostVeth: "h", ContainerIf: "eth0", NetnsPath: "/nonexistent/ns", IP: ip},
	} {
		require.Error(t, inNode(t, node, func() error { return Setup(bad, locks, quiet) }), "%+v", bad)
	}
}

func TestSetupAndReleaseHoldTheAddressLock(t *testing.T) {
	netnsutil.RequireRoot(t)
	node, pod := netnsutil.New(t), netnsutil.New(t)
	ip := net.IPv4(10, 250, 1, 9).To4()
	dir := t.TempDir()
	unlock, err := hostlock.New(dir, quiet).Lock(ip)
	require.NoError(t, err)
	short := &hostlock.Locker{Dir: dir, Timeout: 100 * time.Millisecond}
	p := PodNetwork{HostVeth: "enitest0000004", ContainerIf: "eth0", NetnsPath: pod.Path(), IP: ip, RouteTable: 2, MTU: 9001}

	// Another process holds the address: neither changes anything, and
	// both give up after the timeout.
	err = inNode(t, node, func() error { return Setup(p, short, quiet) })
	require.ErrorIs(t, err, hostlock.ErrTimeout)
	names, err := netnsutil.LinkNames(node)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo"}, names, "nothing created without the lock")
	require.NoError(t, netnsutil.Handle(t, node).RuleAdd(ruleTo(ip)))
	err = inNode(t, node, func() error { return ReleaseHostRouting(ip, 0, short, quiet) })
	require.ErrorIs(t, err, hostlock.ErrTimeout)
	to, _ := rulesFor(t, node, ip)
	require.Len(t, to, 1, "rule kept while the lock is held elsewhere")

	// Setup waits for the holder, then completes.
	done := make(chan error, 1)
	go func() {
		var serr error
		derr := node.Do(func(ns.NetNS) error { serr = Setup(p, hostlock.New(dir, quiet), quiet); return nil })
		done <- errors.Join(derr, serr)
	}()
	select {
	case err := <-done:
		t.Fatalf("Setup did not wait for the lock (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Setup did not finish after the lock was released")
	}
	require.NoError(t, inNode(t, node, func() error { return Check(p) }))
}

// Teardown of a branch-ENI pod removes the VLAN link, the priority-10
// rules of its table in both families, and the pod address's rules, on
// this host too (a veth stands in for the VLAN link; the full datapath
// is tested in the VM, branch_vlan_test.go).
func TestTeardownBranchENI(t *testing.T) {
	netnsutil.RequireRoot(t)
	node, other := netnsutil.New(t), netnsutil.New(t)
	netnsutil.Veth(t, node, "vlan.eth.5", other, "x0")
	h := netnsutil.Handle(t, node)
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		for _, iif := range []string{"vlan.eth.5", "enixxxx"} {
			r := netlink.NewRule()
			r.Family = family
			r.Priority = VlanRulePriority
			r.IifName = iif
			r.Table = 105
			require.NoError(t, h.RuleAdd(r))
		}
	}
	ip := net.IPv4(10, 1, 2, 3).To4()
	require.NoError(t, h.RuleAdd(ruleTo(ip)))
	require.NoError(t, h.RuleAdd(ruleFrom(ip, 105)))
	require.NoError(t, inNode(t, node, func() error { return TeardownBranchENI(5, ip, 0, testLocks(t), quiet) }))
	require.NoError(t, inNode(t, node, func() error { return TeardownBranchENI(5, ip, 0, testLocks(t), quiet) }), "twice")
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := h.RuleList(family)
		require.NoError(t, err)
		for _, r := range rules {
			assert.NotEqual(t, VlanRulePriority, r.Priority, "%s", r)
			assert.NotEqual(t, ToContainerRulePriority, r.Priority, "%s", r)
			assert.NotEqual(t, FromPodRulePriority, r.Priority, "%s", r)
		}
	}
	_, err := h.LinkByName("vlan.eth.5")
	assert.Error(t, err)
}

func TestRandomMAC(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		m, err := RandomMAC()
		require.NoError(t, err)
		require.Len(t, m, 6)
		assert.Equal(t, byte(0x02), m[0]&0x03, "locally administered unicast: %s", m)
		seen[m.String()] = true
	}
	assert.Greater(t, len(seen), 95)
	m, err := RandomMAC()
	require.NoError(t, err)
	u, err := uniqueMAC([]net.HardwareAddr{m})
	require.NoError(t, err)
	assert.NotEqual(t, m.String(), u.String())
}

func TestNormalizeTable(t *testing.T) {
	for in, want := range map[int]int{0: 254, 1: 254, 254: 254, 2: 2, 10101: 10101} {
		assert.Equal(t, want, NormalizeTable(in))
	}
}

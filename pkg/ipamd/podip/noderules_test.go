package podip

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/hostlock"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// Issue 36, case 6: a DEL queued without prevResult (a runtime that lost
// its result cache) named no address, so the plugin removed no node rule;
// the replay freed the address and left its 512 and 1536 rules. CNI GC
// and the reconciler's release of a leak free addresses without a plugin
// DEL at all. These tests hold ipamd to removing the rules first, while
// the gone pod still holds the address, and to never removing a new
// pod's rules.

// nodeNS is a namespace standing for the node, with its netlink handle
// and a remover of pod rules working in it.
type nodeNS struct {
	h     *netlink.Handle
	rules NodeRules
}

func newNodeNS(t *testing.T) nodeNS {
	t.Helper()
	netnsutil.RequireRoot(t)
	n := netnsutil.New(t)
	return nodeNS{h: netnsutil.Handle(t, n), rules: podrules.Remover{NetNS: n.Path(), Locks: hostlock.New(t.TempDir(), nil)}}
}

// install adds what the plugin's ADD adds for a pod on an ENI with table.
func (n nodeNS) install(t *testing.T, ip netip.Addr, table int) {
	t.Helper()
	addr := net.IP(ip.AsSlice())
	require.NoError(t, n.h.RuleAdd(podrules.To(addr)))
	require.NoError(t, n.h.RuleAdd(podrules.From(addr, table)))
}

// rulesFor counts the 512 and 1536 rules naming ip.
func (n nodeNS) rulesFor(t *testing.T, ip netip.Addr) int {
	t.Helper()
	rules, err := n.h.RuleList(netlink.FAMILY_ALL)
	require.NoError(t, err)
	addr := net.IP(ip.AsSlice())
	c := 0
	for _, r := range rules {
		if r.Priority != podrules.ToPodPriority && r.Priority != podrules.FromPodPriority {
			continue
		}
		if (r.Src != nil && r.Src.IP.Equal(addr)) || (r.Dst != nil && r.Dst.IP.Equal(addr)) {
			c++
		}
	}
	return c
}

// queueDEL queues the DEL the plugin queues when ipamd does not answer.
func queueDEL(t *testing.T, dir string, key datastore.IPAMKey) {
	t.Helper()
	require.NoError(t, delqueue.Write(dir, delqueue.Entry{ContainerID: key.ContainerID, IfName: key.IfName,
		NetworkName: key.NetworkName, Reason: "ipamd unreachable"}))
}

// A replayed DEL leaves no node rule for its address (real netlink in a
// namespace the test creates), and only its address loses rules.
func TestNodeRulesAReplayedDELLeavesNoNodeRuleForItsAddress(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table int
		extra []int // 1536 leftovers of earlier pods on other ENIs
	}{
		{"pod on a secondary ENI", 2, nil},
		{"pod on a secondary ENI, with a leftover 1536 rule", 3, []int{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newNodeNS(t)
			a, dir := replayAgent(t)
			a.Rules = node.rules
			gone := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "gone", IfName: "eth0"}
			live := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "live", IfName: "eth0"}
			ga, err := storeOf(a).Assign(gone, datastore.IPAMMetadata{K8SPodName: "gone"})
			require.NoError(t, err)
			la, err := storeOf(a).Assign(live, datastore.IPAMMetadata{K8SPodName: "live"})
			require.NoError(t, err)
			node.install(t, ga.IP, tc.table)
			for _, table := range tc.extra {
				require.NoError(t, node.h.RuleAdd(podrules.From(net.IP(ga.IP.AsSlice()), table)))
			}
			node.install(t, la.IP, tc.table)
			queueDEL(t, dir, gone)

			a.Replay()

			_, held := storeOf(a).Find(gone)
			assert.False(t, held, "the queued DEL is replayed")
			assert.Zero(t, node.rulesFor(t, ga.IP), "the replayed DEL's address keeps no 512 or 1536 rule")
			assert.Equal(t, 2, node.rulesFor(t, la.IP), "another pod's rules stay")
			left, _ := delqueue.List(dir)
			assert.Empty(t, left)
		})
	}
}

// CNI GC and a reconciler pass leave no node rule for an address they
// free (real netlink), and leave the rules of the pods still running.
func TestNodeRulesAFreedLeakLeavesNoNodeRuleForItsAddress(t *testing.T) {
	for _, tc := range []struct {
		name string
		free func(f *reconFixture, valid map[[2]string]bool) int
	}{
		{"CNI GC", func(f *reconFixture, valid map[[2]string]bool) int {
			n, _ := f.r.CollectGarbage(context.Background(), "aws-cni", valid)
			return n
		}},
		{"a reconciler pass", func(f *reconFixture, _ map[[2]string]bool) int {
			return f.r.Pass(context.Background(), false).Reclaimed
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newNodeNS(t)
			f := newReconFixture(t)
			f.r.SetNodeRules(node.rules)
			live := f.pod(t, "live", false)
			leaked := f.pod(t, "leaked", true)
			node.install(t, live.IP, 2)
			node.install(t, leaked.IP, 2)
			f.clk.Advance(10 * time.Minute)

			valid := map[[2]string]bool{{live.Key.ContainerID, live.Key.IfName}: true}
			require.Equal(t, 1, tc.free(f, valid))

			assert.False(t, f.held(leaked))
			assert.Zero(t, node.rulesFor(t, leaked.IP), "the freed address keeps no 512 or 1536 rule")
			assert.True(t, f.held(live))
			assert.Equal(t, 2, node.rulesFor(t, live.IP), "a running pod's rules stay")
		})
	}
}

// fakeNodeRules keeps each address's node rules in memory, naming the pod
// whose ADD installed them.
type fakeNodeRules struct {
	mu    sync.Mutex
	owner map[netip.Addr]string
	// before runs ahead of the ownership check (a concurrent DEL and ADD).
	before func(ip netip.Addr)
	err    error
	calls  int
}

func (f *fakeNodeRules) RemoveIfOwned(ip netip.Addr, owned func() bool) (bool, error) {
	f.mu.Lock()
	f.calls++
	before, err := f.before, f.err
	f.mu.Unlock()
	if before != nil {
		before(ip)
	}
	if err != nil {
		return false, err
	}
	if !owned() {
		return false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.owner, ip)
	return true, nil
}

func (f *fakeNodeRules) ownerOf(ip netip.Addr) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.owner[ip]
}

// A new pod's rules for a reused address are never removed: when the
// address leaves the gone pod's key before the removal's ownership check
// (a late DEL released it and a new pod's ADD took it and installed its
// rules), the rules stay; the same for a DEL whose key holds nothing.
func TestNodeRulesANewPodsRulesForAReusedAddressAreNeverRemoved(t *testing.T) {
	for _, tc := range []struct {
		name string
		// race runs in place of the removal's ownership check: a late
		// DEL and a new pod's ADD of the same address.
		race      bool
		preFreed  bool // the key was released before the replay
		wantOwner string
	}{
		{"the address still the gone pod's: its rules go", false, false, ""},
		{"the address handed to a new pod meanwhile: the new pod's rules stay", true, false, "new"},
		{"the key holds nothing any more: no rule is touched", false, true, "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, dir := replayAgent(t) // cooldown 0: a released address is reused at once
			rules := &fakeNodeRules{owner: map[netip.Addr]string{}}
			a.Rules = rules
			gone := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "gone", IfName: "eth0"}
			newKey := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "new", IfName: "eth0"}
			ga, err := storeOf(a).Assign(gone, datastore.IPAMMetadata{})
			require.NoError(t, err)
			rules.owner[ga.IP] = "gone"
			handOver := func() {
				_, err := storeOf(a).Release(gone)
				require.NoError(t, err)
				_, err = storeOf(a).Adopt(ga.IP, newKey, datastore.IPAMMetadata{})
				require.NoError(t, err)
				rules.mu.Lock()
				rules.owner[ga.IP] = "new"
				rules.mu.Unlock()
			}
			if tc.preFreed {
				handOver()
			}
			if tc.race {
				rules.before = func(netip.Addr) { handOver() }
			}
			queueDEL(t, dir, gone)

			a.Replay()

			assert.Equal(t, tc.wantOwner, rules.ownerOf(ga.IP))
			got, ok := storeOf(a).Find(newKey)
			if tc.race || tc.preFreed {
				require.True(t, ok, "the new pod keeps the address")
				assert.Equal(t, ga.IP, got.IP)
			}
			_, held := storeOf(a).Find(gone)
			assert.False(t, held)
		})
	}
}

// A failed rule removal never loses the release: the address is freed and
// the queue entry removed (the failure is logged; the agent's NodeRules
// counts it).
func TestNodeRulesAFailedRemovalNeverLosesTheRelease(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, rules *fakeNodeRules)
	}{
		{"a replayed DEL", func(t *testing.T, rules *fakeNodeRules) {
			a, dir := replayAgent(t)
			a.Rules = rules
			key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "gone", IfName: "eth0"}
			_, err := storeOf(a).Assign(key, datastore.IPAMMetadata{})
			require.NoError(t, err)
			queueDEL(t, dir, key)
			a.Replay()
			_, held := storeOf(a).Find(key)
			assert.False(t, held, "released despite the failure")
			left, _ := delqueue.List(dir)
			assert.Empty(t, left, "the entry is done")
		}},
		{"CNI GC", func(t *testing.T, rules *fakeNodeRules) {
			f := newReconFixture(t)
			f.r.SetNodeRules(rules)
			leaked := f.pod(t, "leaked", true)
			f.pod(t, "live", false)
			f.clk.Advance(10 * time.Minute)
			n, _ := f.r.CollectGarbage(context.Background(), "aws-cni", map[[2]string]bool{})
			assert.Equal(t, 1, n)
			assert.False(t, f.held(leaked), "released despite the failure")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := &fakeNodeRules{owner: map[netip.Addr]string{}, err: errors.New("netlink: operation not permitted")}
			tc.run(t, rules)
			assert.Equal(t, 1, rules.calls, "tried once")
		})
	}
}

// The reconciler removes rules outside its decision lock, only for what
// it frees: nothing in report mode, nothing for a running pod.
func TestNodeRulesTheReconcilerRemovesOnlyWhatItFreesOutsideItsLock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      Mode
		wantCalls int
	}{
		{"enforce: the leak's rules, outside the decision lock", Enforce, 1},
		{"report mode: nothing", Report, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newReconFixture(t, func(c *Config) { c.Mode = tc.mode })
			rules := &fakeNodeRules{owner: map[netip.Addr]string{}}
			f.r.SetNodeRules(rules)
			leaked := f.pod(t, "leaked", true)
			live := f.pod(t, "live", false)
			rules.owner[leaked.IP], rules.owner[live.IP] = "leaked", "live"
			lockFree := true
			rules.before = func(netip.Addr) {
				if !f.r.mu.TryLock() {
					lockFree = false
					return
				}
				f.r.mu.Unlock()
			}
			f.clk.Advance(10 * time.Minute)
			f.pass(t)
			assert.Equal(t, tc.wantCalls, rules.calls)
			assert.True(t, lockFree, "no netlink call under the decision lock")
			assert.Equal(t, "live", rules.ownerOf(live.IP))
			if tc.wantCalls > 0 {
				assert.Empty(t, rules.ownerOf(leaked.IP))
			} else {
				assert.Equal(t, "leaked", rules.ownerOf(leaked.IP))
			}
		})
	}
}

// askedRules records, per address, whether the removal was asked and what
// the ownership check answered; it removes nothing.
type askedRules struct{ asked map[netip.Addr]bool }

func (r *askedRules) RemoveIfOwned(ip netip.Addr, owned func() bool) (bool, error) {
	o := owned()
	r.asked[ip] = o
	return o, nil
}

// A queued DEL releases the allocation very old versions wrote under the
// migrated key form; its node rules go first, as for any other key.
func TestNodeRulesAReplayedDELOfAMigratedKeyRemovesItsRulesFirst(t *testing.T) {
	a, dir := replayAgent(t)
	rules := &askedRules{asked: map[netip.Addr]bool{}}
	a.Rules = rules
	migrated := datastore.IPAMKey{NetworkName: "_migrated-from-cri", ContainerID: "old", IfName: "unknown"}
	m, err := storeOf(a).Assign(migrated, datastore.IPAMMetadata{})
	require.NoError(t, err)
	queueDEL(t, dir, datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "old", IfName: "eth0"})
	a.Replay()
	_, held := storeOf(a).Find(migrated)
	require.False(t, held, "released")
	assert.True(t, rules.asked[m.IP], "its node rules were removed before the release, while it still held the address")
}

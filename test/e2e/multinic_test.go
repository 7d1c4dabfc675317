package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// multiNICCards is the instance type of the multi-NIC scenario and its
// number of network cards (both managed by the agent).
const (
	multiNICInstance = "c6in.32xlarge"
	multiNICCards    = 2
)

// cardAddrs are, by network card, the addresses the agent's checkpoints
// hold for the container.
func cardAddrs(t testing.TB, n *Node, containerID string) map[int]netip.Addr {
	t.Helper()
	out := map[int]netip.Addr{}
	for card := 0; card < multiNICCards; card++ {
		entries, err := n.IPAMD.CardCheckpoint(card)
		require.NoError(t, err)
		for _, e := range entries {
			if e.Key.ContainerID == containerID {
				out[card] = e.IP
			}
		}
	}
	return out
}

// heldOnCards reports which of ips any card's pool still has assigned.
func heldOnCards(t testing.TB, n *Node, ips []netip.Addr) []netip.Addr {
	t.Helper()
	cards, err := n.IPAMD.AssignedOnCards()
	require.NoError(t, err)
	var out []netip.Addr
	for _, ip := range ips {
		for _, assigned := range cards {
			if _, ok := assigned[ip]; ok {
				out = append(out, ip)
			}
		}
	}
	return out
}

// waitCardFree waits until every card's pool has an unassigned address
// that no start-up check holds back (a multi-NIC ADD needs one on each;
// cards above 0 keep one warm, refilled after each such pod).
func waitCardFree(t testing.TB, n *Node) {
	t.Helper()
	var free map[int]int
	pending := -1
	took, ok := WaitFor(60*time.Second, func() bool {
		if st, err := n.IPAMD.Reconciler(); err != nil || st.PendingAddresses > 0 {
			pending = st.PendingAddresses
			return false
		}
		cards, err := n.IPAMD.CardENIs()
		if err != nil || len(cards) < multiNICCards {
			return false
		}
		free = map[int]int{}
		for c, infos := range cards {
			free[c] = infos.TotalIPs - infos.AssignedIPs
			if free[c] < 1 {
				return false
			}
		}
		return true
	})
	require.Truef(t, ok, "no free address on every card after %v: free by card %v (held back pending a check: %d)", took, free, pending)
}

// requirePodRules checks the node's policy rules for a pod address: the
// "to" rule into main (512) and, unless the address's ENI routes through
// main, the "from" rule into its ENI's table (1536), 10000+device+100*card
// beyond card 0; none at all once the pod is gone (live false).
func requirePodRules(t testing.TB, n *Node, ip netip.Addr, live bool) {
	t.Helper()
	var want []string
	if live {
		eni, ok := n.ENIHolding(ip)
		require.Truef(t, ok, "%s is on no attached ENI in EC2", ip)
		want = append(want, fmt.Sprintf("512 to %s table %d", ip, unix.RT_TABLE_MAIN))
		if table := eni.RouteTable(); table != unix.RT_TABLE_MAIN {
			want = append(want, fmt.Sprintf("1536 from %s table %d", ip, table))
		}
	}
	got, err := n.NodeRulesFor(ip)
	require.NoError(t, err)
	assert.ElementsMatchf(t, want, got, "the node's rules for %s", ip)
}

// multiNICAddrs checks the multi-NIC pod's interfaces (eth0, mNicIf1, one
// address each, no other interface) and returns its address on each card
// in card order, checked against EC2 (the ENI carrying it is on that card)
// and the card's checkpoint (held for the pod's sandbox).
func multiNICAddrs(t testing.TB, n *Node, p *Pod) []netip.Addr {
	t.Helper()
	ifs, err := n.PodAddrs(p)
	require.NoError(t, err)
	require.Lenf(t, ifs, multiNICCards, "pod %s interfaces: %v", p.Name, ifs)
	held := cardAddrs(t, n, p.ID)
	var out []netip.Addr
	for card := 0; card < multiNICCards; card++ {
		name := MultiNICIfName(card)
		addrs := ifs[name]
		require.Lenf(t, addrs, 1, "pod %s: %s has %v, want one address", p.Name, name, addrs)
		ip := addrs[0]
		eni, ok := n.ENIHolding(ip)
		require.Truef(t, ok, "pod %s: %s's %s is on no attached ENI in EC2", p.Name, name, ip)
		assert.Equalf(t, card, eni.Card, "pod %s: %s's %s is on %s, card %d", p.Name, name, ip, eni.ID, eni.Card)
		assert.Equalf(t, ip, held[card], "pod %s: card %d's checkpoint holds %v for the sandbox", p.Name, card, held[card])
		requirePodRules(t, n, ip, true)
		out = append(out, ip)
	}
	assert.Equal(t, p.IP, out[0], "the runtime reports eth0's address")
	return out
}

// On a node of two network cards with ENABLE_MULTI_NIC=true, a pod
// annotated k8s.amazonaws.com/nicConfig=multi-nic-attachment (the runtime
// hands the annotation to aws-cni) gets eth0 with an address from card 0's
// pool and mNicIf1 with one from card 1's, each on an ENI of that card in
// EC2 and in that card's checkpoint (ipam.json, ipam-nic-1.json); pods
// without the annotation beside them get eth0 alone, from card 0. Each
// interface of a multi-NIC pod reaches the VPC router through its own
// card: the node routes the interface's address out of the link of the
// ENI that carries it (the kernel's decision is asserted, and the echo is
// counted on that link's VPC end), and the reply comes back (the upstream
// namespace routes each pod address back through its ENI, as the VPC
// does). A normal delete frees the address on every card; a multi-NIC
// pod's DEL lost while the agent was down (queue dropped) is reclaimed on
// every card by the reconciler, while a live multi-NIC pod keeps both
// addresses and the node stays consistent (runtime, every card's
// checkpoint and introspection, EC2).
func TestMultiNICPodsBesideRegularOnes(t *testing.T) {
	n := NewNode(t, Options{InstanceType: multiNICInstance, Env: map[string]string{"ENABLE_MULTI_NIC": "true"}})
	waitCardFree(t, n)

	regular := n.ParallelRun(t, "reg", 4, 2)
	var multi []*Pod
	var addrs [][]netip.Addr
	for i := 0; i < 3; i++ {
		waitCardFree(t, n)
		p := n.RunMultiNICPod(t, n.NextName("mnic"))
		// CRI-O 1.34 does hand the annotations to the plugin; should a
		// version not, its multi-NIC pods get eth0 alone.
		if name, _ := selectedRuntime(); name == RuntimeCRIO && i == 0 {
			if ifs, err := n.PodAddrs(p); err == nil && len(ifs) == 1 {
				t.Skipf("e2e: %s does not pass the pod's annotations to the CNI plugin (io.kubernetes.cri.pod-annotations): the multi-NIC pod got only %v", n.RT.Version(), ifs)
			}
		}
		multi = append(multi, p)
		addrs = append(addrs, multiNICAddrs(t, n, p))
	}
	for _, p := range regular {
		ifs, err := n.PodAddrs(p)
		require.NoError(t, err)
		assert.Equalf(t, map[string][]netip.Addr{"eth0": {p.IP}}, ifs, "regular pod %s has eth0 alone", p.Name)
		eni, ok := n.ENIHolding(p.IP)
		if assert.Truef(t, ok, "pod %s's %s is on no ENI in EC2", p.Name, p.IP) {
			assert.Zerof(t, eni.Card, "regular pod %s's %s is on card %d", p.Name, p.IP, eni.Card)
		}
		assert.Empty(t, cardAddrs(t, n, p.ID)[1], "card 1 holds nothing for a regular pod")
	}
	// The agent set up every ENI's link, card 1's with table 10000+device+100.
	checked, err := n.CheckENILinks()
	require.NoError(t, err)
	assert.NotZero(t, checked, "card 1's ENI carries addresses")
	cards, err := n.IPAMD.AssignedOnCards()
	require.NoError(t, err)
	assert.Len(t, cards[0], len(regular)+len(multi), "card 0 serves every pod")
	assert.Len(t, cards[1], len(multi), "card 1 serves the multi-NIC pods only")
	for i, p := range multi {
		for card, ip := range addrs[i] {
			assert.Equalf(t, p.Ref(), cards[card][ip].Pod, "card %d's introspection: owner of %s", card, ip)
		}
	}

	// Each interface through its own card; the pods reach each other.
	for card, ip := range addrs[0] {
		assert.NoErrorf(t, n.PingVPCFrom(t, multi[0], ip), "%s of %s (card %d)", MultiNICIfName(card), multi[0].Name, card)
	}
	assert.NoError(t, n.PingVPCFrom(t, regular[0], regular[0].IP), "a regular pod")
	assert.NoError(t, n.Ping(multi[0], regular[0]))
	assert.NoError(t, n.Ping(regular[1], multi[1]))
	requireConsistent(t, n)

	// A normal delete frees the pod's address on every card.
	gone := multi[2]
	n.MustDeletePod(t, gone)
	n.MustDeletePod(t, regular[3])
	var held []netip.Addr
	took, ok := WaitFor(10*time.Second, func() bool {
		held = heldOnCards(t, n, append(addrs[2], regular[3].IP))
		return len(held) == 0
	})
	require.Truef(t, ok, "still held %v after the deletes: %v", took, held)
	assert.Empty(t, cardAddrs(t, n, gone.ID), "no card's checkpoint holds the deleted pod")
	for _, ip := range addrs[2] {
		requirePodRules(t, n, ip, false)
	}
	assert.Empty(t, n.IPAMD.Queue(), "no DEL was queued: ipamd was up")

	// A lost DEL: the reconciler frees the pod's address on every card,
	// after the grace period; the live multi-NIC pod keeps both.
	lost, live := multi[1], multi[0]
	require.NoError(t, n.IPAMD.Stop())
	n.MustDeletePod(t, lost)
	dropped, err := n.IPAMD.DropQueue()
	require.NoError(t, err)
	require.NotZero(t, dropped, "the plugin queued the DEL while the agent was down")
	restart := time.Now()
	require.NoError(t, n.IPAMD.Start())
	assert.Equal(t, addrs[1], heldOnCards(t, n, addrs[1]), "after the restart the lost pod's addresses are still held on every card")
	took, ok = WaitFor(ReconcileStartDelay+ReconcileGrace+120*time.Second, func() bool {
		held = heldOnCards(t, n, addrs[1])
		return len(held) == 0
	})
	require.Truef(t, ok, "the reconciler did not free %v within %v", held, took)
	t.Logf("FIGURE reclaim latency, multi-NIC lost DEL: %d addresses (one per card) free %v after the restart (grace %v, interval %v)",
		len(addrs[1]), time.Since(restart).Round(time.Millisecond), ReconcileGrace, ReconcileInterval)
	assert.GreaterOrEqualf(t, time.Since(lost.Created), ReconcileGrace, "freed before the grace period")
	if st, err := n.IPAMD.Reconciler(); assert.NoError(t, err) {
		assert.GreaterOrEqual(t, st.Totals.Reclaimed, 1, "the reconciler freed them")
		t.Logf("reconciler totals: %+v", st.Totals)
	}
	assert.Empty(t, cardAddrs(t, n, lost.ID), "no card's checkpoint holds the lost pod")
	for _, ip := range addrs[1] {
		requirePodRules(t, n, ip, false)
	}
	assert.Equal(t, addrs[0], multiNICAddrs(t, n, live), "the live multi-NIC pod keeps both addresses")
	assert.Equal(t, addrs[0], heldOnCards(t, n, addrs[0]))
	for card, ip := range addrs[0] {
		assert.NoErrorf(t, n.PingVPCFrom(t, live, ip), "after the reclaim: %s of %s (card %d)", MultiNICIfName(card), live.Name, card)
	}
	for _, p := range regular[:3] {
		assert.NoError(t, n.CheckPodNetwork(p))
	}
	st := requireConsistent(t, n)
	assert.Len(t, st.Cards[1], 1, "card 1's checkpoint: the live multi-NIC pod alone")
	assert.Len(t, st.Checkpoint, 4, "card 0's checkpoint: three regular pods and the live multi-NIC pod")
}

// A fresh node loses no checkpoint: on its first start with
// ENABLE_MULTI_NIC=true no card's checkpoint exists, and no pod can hold
// an address of an ENI the agent attached at this very start, so no card
// starts a "lost checkpoint" rebuild (which holds the card's addresses
// back until the runtime lists sandboxes, failing multi-NIC ADDs
// meanwhile) and no rebuild marker is written.
func TestAFreshMultiNICNodeLosesNoCheckpoint(t *testing.T) {
	n := NewNode(t, Options{InstanceType: multiNICInstance, Env: map[string]string{"ENABLE_MULTI_NIC": "true"}})
	waitCardFree(t, n)
	lost, err := n.IPAMD.LogText("checkpoint lost")
	require.NoError(t, err)
	assert.Empty(t, lost, "a fresh node's first start")
	rebuilt, err := n.IPAMD.LogText("lost checkpoint fully rebuilt")
	require.NoError(t, err)
	assert.Empty(t, rebuilt, "a fresh node's first start")
}

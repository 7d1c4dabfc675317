package main

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// The runtime's sequence: DEL with the namespace, then it deletes the
// namespace. DEL removes the node route and rules at once and leaves the
// veth pair, which goes with the namespace: nothing is left on the node.
// (IPv6: driver's TestIPv6PodsSetupCheckPingRelease, same sequence.)
func TestDelThenRuntimeDeletesNetnsLeavesNothing(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 2, PerENI: 1})
	a, b := n.newPod("ns-a"), n.newPod("ns-b")
	rawA, resA := n.add(a, "1.0.0")
	rawB, resB := n.add(b, "1.0.0")
	for _, c := range []struct {
		p   *testPod
		raw []byte
	}{{a, rawA}, {b, rawB}} {
		n.del(c.p, c.raw, nil)
		assert.True(t, podHasLink(t, c.p, "eth0"), "the veth is left to the namespace")
		netnsutil.Delete(t, c.p.netns)
	}
	for _, ip := range []string{podIP(t, resA).String(), podIP(t, resB).String()} {
		for _, m := range n.logLines("node rules removed") {
			if m["ip"] == ip {
				ip = ""
			}
		}
		assert.Empty(t, ip, "DEL removed the rules itself")
	}
	n.requireClean()
	assert.Equal(t, 0, n.store().Stats().AssignedIPs)
}

// A runtime that keeps the namespace after DEL: the route and rules are
// gone after the first DEL; a second DEL (a retry) finds the namespace
// still there and deletes the veth pair, so nothing is left even though
// the namespace never goes. An ADD into the kept namespace works too.
func TestDelWithKeptNetnsCleansUp(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 2, PerENI: 1})
	a, b := n.newPod("kept-a"), n.newPod("kept-b")
	rawA, resA := n.add(a, "1.0.0")
	rawB, resB := n.add(b, "1.0.0")

	n.del(a, rawA, nil)
	n.del(b, rawB, nil)
	for _, ip := range []net.IP{podIP(t, resA), podIP(t, resB)} {
		assert.Empty(t, addressRoutes(n, ip), "route of %s", ip)
		to, from := addressRules(n, ip)
		assert.Empty(t, to, "512 rule of %s", ip)
		assert.Empty(t, from, "1536 rule of %s", ip)
	}

	// The runtime retries a's DEL (e.g. a later plugin of the chain
	// failed) and keeps the namespace.
	n.del(a, rawA, nil)
	assert.False(t, podHasLink(t, a, "eth0"))

	// b's namespace is reused: a new sandbox of the same pod in it.
	b.containerID += "2"
	rawB2, _ := n.add(b, "1.0.0")
	r := n.exec("CHECK", b, n.netconf("1.0.0", withPrev(rawB2)), nil)
	require.Equal(t, 0, r.exitCode, "CHECK of the re-added pod: %s", r)
	n.del(b, rawB2, nil)
	n.del(b, rawB2, nil) // the runtime keeps this namespace too

	n.requireNodeClean() // the namespaces are still there
	assert.True(t, podHasLink(t, a, "lo"), "the namespaces were kept")
	assert.Equal(t, 0, n.store().Stats().AssignedIPs)
}

// An old pod's late DEL that still has its namespace (and veth), after its
// address went to a new pod: the old pod's route is already replaced by
// the new pod's, the DEL removes neither that route nor the rules, and it
// deletes the old veth (the namespace outlived the first DEL).
func TestLateDelWithLiveNetnsSparesTheNewOwner(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 1})
	old := n.newPod("live-old")
	rawOld, resOld := n.add(old, "1.0.0")
	ip := podIP(t, resOld)
	// A first DEL without the namespace releases the address; the veth and
	// its route stay, and so (the address being routed) do the rules.
	n.del(old, rawOld, map[string]string{"CNI_NETNS": ""})
	require.Len(t, addressRoutes(n, ip), 1)

	fresh := n.newPod("live-new")
	rawNew, resNew := n.add(fresh, "1.0.0")
	require.Equal(t, ip.String(), podIP(t, resNew).String(), "the single address was reused")

	n.del(old, rawOld, nil)
	assert.False(t, podHasLink(t, old, "eth0"), "the old veth is deleted")
	r := n.exec("CHECK", fresh, n.netconf("1.0.0", withPrev(rawNew)), nil)
	require.Equal(t, 0, r.exitCode, "the new pod is intact after the old pod's late DEL: %s", r)
	to, from := addressRules(n, ip)
	assert.Len(t, to, 1)
	assert.Empty(t, from, "primary ENI: no 1536 rule")

	n.del(fresh, rawNew, nil)
	netnsutil.Delete(t, fresh.netns)
	n.requireClean()
}

package main

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

func TestCheckThenDelReleasesAndIsIdempotent(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 2, PerENI: 1})
	// Two pods so one is on a secondary ENI (1536 rule present).
	a, b := n.newPod("del-a"), n.newPod("del-b")
	rawA, resA := n.add(a, "1.0.0")
	rawB, resB := n.add(b, "1.0.0")

	for _, c := range []struct {
		p   *testPod
		raw []byte
	}{{a, rawA}, {b, rawB}} {
		r := n.exec("CHECK", c.p, n.netconf("1.0.0", withPrev(c.raw)), nil)
		require.Equal(t, 0, r.exitCode, "CHECK after ADD: %s", r)
	}
	r := n.exec("CHECK", a, n.netconf("1.0.0", nil), nil)
	require.NotEqual(t, 0, r.exitCode, "CHECK without prevResult")

	// Break a: remove its node route; CHECK must notice.
	ipA := podIP(t, resA)
	nh := n.nodeHandle()
	require.NoError(t, nh.RouteDel(&netlink.Route{Dst: &net.IPNet{IP: ipA, Mask: net.CIDRMask(32, 32)}, Table: 254, Scope: netlink.SCOPE_LINK}))
	r = n.exec("CHECK", a, n.netconf("1.0.0", withPrev(rawA)), nil)
	require.NotEqual(t, 0, r.exitCode, "CHECK with the node route gone: %s", r)
	require.NotNil(t, r.cniError())
	assert.Contains(t, r.cniError().Msg, "no route")

	for _, c := range []struct {
		p   *testPod
		raw []byte
		ip  net.IP
	}{{a, rawA, ipA}, {b, rawB, podIP(t, resB)}} {
		n.del(c.p, c.raw, nil)
		_, held := n.allocation(c.p)
		assert.False(t, held, "ipamd released %s", c.p.name)
		assert.Empty(t, addressRoutes(n, c.ip), "node route removed")
		to, from := addressRules(n, c.ip)
		assert.Empty(t, to, "512 rule removed")
		assert.Empty(t, from, "1536 rule removed")
		assert.True(t, podHasLink(t, c.p, "eth0"), "pod interface left for the runtime's namespace deletion")
		// Repeated DEL (the namespace outlived the first: it is deleted
		// now), then containerd's second DEL with no namespace.
		n.del(c.p, c.raw, nil)
		assert.False(t, podHasLink(t, c.p, "eth0"), "pod interface deleted by the repeated DEL")
		n.del(c.p, c.raw, map[string]string{"CNI_NETNS": ""})
		n.del(c.p, nil, map[string]string{"CNI_NETNS": ""})
	}
	n.requireClean()
	assert.Equal(t, 0, n.store().Stats().AssignedIPs)
	entries, _ := delqueue.List(n.queueDir)
	assert.Empty(t, entries, "nothing queued while ipamd answered")

	// DEL of something never added.
	ghost := n.newPod("ghost")
	n.del(ghost, nil, nil)
}

func TestDelAfterNetnsGone(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 2, PerENI: 1})
	a, b := n.newPod("gone-a"), n.newPod("gone-b")
	rawA, _ := n.add(a, "1.0.0")
	rawB, _ := n.add(b, "1.0.0")
	// The runtime deleted the namespaces before DEL (CNI_NETNS still set,
	// path gone): the veths vanished with them, the rules did not.
	for _, p := range []*testPod{a, b} {
		netnsutil.Delete(t, p.netns)
	}
	require.Eventually(t, func() bool { return len(n.podLinks("eni")) == 0 }, 5*time.Second, 20*time.Millisecond)
	require.NotEmpty(t, n.podRules())
	n.del(a, rawA, nil)
	n.del(b, rawB, nil)
	n.requireClean()
}

func TestDelWithIPAMDDownQueuesAndTearsDown(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 2, PerENI: 1})
	a, b := n.newPod("down-a"), n.newPod("down-b")
	rawA, resA := n.add(a, "1.0.0")
	_, _ = n.add(b, "1.0.0")
	n.stopIPAMD()

	began := time.Now()
	n.del(a, rawA, nil)
	assert.Less(t, time.Since(began), 10*time.Second, "DEL does not hang on a dead ipamd")
	// b: no prevResult and the namespace already gone; still success.
	netnsutil.Delete(t, b.netns)
	n.del(b, nil, nil)

	entries, bad := delqueue.List(n.queueDir)
	require.Empty(t, bad)
	require.Len(t, entries, 2)
	byID := map[string]delqueue.Entry{}
	for _, e := range entries {
		byID[e.ContainerID] = e
	}
	e, ok := byID[a.containerID]
	require.True(t, ok, "queued DEL for a: %+v", entries)
	assert.Equal(t, "eth0", e.IfName)
	assert.Equal(t, networkName, e.NetworkName)
	assert.Equal(t, a.namespace, e.PodNamespace)
	assert.Equal(t, a.name, e.PodName)
	assert.Equal(t, a.uid, e.PodUID)
	assert.Contains(t, e.Reason, "unreachable")
	_, ok = byID[b.containerID]
	assert.True(t, ok, "queued DEL for b")

	// a's route and rules removed from prevResult; b's rules stay (nothing
	// told us its address) until ipamd is back.
	assert.Empty(t, addressRoutes(n, podIP(t, resA)))
	to, from := addressRules(n, podIP(t, resA))
	assert.Empty(t, to)
	assert.Empty(t, from)
	// The runtime deletes a's namespace after the DEL; the veths go with
	// the namespaces, which the kernel destroys asynchronously.
	netnsutil.Delete(t, a.netns)
	require.Eventually(t, func() bool { return len(n.podLinks("eni")) == 0 }, 5*time.Second, 20*time.Millisecond)

	// ipamd comes back and replays the queue.
	n.startIPAMD()
	require.Eventually(t, func() bool {
		_, heldA := n.allocation(a)
		_, heldB := n.allocation(b)
		return !heldA && !heldB
	}, 10*time.Second, 50*time.Millisecond, "ipamd replays the queued DELs")
	left, _ := delqueue.List(n.queueDir)
	assert.Empty(t, left)
}

func TestDelFromPrevResultSparesAReusedAddress(t *testing.T) {
	// containerd's second DEL for an old sandbox arrives after its address
	// went to a new pod: the old prevResult names the new pod's address.
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 1})
	old := n.newPod("reuse-old")
	rawOld, resOld := n.add(old, "1.0.0")
	old.netnsPath = ""
	n.del(old, rawOld, nil) // first DEL without netns: release only
	netnsutil.Delete(t, old.netns)

	fresh := n.newPod("reuse-new")
	rawNew, resNew := n.add(fresh, "1.0.0")
	require.Equal(t, podIP(t, resOld).String(), podIP(t, resNew).String(), "the single address was reused")

	n.del(old, rawOld, map[string]string{"CNI_NETNS": ""})
	r := n.exec("CHECK", fresh, n.netconf("1.0.0", withPrev(rawNew)), nil)
	require.Equal(t, 0, r.exitCode, "the new pod is intact after the old pod's late DEL: %s", r)
	n.del(fresh, rawNew, nil)
	netnsutil.Delete(t, fresh.netns)
	n.requireClean()
}

// podHasLink says whether the pod's namespace holds the link (through a
// short-lived handle, which does not keep the namespace alive).
func podHasLink(t *testing.T, p *testPod, name string) bool {
	t.Helper()
	h, err := netnsutil.HandleAt(p.netnsPath)
	require.NoError(t, err)
	defer h.Close()
	_, err = h.LinkByName(name)
	return err == nil
}

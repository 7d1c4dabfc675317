package main

import (
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// Issue 11, item 5: an old pod's late DEL (ipamd: unknown pod, teardown
// from prevResult) checks that no live interface routes its address, and
// only then removes the address's rules. If the ADD of a new pod given
// that address adds its route and rules in between, the DEL used to strip
// the new pod's rules. The DEL runs in this process (in the node
// namespace) so the test can stop it between its check and its teardown;
// the ADD is a real plugin process.
func TestLateDelCheckedBeforeAnAddCannotStripItsRules(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 2, PerENI: 1})
	a, b := n.newPod("race-a"), n.newPod("race-b")
	rawA, resA := n.add(a, "1.0.0")
	rawB, resB := n.add(b, "1.0.0")
	// The old pod is the one on the secondary ENI: its address has a 1536
	// rule too.
	old, rawOld, ip := a, rawA, podIP(t, resA)
	other, rawOther := b, rawB
	if _, from := addressRules(n, ip); len(from) == 0 {
		old, rawOld, ip = b, rawB, podIP(t, resB)
		other, rawOther = a, rawA
	}
	_, from := addressRules(n, ip)
	require.Len(t, from, 1, "one pod is on the secondary ENI")

	// containerd's first DEL without a namespace releases the address;
	// then the sandbox's namespace goes, and its veth and route with it.
	old.netnsPath = ""
	n.del(old, rawOld, nil)
	_, held := n.allocation(old)
	require.False(t, held)
	netnsutil.Delete(t, old.netns)
	require.Eventually(t, func() bool { return len(addressRoutes(n, ip)) == 0 }, 5*time.Second, 20*time.Millisecond)

	checked := make(chan net.IP, 1)
	resume := make(chan struct{})
	var resumeOnce sync.Once
	letGo := func() { resumeOnce.Do(func() { close(resume) }) }
	pause := driver.AfterOwnershipCheck(func(ip net.IP) {
		checked <- ip
		<-resume
	})
	t.Cleanup(letGo)

	// The late DEL of the old pod, with its prevResult and no namespace.
	delDone := make(chan error, 1)
	go func() {
		args := &skel.CmdArgs{
			ContainerID: old.containerID,
			IfName:      old.ifName,
			Args:        old.cniArgs(),
			Path:        filepath.Dir(pluginBin),
			StdinData:   n.netconf("1.0.0", withPrev(rawOld)),
		}
		var derr error
		nerr := n.node.Do(func(ns.NetNS) error { derr = runDel(args, pause); return nil })
		delDone <- errors.Join(nerr, derr)
	}()
	select {
	case got := <-checked:
		require.Equal(t, ip.String(), got.String())
	case err := <-delDone:
		t.Fatalf("DEL finished without reaching its teardown (err %v)", err)
	case <-time.After(20 * time.Second):
		t.Fatal("DEL did not reach its ownership check")
	}

	// The DEL has checked (no route to the address) and not torn down
	// yet. Now the new pod's ADD: ipamd hands it the same address.
	fresh := n.newPod("race-new")
	addDone := make(chan cniRun, 1)
	addErr := make(chan error, 1)
	go func() {
		r, err := n.run("ADD", fresh, n.netconf("1.0.0", nil), nil)
		if err != nil {
			addErr <- err
			return
		}
		addDone <- r
	}()
	waiting := func() bool {
		for _, m := range n.logLines("waiting for the address lock") {
			if m["cmd"] == "ADD" && m["pod"] == fresh.namespace+"/"+fresh.name {
				return true
			}
		}
		return false
	}
	var addRun *cniRun
	deadline := time.Now().Add(20 * time.Second)
	for addRun == nil && !waiting() {
		select {
		case r := <-addDone:
			addRun = &r // only without the lock: the ADD ran into the window
		case err := <-addErr:
			t.Fatalf("run ADD: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "ADD neither waited for the address lock nor finished")
	}
	if addRun == nil {
		assert.Empty(t, addressRoutes(n, ip), "the waiting ADD has not routed the address yet")
	}

	// Let the DEL tear down; the ADD goes on once the DEL lets go.
	letGo()
	select {
	case err := <-delDone:
		require.NoError(t, err, "DEL")
	case <-time.After(20 * time.Second):
		t.Fatal("DEL did not finish")
	}
	if addRun == nil {
		select {
		case r := <-addDone:
			addRun = &r
		case err := <-addErr:
			t.Fatalf("run ADD: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("ADD did not finish after the DEL let go of the lock")
		}
	}
	require.Equal(t, 0, addRun.exitCode, "ADD: %s", addRun)
	res, err := create.Create("1.0.0", addRun.stdout)
	require.NoError(t, err)
	cur, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	require.Equal(t, ip.String(), podIP(t, cur).String(), "ipamd gave the new pod the old pod's address")

	// The DEL did tear down (its check came before the ADD)...
	removed := false
	for _, m := range n.logLines("node rules removed") {
		if m["cmd"] == "DEL" && m["ip"] == ip.String() {
			removed = true
		}
	}
	assert.True(t, removed, "the late DEL removed the old pod's rules")
	// ...and the new pod, given the same address, is whole.
	r := n.exec("CHECK", fresh, n.netconf("1.0.0", withPrev(addRun.stdout)), nil)
	require.Equal(t, 0, r.exitCode, "CHECK of the new pod after the late DEL: %s", r)
	to, from := addressRules(n, ip)
	assert.Len(t, to, 1, "the new pod's 512 rule")
	assert.Len(t, from, 1, "the new pod's 1536 rule")
	routes := addressRoutes(n, ip)
	require.Len(t, routes, 1)
	l, err := n.nodeHandle().LinkByIndex(routes[0].LinkIndex)
	require.NoError(t, err)
	assert.Equal(t, hostVethName("eni", fresh.namespace, fresh.name), l.Attrs().Name)

	// The old pod's DEL again (containerd retries): still nothing of the
	// new pod goes.
	n.del(old, rawOld, nil)
	r = n.exec("CHECK", fresh, n.netconf("1.0.0", withPrev(addRun.stdout)), nil)
	require.Equal(t, 0, r.exitCode, "CHECK of the new pod after a repeated late DEL: %s", r)

	// The runtime deletes each namespace after its DEL.
	n.del(fresh, addRun.stdout, nil)
	netnsutil.Delete(t, fresh.netns)
	n.del(other, rawOther, nil)
	netnsutil.Delete(t, other.netns)
	n.requireClean()
}

// addressRoutes lists the node's main-table routes to ip/32.
func addressRoutes(n *testNode, ip net.IP) []netlink.Route {
	n.t.Helper()
	routes, err := n.nodeHandle().RouteListFiltered(netlink.FAMILY_V4,
		&netlink.Route{Dst: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}, Table: 254},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	require.NoError(n.t, err)
	return routes
}

// addressRules splits the node's pod rules for ip into 512 and 1536 ones.
func addressRules(n *testNode, ip net.IP) (to, from []netlink.Rule) {
	for _, r := range n.podRules() {
		switch {
		case r.Priority == 512 && r.Dst != nil && r.Dst.IP.Equal(ip):
			to = append(to, r)
		case r.Priority == 1536 && r.Src != nil && r.Src.IP.Equal(ip):
			from = append(from, r)
		}
	}
	return to, from
}

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// IPv4 egress for a pod of an IPv6 cluster, on a real kernel: the pod gets
// v4if0 with a 169.254.172.x/22 address and upstream's routes, the node
// the host end with the gateway address and a /32 route, SNAT to the node
// IP (a TCP peer in the "VPC" sees the node's address), and DEL takes it
// all away again, host-local lease included.
func TestV4EgressAddAndDel(t *testing.T) {
	n := newEgressNode(t, false)
	p := n.newPod("a")
	res := n.add(p)

	// Result: aws-cni's, plus the host end and v4if0; no new IP.
	require.Len(t, res.Interfaces, 5, "%+v", res.Interfaces)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "2001:db8:5::7/128", res.IPs[0].Address.String())
	hostVeth := res.Interfaces[3].Name
	assert.Equal(t, "", res.Interfaces[3].Sandbox)
	assert.Equal(t, v4IfName, res.Interfaces[4].Name)
	assert.Equal(t, p.netnsPath, res.Interfaces[4].Sandbox)

	// Pod side.
	ph := handle(t, p.netns)
	link, err := ph.LinkByName(v4IfName)
	require.NoError(t, err)
	assert.Equal(t, 9001, link.Attrs().MTU)
	addrs, err := ph.AddrList(link, netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, addrs, 1)
	podIP := addrs[0].IP
	assert.Equal(t, "169.254.172.2/22", addrs[0].IPNet.String(), "host-local's first address after the gateway")
	assert.ElementsMatch(t, []string{
		"169.254.172.1/32 src 169.254.172.2 scope link dev v4if0",
		"169.254.172.0/22 via 169.254.172.1 src 169.254.172.2 scope universe dev v4if0",
		"default via 169.254.172.1 scope universe dev v4if0",
	}, routeStrings(t, ph, netlink.FAMILY_V4))

	// Node side.
	nh := handle(t, n.node)
	hl, err := nh.LinkByName(hostVeth)
	require.NoError(t, err)
	haddrs, err := nh.AddrList(hl, netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, haddrs, 1)
	assert.Equal(t, "169.254.172.1/32", haddrs[0].IPNet.String())
	assert.Equal(t, netlink.SCOPE_LINK, netlink.Scope(haddrs[0].Scope))
	assert.Contains(t, routeStrings(t, nh, netlink.FAMILY_V4), "169.254.172.2/32 scope link dev "+hostVeth)
	fwd, err := netnsutil.ReadSysctl(n.node, "net/ipv4/ip_forward")
	require.NoError(t, err)
	assert.Equal(t, "1", fwd)

	chain := chainName(v4Egress, networkName, p.containerID)
	comment := fmt.Sprintf(`-m comment --comment "name: \"aws-cni\" id: \"%s\""`, p.containerID)
	rules := n.natRules()
	for _, want := range []string{
		"-N " + chain,
		"-A " + chain + " -d 224.0.0.0/4 " + comment + " -j ACCEPT",
		"-A " + chain + " " + comment + " -j SNAT --to-source " + n.nodeIP + " --random-fully",
		"-A POSTROUTING -s " + podIP.String() + "/32 " + comment + " -j " + chain,
	} {
		assert.True(t, hasLine(rules, want), "missing %q in\n%s", want, rules)
	}
	assert.Equal(t, []string{"169.254.172.2"}, n.leases())

	// Traffic: the pod reaches an IPv4 address in the VPC, which sees the
	// node's address.
	require.NoError(t, netnsutil.Ping(p.netns, net.ParseIP(n.uplinkIP), 2*time.Second))
	peer, err := n.peerOf(p)
	require.NoError(t, err)
	assert.Equal(t, n.nodeIP, peer.String(), "SNAT to the node IP")

	// DEL: lease, interface (both ends, host route) and SNAT gone.
	n.del(p)
	assert.Empty(t, n.leases())
	_, err = ph.LinkByName(v4IfName)
	assert.Error(t, err, "v4if0 still in the pod")
	_, err = nh.LinkByName(hostVeth)
	assert.Error(t, err, "host end still on the node")
	assert.NotContains(t, routeStrings(t, nh, netlink.FAMILY_V4), "169.254.172.2/32 scope link dev "+hostVeth)
	rules = n.natRules()
	assert.NotContains(t, rules, chain)
	// The pod's own interface is untouched.
	_, err = ph.LinkByName("eth0")
	assert.NoError(t, err)

	// A second DEL (runtimes repeat them) succeeds.
	n.del(p)

	log, err := os.ReadFile(n.logFile)
	require.NoError(t, err)
	assert.Contains(t, string(log), `"msg":"egress interface ready"`)
	assert.Contains(t, string(log), `"msg":"egress removed"`)
}

// A CNI 1.1.0 list (AWS_VPC_CNI_CONFLIST_CNI_VERSION) works the same.
func TestV4EgressCNI110(t *testing.T) {
	n := newEgressNode(t, false)
	p := n.newPod("a")
	p.prevResult["cniVersion"] = "1.1.0"
	conf := n.netconf(p, map[string]any{"cniVersion": "1.1.0"})
	r := n.exec("ADD", p, conf)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, string(r.stdout), `"cniVersion": "1.1.0"`)
	assert.Contains(t, string(r.stdout), `"name": "v4if0"`)
	peer, err := n.peerOf(p)
	require.NoError(t, err)
	assert.Equal(t, n.nodeIP, peer.String())
	r = n.exec("DEL", p, conf)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Empty(t, n.leases())
}

// Two pods get distinct addresses and chains; deleting one leaves the
// other working.
func TestV4EgressTwoPods(t *testing.T) {
	n := newEgressNode(t, false)
	a, b := n.newPod("a"), n.newPod("b")
	n.add(a)
	n.add(b)
	assert.ElementsMatch(t, []string{"169.254.172.2", "169.254.172.3"}, n.leases())
	n.del(a)
	assert.Equal(t, []string{"169.254.172.3"}, n.leases())
	peer, err := n.peerOf(b)
	require.NoError(t, err)
	assert.Equal(t, n.nodeIP, peer.String())
	rules := n.natRules()
	assert.NotContains(t, rules, chainName(v4Egress, networkName, a.containerID))
	assert.Contains(t, rules, chainName(v4Egress, networkName, b.containerID))
}

// A DEL after the runtime removed the pod's namespace still releases the
// lease and removes the chain and its jump (upstream leaves them: it finds
// the jump through the pod's interface).
func TestV4EgressDelWithoutNamespace(t *testing.T) {
	n := newEgressNode(t, false)
	p := n.newPod("a")
	n.add(p)
	chain := chainName(v4Egress, networkName, p.containerID)
	require.Contains(t, n.natRules(), chain)
	netnsutil.Delete(t, p.netns)
	n.del(p)
	assert.Empty(t, n.leases())
	assert.NotContains(t, n.natRules(), chain)
	p.netnsPath = ""
	n.del(p) // CNI_NETNS empty: still fine
}

// Disabled (ENABLE_V4_EGRESS=false, or any IPv4 cluster without
// ENABLE_V6_EGRESS): ADD passes aws-cni's result through and nothing is
// created; DEL does nothing.
func TestDisabledPassesThrough(t *testing.T) {
	n := newEgressNode(t, false)
	p := n.newPod("a")
	r := n.exec("ADD", p, n.netconf(p, map[string]any{"enabled": "false", "nodeIP": ""}))
	require.Equal(t, 0, r.code, "%s", r)
	var got, want map[string]any
	require.NoError(t, json.Unmarshal(r.stdout, &got))
	// The CNI library prints an empty "dns" object for 0.4.0 results
	// (upstream's output has it too).
	assert.Equal(t, map[string]any{}, got["dns"])
	delete(got, "dns")
	wantJSON, _ := json.Marshal(p.prevResult)
	require.NoError(t, json.Unmarshal(wantJSON, &want))
	assert.Equal(t, want, got)
	names, err := netnsutil.LinkNames(p.netns)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"lo", "eth0"}, names)
	assert.Empty(t, n.leases())
	r = n.exec("DEL", p, n.netconf(p, map[string]any{"enabled": "false", "nodeIP": ""}))
	require.Equal(t, 0, r.code, "%s", r)
}

// Failures leave nothing behind: no lease, no interface, no chain.
func TestV4EgressFailuresLeaveNothing(t *testing.T) {
	n := newEgressNode(t, false)
	p := n.newPod("a")
	for _, tc := range []struct {
		name  string
		extra map[string]any
		msg   string
	}{
		{"no prevResult", map[string]any{"prevResult": nil}, "must be called as a chained plugin"},
		{"enabled without nodeIP", map[string]any{"nodeIP": ""}, "global unicast IPv6"},
		{"bad mtu", map[string]any{"mtu": "big"}, "mtu"},
		{"no ipam binary", map[string]any{"ipam": map[string]any{"type": "no-such-ipam"}}, "no-such-ipam"},
		// The IPAM range is IPv6 while nodeIP is IPv4.
		{"family mismatch", map[string]any{"ipam": map[string]any{"type": "host-local", "dataDir": n.dataDir,
			"ranges": []any{[]any{map[string]any{"subnet": "fd00::ac:00/118"}}}}}, "not of the egress family"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.exec("ADD", p, n.netconf(p, tc.extra))
			require.NotEqual(t, 0, r.code, "%s", r)
			assert.Contains(t, string(r.stdout), tc.msg)
			assert.Empty(t, n.leases())
			names, err := netnsutil.LinkNames(p.netns)
			require.NoError(t, err)
			assert.NotContains(t, names, v4IfName)
			assert.NotContains(t, n.natRules(), "CNI-E4-")
		})
	}
}

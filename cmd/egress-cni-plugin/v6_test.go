package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// IPv6 egress for a pod of an IPv4 cluster (ENABLE_V6_EGRESS), on a real
// kernel: IPv6 off on the pod's eth0, v6if0 with a ULA from fd00::ac:00/118
// and a default route via the host end's link-local address, a /128 host
// route, ip6tables SNAT to the node's IPv6 address (a TCP peer in the "VPC"
// sees it), and DEL takes it all away.
func TestV6EgressAddAndDel(t *testing.T) {
	n := newEgressNode(t, true)
	p := n.newPod("a")
	res := n.add(p)
	require.Len(t, res.Interfaces, 5)
	hostVeth := res.Interfaces[3].Name
	assert.Equal(t, v6IfName, res.Interfaces[4].Name)

	off, err := netnsutil.ReadSysctl(p.netns, "net/ipv6/conf/eth0/disable_ipv6")
	require.NoError(t, err)
	assert.Equal(t, "1", off, "IPv6 stays off the pod's primary interface")

	ph := handle(t, p.netns)
	link, err := ph.LinkByName(v6IfName)
	require.NoError(t, err)
	addrs, err := ph.AddrList(link, netlink.FAMILY_V6)
	require.NoError(t, err)
	var ula string
	for _, a := range addrs {
		if !a.IP.IsLinkLocalUnicast() {
			ula = a.IPNet.String()
			assert.Zero(t, a.Flags&0x40, "tentative") // IFA_F_TENTATIVE
		}
	}
	assert.Equal(t, "fd00::ac:2/118", ula)

	nh := handle(t, n.node)
	hl, err := nh.LinkByName(hostVeth)
	require.NoError(t, err)
	ll, err := linkLocalOf(nh, hl)
	require.NoError(t, err)
	assert.Contains(t, routeStrings(t, ph, netlink.FAMILY_V6), "default via "+ll+" scope universe dev v6if0")
	hostRoutes := routeStrings(t, nh, netlink.FAMILY_V6)
	found := false
	for _, r := range hostRoutes {
		if r == "fd00::ac:2/128 scope universe dev "+hostVeth || r == "fd00::ac:2/128 scope host dev "+hostVeth {
			found = true
		}
	}
	assert.True(t, found, "host route to fd00::ac:2 in %v", hostRoutes)
	fwd, err := netnsutil.ReadSysctl(n.node, "net/ipv6/conf/all/forwarding")
	require.NoError(t, err)
	assert.Equal(t, "1", fwd)

	chain := chainName(v6Egress, networkName, p.containerID)
	comment := fmt.Sprintf(`-m comment --comment "name: \"aws-cni\" id: \"%s\""`, p.containerID)
	rules := n.natRules()
	for _, want := range []string{
		"-N " + chain,
		"-A " + chain + " -d ff00::/8 " + comment + " -j ACCEPT",
		"-A " + chain + " " + comment + " -j SNAT --to-source " + n.nodeIP + " --random-fully",
		"-A POSTROUTING -s fd00::ac:2/128 " + comment + " -j " + chain,
	} {
		assert.True(t, hasLine(rules, want), "missing %q in\n%s", want, rules)
	}
	assert.Equal(t, []string{"fd00::ac:2"}, n.leases())

	peer, err := n.peerOf(p)
	require.NoError(t, err)
	assert.Equal(t, n.nodeIP, peer.String(), "SNAT to the node's IPv6 address")

	n.del(p)
	assert.Empty(t, n.leases())
	_, err = ph.LinkByName(v6IfName)
	assert.Error(t, err)
	_, err = nh.LinkByName(hostVeth)
	assert.Error(t, err)
	assert.NotContains(t, n.natRules(), chain)
	n.del(p)
}

// IPv6 egress refuses a nodeIP it cannot SNAT to (IMDS had no IPv6).
func TestV6EgressNeedsGlobalNodeIP(t *testing.T) {
	n := newEgressNode(t, true)
	p := n.newPod("a")
	r := n.exec("ADD", p, n.netconf(p, map[string]any{"nodeIP": "fe80::1"}))
	require.NotEqual(t, 0, r.code)
	assert.Contains(t, string(r.stdout), "global unicast IPv6")
	assert.Empty(t, n.leases())
}

func linkLocalOf(h *netlink.Handle, l netlink.Link) (string, error) {
	addrs, err := h.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() {
			return a.IP.String(), nil
		}
	}
	return "", fmt.Errorf("%s has no link-local address", l.Attrs().Name)
}

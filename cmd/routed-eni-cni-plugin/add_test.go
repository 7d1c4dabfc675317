package main

import (
	"net"
	"strconv"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// requireWired checks every piece ADD sets up for p with address ip on a
// device whose table is table, reading the kernel back.
func (n *testNode) requireWired(p *testPod, res *current.Result, table int) {
	t := n.t
	t.Helper()
	ip := podIP(t, res)
	hostVeth := hostVethName("eni", p.namespace, p.name)

	// Result shape (upstream's contract).
	require.Len(t, res.Interfaces, 3)
	assert.Equal(t, hostVeth, res.Interfaces[0].Name)
	assert.Equal(t, p.ifName, res.Interfaces[1].Name)
	assert.Equal(t, p.netns.Path(), res.Interfaces[1].Sandbox)
	assert.Equal(t, strconv.Itoa(table), res.Interfaces[1].Mac, "container entry's mac carries the route table")
	assert.Equal(t, dummyIfName(p.namespace, p.name), res.Interfaces[2].Name)
	assert.Equal(t, "0", res.Interfaces[2].Mac)
	require.NotNil(t, res.IPs[0].Interface)
	assert.Equal(t, 1, *res.IPs[0].Interface)
	ones, bits := res.IPs[0].Address.Mask.Size()
	assert.Equal(t, []int{32, 32}, []int{ones, bits})

	// ipamd's record.
	alloc, ok := n.allocation(p)
	require.True(t, ok, "ipamd holds the pod")
	assert.Equal(t, ip.String(), alloc.IP.String(), "the pod got the address ipamd chose")
	assert.Equal(t, strconv.Itoa(alloc.DeviceNumber), res.Interfaces[2].Sandbox, "dummy entry's sandbox is the device number")

	// Node side.
	nh := netnsutil.Handle(t, n.node)
	hl, err := nh.LinkByName(hostVeth)
	require.NoError(t, err, "host veth in the node namespace")
	assert.Equal(t, "veth", hl.Type())
	assert.NotZero(t, hl.Attrs().Flags&net.FlagUp, "host veth up")
	assert.Equal(t, 9001, hl.Attrs().MTU)
	mac := hl.Attrs().HardwareAddr
	assert.Equal(t, byte(0x02), mac[0]&0x03, "locally administered unicast MAC")
	for key, want := range map[string]string{"accept_ra": "0", "accept_redirects": "1", "forwarding": "0"} {
		v, err := netnsutil.ReadSysctl(n.node, "net/ipv6/conf/"+hostVeth+"/"+key)
		if err == nil {
			assert.Equal(t, want, v, key)
		}
	}
	routes, err := nh.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}, Table: 254},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	require.Len(t, routes, 1)
	assert.Equal(t, hl.Attrs().Index, routes[0].LinkIndex)
	assert.Equal(t, netlink.SCOPE_LINK, routes[0].Scope)
	var to, from []netlink.Rule
	for _, r := range n.podRules() {
		switch {
		case r.Priority == 512 && r.Dst != nil && r.Dst.IP.Equal(ip):
			to = append(to, r)
		case r.Priority == 1536 && r.Src != nil && r.Src.IP.Equal(ip):
			from = append(from, r)
		}
	}
	require.Len(t, to, 1, "rule 512: to %s lookup main", ip)
	assert.Equal(t, 254, to[0].Table)
	if table == 254 {
		assert.Empty(t, from, "no 1536 rule for the primary ENI")
	} else {
		require.Len(t, from, 1, "rule 1536: from %s lookup %d", ip, table)
		assert.Equal(t, table, from[0].Table)
	}

	// Pod side.
	// A short-lived handle: one held would keep the namespace alive.
	ph, err := netnsutil.HandleAt(p.netnsPath)
	require.NoError(t, err)
	defer ph.Close()
	cl, err := ph.LinkByName(p.ifName)
	require.NoError(t, err)
	assert.NotZero(t, cl.Attrs().Flags&net.FlagUp, "pod interface up")
	assert.Equal(t, 9001, cl.Attrs().MTU)
	addrs, err := ph.AddrList(cl, netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, addrs, 1)
	assert.Equal(t, ip.String()+"/32", addrs[0].IPNet.String())
	proutes, err := ph.RouteList(cl, netlink.FAMILY_V4)
	require.NoError(t, err)
	var gwRoute, defRoute bool
	for _, r := range proutes {
		if r.Dst != nil && r.Dst.String() == "169.254.1.1/32" && r.Scope == netlink.SCOPE_LINK {
			gwRoute = true
		}
		if (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw.Equal(net.IPv4(169, 254, 1, 1)) {
			defRoute = true
		}
	}
	assert.True(t, gwRoute, "pod route 169.254.1.1/32 scope link: %v", proutes)
	assert.True(t, defRoute, "pod default via 169.254.1.1: %v", proutes)
	neighs, err := ph.NeighList(cl.Attrs().Index, netlink.FAMILY_V4)
	require.NoError(t, err)
	var neighOK bool
	for _, nb := range neighs {
		if nb.IP.Equal(net.IPv4(169, 254, 1, 1)) {
			neighOK = nb.State == netlink.NUD_PERMANENT && nb.HardwareAddr.String() == mac.String()
		}
	}
	assert.True(t, neighOK, "permanent neighbour 169.254.1.1 -> host veth MAC %s: %v", mac, neighs)
}

func TestAddWiresPodsAndTheyTalk(t *testing.T) {
	// One address per ENI: the first pod lands on one device, the second
	// on the other, so both the primary-ENI and the secondary-ENI paths
	// (with the 1536 rule) are exercised.
	n := newTestNode(t, devpool.Pool{ENIs: 2, PerENI: 1})
	a, b := n.newPod("web-a"), n.newPod("web-b")
	_, resA := n.add(a, "1.0.0")
	_, resB := n.add(b, "0.4.0") // an older runtime: the result is converted
	allocA, _ := n.allocation(a)
	allocB, _ := n.allocation(b)
	require.NotEqual(t, allocA.DeviceNumber, allocB.DeviceNumber)
	n.requireWired(a, resA, allocA.RouteTableID)
	n.requireWired(b, resB, allocB.RouteTableID)

	ipA, ipB := podIP(t, resA), podIP(t, resB)
	for _, c := range []struct {
		name string
		from *testPod
		to   net.IP
	}{
		{"a->b", a, ipB}, {"b->a", b, ipA},
	} {
		require.NoError(t, netnsutil.Ping(c.from.netns, c.to, 2*time.Second), c.name)
	}
	require.NoError(t, netnsutil.Ping(n.node, ipA, 2*time.Second), "node->a")
	require.NoError(t, netnsutil.Ping(n.node, ipB, 2*time.Second), "node->b")
	require.NoError(t, netnsutil.Ping(a.netns, net.ParseIP(nodeIP), 2*time.Second), "a->node")

	n.del(a, nil, nil)
	n.del(b, nil, nil)
	n.requireClean()
}

func TestAddAgainReplacesTheStaleVeth(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 4})
	p := n.newPod("retry")
	_, first := n.add(p, "1.0.0")
	_, second := n.add(p, "1.0.0") // the runtime retried
	assert.Equal(t, podIP(t, first).String(), podIP(t, second).String(), "same key, same address")
	alloc, _ := n.allocation(p)
	n.requireWired(p, second, alloc.RouteTableID)
	assert.Len(t, n.podLinks("eni"), 1)
	n.del(p, nil, nil)
	n.requireClean()
}

func TestAddWithNetworkPolicyModeWarnsAndSucceeds(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 2}, withIPAMDEnv("NETWORK_POLICY_ENFORCING_MODE", "standard"))
	p := n.newPod("np")
	_, res := n.add(p, "1.0.0")
	require.NotNil(t, podIP(t, res))
	warned := false
	for _, l := range n.logLines("network policy enforcement is not supported by this plugin; the pod is not registered with a policy agent") {
		warned = warned || l["level"] == "warn"
	}
	assert.True(t, warned, "ADD logs that policy enforcement is not supported")
	n.del(p, nil, nil)
	n.requireClean()
}

func TestAddHonoursMTUAndVethPrefix(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 2})
	p := n.newPod("mtu")
	r := n.exec("ADD", p, n.netconf("1.0.0", map[string]any{"mtu": "1500", "vethPrefix": "abc"}), nil)
	require.Equal(t, 0, r.exitCode, "%s", r)
	hl, err := n.nodeHandle().LinkByName(hostVethName("abc", p.namespace, p.name))
	require.NoError(t, err)
	assert.Equal(t, 1500, hl.Attrs().MTU)
	ph, err := netnsutil.HandleAt(p.netnsPath)
	require.NoError(t, err)
	cl, err := ph.LinkByName("eth0")
	ph.Close()
	require.NoError(t, err)
	assert.Equal(t, 1500, cl.Attrs().MTU)
	n.del(p, r.stdout, nil)
	n.requireClean()
}

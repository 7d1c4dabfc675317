package main

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// These run ADD and DEL in-process in a node namespace against a stand-in
// ipamd for pods attached to several network cards (multiNICNode).

// multiNICVerb is the CNI invocation of pod default/web in netnsPath,
// asking for a multi-NIC attachment through its annotation (unless
// single).
func multiNICVerb(t *testing.T, sock, netnsPath string, single bool, extra map[string]any) *skel.CmdArgs {
	t.Helper()
	conf := map[string]any{"addressLockDir": filepath.Join(t.TempDir(), "locks")}
	if !single {
		conf["runtimeConfig"] = map[string]any{"io.kubernetes.cri.pod-annotations": map[string]string{
			"k8s.amazonaws.com/nicConfig": "multi-nic-attachment", "other": "x"}}
	}
	for k, v := range extra {
		conf[k] = v
	}
	args, _ := verbConf(t, sock, conf)
	args.ContainerID, args.IfName, args.Netns = "c0ffeeweb", "eth0", netnsPath
	args.Args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=c0ffeeweb;K8S_POD_UID=uid-web"
	return args
}

// newPodNetns is a fresh pod namespace with lo up.
func newPodNetns(t *testing.T) ns.NetNS {
	t.Helper()
	p := netnsutil.New(t)
	netnsutil.SetUp(t, p, "lo")
	return p
}

// A pod annotated for a multi-NIC attachment asks ipamd for one address
// per card and gets one veth per address: interface i named eth0 then
// mNicIf<i>, its gateway 169.254.1.<i+1> (fe80::<i+1>), its routes in main
// (i = 0) or table i behind an in-pod rule, and on the node the route,
// the 512 rule and the 1536 rule into the card's ENI table. Traffic from
// each address leaves through its interface and card; DEL with ipamd's
// reply removes the node's routes and rules for every address, and the
// namespace's deletion takes every veth.
func TestAMultiNICPodTalksThroughEachInterface(t *testing.T) {
	netnsutil.RequireRoot(t)
	for _, n := range []int{2, 3} {
		for _, v6 := range []bool{false, true} {
			name := strconv.Itoa(n) + " cards IPv4"
			if v6 {
				name = strconv.Itoa(n) + " cards IPv6"
			}
			t.Run(name, func(t *testing.T) {
				cards := cardsFor(n, v6)
				m := newMultiNICNode(t, cards, v6)
				ipamd := &multiNICIPAMD{allocs: allocations(cards)}
				sock, _ := backendOnlyIPAMD(t, ipamd)
				podNs := newPodNetns(t)

				res, err := addInProcess(t, m.node, multiNICVerb(t, sock, podNs.Path(), false, nil))
				require.NoError(t, err)
				reqs := ipamd.addRequests()
				require.Len(t, reqs, 1)
				assert.True(t, reqs[0].RequiresMultiNICAttachment, "AddNetwork asks for a multi-NIC attachment")
				assert.Equal(t, "eth0", reqs[0].IfName)
				assert.Equal(t, networkName, reqs[0].NetworkName)
				assert.Equal(t, "c0ffeeweb", reqs[0].ContainerID)

				requireMultiNICResult(t, res, cards, podNs.Path())
				for i, c := range cards {
					requirePodInterfaceWired(t, m.node, podNs, i, c)
				}
				m.requireTalksThroughEachCard(t, podNs, cards)
				check := multiNICVerb(t, sock, podNs.Path(), false, map[string]any{"prevResult": prevResultOf(t, res)})
				require.NoError(t, inNodeNS(t, m.node, func() error { return cmdCheck(check) }), "CHECK of every interface")
				last := len(cards) - 1
				removePodRule(t, podNs, cards[last].podIP, last)
				require.Error(t, inNodeNS(t, m.node, func() error { return cmdCheck(check) }), "CHECK sees the last interface's in-pod rule gone")

				require.NoError(t, delInProcess(t, m.node, multiNICVerb(t, sock, podNs.Path(), false, map[string]any{"prevResult": prevResultOf(t, res)})))
				assert.Equal(t, []string{reasonPodDeleted}, ipamd.delReasons())
				m.requireNodeHasNoPodState(t, cards, false)
				netnsutil.Delete(t, podNs)
				m.requireNodeHasNoPodState(t, cards, true)
			})
		}
	}
}

// A pod without the annotation does not ask for a multi-NIC attachment.
func TestAPodWithoutTheAnnotationAsksForOneAddress(t *testing.T) {
	netnsutil.RequireRoot(t)
	cards := cardsFor(1, false)
	m := newMultiNICNode(t, cards, false)
	ipamd := &multiNICIPAMD{allocs: allocations(cards)}
	sock, _ := backendOnlyIPAMD(t, ipamd)
	podNs := newPodNetns(t)
	res, err := addInProcess(t, m.node, multiNICVerb(t, sock, podNs.Path(), true, nil))
	require.NoError(t, err)
	reqs := ipamd.addRequests()
	require.Len(t, reqs, 1)
	assert.False(t, reqs[0].RequiresMultiNICAttachment)
	requireMultiNICResult(t, res, cards, podNs.Path())
	m.requireTalksThroughEachCard(t, podNs, cards)
}

// When ipamd cannot be reached (or no longer knows the pod), DEL tears a
// multi-NIC pod down from prevResult alone: every interface's address,
// route and rules leave the node.
func TestDelFromPrevResultTearsDownEveryInterface(t *testing.T) {
	netnsutil.RequireRoot(t)
	for _, c := range []struct {
		name string
		n    int
		v6   bool
		gone bool // ipamd unreachable (else: it answers "unknown pod")
	}{
		{"3 cards IPv4, ipamd unreachable", 3, false, true},
		{"2 cards IPv6, ipamd unreachable", 2, true, true},
		{"3 cards IPv4, ipamd already released", 3, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cards := cardsFor(c.n, c.v6)
			m := newMultiNICNode(t, cards, c.v6)
			ipamd := &multiNICIPAMD{allocs: allocations(cards)}
			sock, _ := backendOnlyIPAMD(t, ipamd)
			podNs := newPodNetns(t)
			res, err := addInProcess(t, m.node, multiNICVerb(t, sock, podNs.Path(), false, nil))
			require.NoError(t, err)
			m.requireTalksThroughEachCard(t, podNs, cards)

			delSock := sock
			if c.gone {
				delSock = filepath.Join(t.TempDir(), "absent.sock")
			} else {
				ipamd.released = true
			}
			require.NoError(t, delInProcess(t, m.node, multiNICVerb(t, delSock, podNs.Path(), false, map[string]any{"prevResult": prevResultOf(t, res)})))
			m.requireNodeHasNoPodState(t, cards, false)
			if !c.gone {
				// A repeated DEL finding the namespace still there deletes
				// every one of the pod's veths.
				links, err := netnsutil.LinkNames(podNs)
				require.NoError(t, err)
				assert.Equal(t, []string{"lo"}, links)
			}
			netnsutil.Delete(t, podNs)
			m.requireNodeHasNoPodState(t, cards, true)
		})
	}
}

// A multi-NIC ADD is all or nothing: when interface 2 of 3 cannot be
// built, the interfaces before it are removed (veths, in-pod rules, node
// routes and rules) and every address goes back to ipamd (DelNetwork
// reason SetupNSFailed).
func TestAMultiNICSetupFailureGivesEveryAddressBack(t *testing.T) {
	netnsutil.RequireRoot(t)
	cards := cardsFor(3, false)
	m := newMultiNICNode(t, cards, false)
	ipamd := &multiNICIPAMD{allocs: allocations(cards)}
	sock, _ := backendOnlyIPAMD(t, ipamd)
	podNs := newPodNetns(t)
	// Something of the pod's already holds interface 2's name.
	ph, err := netnsutil.HandleAt(podNs.Path())
	require.NoError(t, err)
	defer ph.Close()
	require.NoError(t, ph.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "mNicIf2"}, PeerName: "blocker"}))

	_, err = addInProcess(t, m.node, multiNICVerb(t, sock, podNs.Path(), false, nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mNicIf2")
	assert.Equal(t, []string{reasonSetupFailed}, ipamd.delReasons(), "every address given back in one DelNetwork")

	m.requireNodeHasNoPodState(t, cards, true)
	links, err := netnsutil.LinkNames(podNs)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"lo", "mNicIf2", "blocker"}, links, "only what was there before")
	rules, err := ph.RuleList(netlink.FAMILY_V4)
	require.NoError(t, err)
	for _, r := range rules {
		assert.NotEqual(t, 1, r.Priority, "in-pod rule left: %s", r)
	}
}

// requireMultiNICResult checks the result's shape against the cards.
func requireMultiNICResult(t *testing.T, res *current.Result, cards []card, netnsPath string) {
	t.Helper()
	require.Len(t, res.Interfaces, 2*len(cards)+1)
	require.Len(t, res.IPs, len(cards))
	for i, c := range cards {
		assert.Equal(t, hostVethNameAt("eni", "default", "web", i), res.Interfaces[2*i].Name)
		assert.Empty(t, res.Interfaces[2*i].Sandbox)
		assert.Equal(t, current.Interface{Name: containerIfName("eth0", i), Sandbox: netnsPath, Mac: strconv.Itoa(c.table)}, *res.Interfaces[2*i+1])
		require.NotNil(t, res.IPs[i].Interface)
		assert.Equal(t, 2*i+1, *res.IPs[i].Interface)
		assert.Equal(t, hostPrefixOf(c.podIP).String(), res.IPs[i].Address.String())
	}
	assert.Equal(t, current.Interface{Name: dummyIfName("default", "web"), Mac: "0", Sandbox: strconv.Itoa(cards[0].device)},
		*res.Interfaces[2*len(cards)])
}

// requirePodInterfaceWired reads back interface i of pod default/web and
// its node side from the kernel.
func requirePodInterfaceWired(t *testing.T, node, podNs ns.NetNS, i int, c card) {
	t.Helper()
	requirePodInterfaceWiredFor(t, node, podNs, "web", i, c)
}

// requirePodInterfaceWiredFor is requirePodInterfaceWired for pod
// default/<pod>.
func requirePodInterfaceWiredFor(t *testing.T, node, podNs ns.NetNS, pod string, i int, c card) {
	t.Helper()
	family, gw := netlink.FAMILY_V4, net.IPv4(169, 254, 1, byte(i+1)).To4()
	if c.podIP.To4() == nil {
		family, gw = netlink.FAMILY_V6, net.ParseIP("fe80::"+strconv.Itoa(i+1))
	}
	podTable := 254
	if i > 0 {
		podTable = i
	}
	hostVeth := hostVethNameAt("eni", "default", pod, i)
	contIf := containerIfName("eth0", i)

	nh := netnsutil.Handle(t, node)
	hl, err := nh.LinkByName(hostVeth)
	require.NoError(t, err, "host veth %s", hostVeth)
	routes, err := nh.RouteListFiltered(family, &netlink.Route{Dst: hostPrefixOf(c.podIP), Table: 254}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	require.Len(t, routes, 1, "node route to %s", c.podIP)
	assert.Equal(t, hl.Attrs().Index, routes[0].LinkIndex)
	rules, err := nh.RuleList(family)
	require.NoError(t, err)
	var to, from []netlink.Rule
	for _, r := range rules {
		if r.Priority == 512 && r.Dst != nil && r.Dst.IP.Equal(c.podIP) {
			to = append(to, r)
		}
		if r.Priority == 1536 && r.Src != nil && r.Src.IP.Equal(c.podIP) {
			from = append(from, r)
		}
	}
	require.Len(t, to, 1, "rule 512 to %s", c.podIP)
	assert.Equal(t, 254, to[0].Table)
	if c.table > 1 && c.table != 254 {
		require.Len(t, from, 1, "rule 1536 from %s", c.podIP)
		assert.Equal(t, c.table, from[0].Table)
	} else {
		assert.Empty(t, from)
	}

	ph, err := netnsutil.HandleAt(podNs.Path())
	require.NoError(t, err)
	defer ph.Close()
	cl, err := ph.LinkByName(contIf)
	require.NoError(t, err, "pod interface %s", contIf)
	assert.NotZero(t, cl.Attrs().Flags&net.FlagUp)
	addrs, err := ph.AddrList(cl, family)
	require.NoError(t, err)
	var have bool
	for _, a := range addrs {
		have = have || a.IP.Equal(c.podIP)
	}
	assert.True(t, have, "%s on %s: %v", c.podIP, contIf, addrs)
	proutes, err := ph.RouteListFiltered(family, &netlink.Route{LinkIndex: cl.Attrs().Index, Table: podTable}, netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	var gwRoute, defRoute bool
	for _, r := range proutes {
		if r.Dst != nil && r.Dst.IP.Equal(gw) && (family == netlink.FAMILY_V6 || r.Scope == netlink.SCOPE_LINK) {
			gwRoute = true
		}
		if (r.Dst == nil || isDefaultNet(r.Dst)) && r.Gw.Equal(gw) {
			defRoute = true
		}
	}
	assert.True(t, gwRoute, "pod route to %s in table %d: %v", gw, podTable, proutes)
	assert.True(t, defRoute, "pod default via %s in table %d: %v", gw, podTable, proutes)
	neighs, err := ph.NeighList(cl.Attrs().Index, family)
	require.NoError(t, err)
	var neighOK bool
	for _, nb := range neighs {
		if nb.IP.Equal(gw) {
			neighOK = nb.State == netlink.NUD_PERMANENT && nb.HardwareAddr.String() == hl.Attrs().HardwareAddr.String()
		}
	}
	assert.True(t, neighOK, "permanent neighbour %s -> %s: %v", gw, hl.Attrs().HardwareAddr, neighs)
	prules, err := ph.RuleList(family)
	require.NoError(t, err)
	var podRule []netlink.Rule
	for _, r := range prules {
		if r.Priority == 1 && r.Src != nil && r.Src.IP.Equal(c.podIP) {
			podRule = append(podRule, r)
		}
	}
	if i == 0 {
		assert.Empty(t, podRule, "no in-pod rule for interface 0")
	} else {
		require.Len(t, podRule, 1, "in-pod rule 1: from %s lookup %d", c.podIP, i)
		assert.Equal(t, i, podRule[0].Table)
	}
}

// removePodRule deletes the in-pod rule of interface i (address ip).
func removePodRule(t *testing.T, podNs ns.NetNS, ip net.IP, i int) {
	t.Helper()
	h, err := netnsutil.HandleAt(podNs.Path())
	require.NoError(t, err)
	defer h.Close()
	r := netlink.NewRule()
	r.Priority, r.Table, r.Src = 1, i, hostPrefixOf(ip)
	r.Family = netlink.FAMILY_V4
	if ip.To4() == nil {
		r.Family = netlink.FAMILY_V6
	}
	require.NoError(t, h.RuleDel(r))
}

func isDefaultNet(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0 && n.IP.IsUnspecified()
}

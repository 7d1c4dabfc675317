package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore/upstreamschema"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// Upstream's aws-cni 1.23.1 against this repository's real ipamd gRPC
// server (rpcserver over a cards.Set of two real datastores checkpointing
// to ipam.json and ipam-nic-1.json) with ENABLE_MULTI_NIC on: the
// rolling-update case where the node's aws-node is already ours and the
// plugin binary on the node is still upstream's (or the other way round
// for the plugin of another pod).

// ipamdENI is one ENI of the served node: its network card, device index
// and the addresses it holds (10.<card>.<device>.5, .6, ...).
type ipamdENI struct {
	card, device, free int
}

// servedENIs: card 0's primary ENI (main table) holds no pod address, its
// device 1 (table 2) holds three; card 1's devices 0 and 1 (tables 10100
// and 10101) hold one each, so the two multi-NIC pods each take one of
// them and both tables are replied.
var servedENIs = []ipamdENI{{0, 0, 0}, {0, 1, 3}, {1, 0, 1}, {1, 1, 1}}

// uplinkTables are the tables newMultiNICNode routes out of cards 0 and 1
// (wireServedCards adds the others).
var uplinkTables = []card{
	{podIP: net.IPv4(10, 0, 255, 254).To4(), table: networkutils.RouteTableFor(0, 1)},
	{podIP: net.IPv4(10, 1, 255, 254).To4(), table: networkutils.RouteTableFor(1, 0)},
}

// ourIPAMD is rpcserver.New served at dir/ipamd.sock over one datastore
// per card, card c checkpointing to datastore.CheckpointPathForCard of
// dir/ckpt/ipam.json.
type ourIPAMD struct {
	enis []ipamdENI
	set  *cards.Set
	reg  *prometheus.Registry // the server's request metrics
	dir  string               // the socket's directory
	ckpt string               // card 0's checkpoint path
}

func serveOurMultiNICIPAMD(t *testing.T, enis []ipamdENI) *ourIPAMD {
	t.Helper()
	s := &ourIPAMD{enis: enis, dir: t.TempDir()}
	s.ckpt = filepath.Join(t.TempDir(), "ipam.json")
	var cs []cards.Card
	for card := range 2 {
		cp, err := datastore.NewFileCheckpointer(datastore.CheckpointPathForCard(s.ckpt, card))
		require.NoError(t, err)
		d := datastore.New(datastore.Config{NetworkCard: card, Checkpointer: cp})
		t.Cleanup(func() { _ = d.Close() })
		for _, e := range enis {
			if e.card != card {
				continue
			}
			id := fmt.Sprintf("eni-card%d-dev%d", e.card, e.device)
			require.NoError(t, d.AddENI(datastore.ENIInfo{ID: id, DeviceNumber: e.device, Primary: card == 0 && e.device == 0,
				RouteTableID: networkutils.RouteTableFor(e.card, e.device)}))
			ip := netip.AddrFrom4([4]byte{10, byte(e.card), byte(e.device), 5})
			for range e.free {
				require.NoError(t, d.AddCIDR(id, netip.PrefixFrom(ip, 32)))
				ip = ip.Next()
			}
		}
		cs = append(cs, cards.Card{Index: card, Store: d})
	}
	set, err := cards.New(cs...)
	require.NoError(t, err)
	s.set = set
	o := rpcserver.Options{
		Deps: rpcserver.Deps{Store: set, Stats: set},
		// The version upstream's release build sends (empty), as ipamd
		// itself is configured.
		Settings:      rpcserver.Settings{Version: version.RPCVersion, EnableMultiNIC: true, VPCCIDRs: func() []string { return []string{"10.0.0.0/8"} }},
		Observability: rpcserver.Observability{Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "errors"}, []string{"fn"}), Log: slog.New(slog.DiscardHandler)},
	}
	s.reg = prometheus.NewRegistry()
	srv, _ := rpcserver.New(o, rpcserver.NewMetrics(s.reg))
	lis, err := rpcserver.ListenUnix(filepath.Join(s.dir, "ipamd.sock"))
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return s
}

func (s *ourIPAMD) sock() string { return filepath.Join(s.dir, "ipamd.sock") }

// assigned is how many addresses each card's store has assigned.
func (s *ourIPAMD) assigned() []int {
	var out []int
	for _, c := range s.set.Cards() {
		out = append(out, c.Store.Stats().AssignedIPs)
	}
	return out
}

// requests is the sum over labels of the server's counter name.
func (s *ourIPAMD) requests(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// checkpointEntry is containerID's entry in card's checkpoint file,
// decoded with upstream's schema (false: none, or no file yet: a store
// writes its checkpoint on its first change).
func (s *ourIPAMD) checkpointEntry(t *testing.T, card int, containerID string) (upstreamschema.Entry, bool) {
	t.Helper()
	b, err := os.ReadFile(datastore.CheckpointPathForCard(s.ckpt, card))
	if errors.Is(err, fs.ErrNotExist) {
		return upstreamschema.Entry{}, false
	}
	require.NoError(t, err, "card %d's checkpoint", card)
	var doc upstreamschema.Doc
	require.NoError(t, json.Unmarshal(b, &doc), "card %d's checkpoint: %s", card, b)
	require.Equal(t, upstreamschema.Version, doc.Version)
	for _, e := range doc.Allocations {
		if e.ContainerID == containerID {
			return e, true
		}
	}
	return upstreamschema.Entry{}, false
}

// podKey is the IPAM key both plugins send for a pod's sandbox.
func podKey(containerID string) datastore.IPAMKey {
	return datastore.IPAMKey{NetworkName: networkName, ContainerID: containerID, IfName: "eth0"}
}

// requireServedPod checks a pod's ADD result against what ipamd holds for
// it: interface i of the result carries an address of network card
// onCards[i] (from the range of the ENI holding it), the route table in
// its container entry's mac is that ENI's (networkutils.RouteTableFor),
// the dummy entry carries the first card's device; every one of those
// cards' stores and checkpoint files holds the pod under the same key
// with its interface count, and the other cards hold nothing of it. It
// returns the pod's cards as the kernel checks read them.
func (s *ourIPAMD) requireServedPod(t *testing.T, res *current.Result, pod, containerID, netnsPath string, onCards ...int) []card {
	t.Helper()
	nCards := len(onCards)
	require.Len(t, res.IPs, nCards, "one address per card")
	require.Len(t, res.Interfaces, 2*nCards+1, "host veth and pod interface per card, then the dummy")
	var out []card
	for i, cd := range onCards {
		a, ok := s.set.FindOnCard(cd, podKey(containerID))
		require.True(t, ok, "card %d's store holds %s", cd, containerID)
		ip := net.IP(a.IP.AsSlice())
		assert.Equal(t, cd, a.NetworkCard)
		assert.True(t, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(cd), byte(a.DeviceNumber), 0}), 24).Contains(a.IP),
			"card %d's address %s is from the ENI at device %d", cd, a.IP, a.DeviceNumber)
		table := networkutils.RouteTableFor(cd, a.DeviceNumber)
		assert.Equal(t, table, a.RouteTableID)
		assert.Equal(t, nCards, a.Metadata.InterfacesCount, "card %d: interfaces count", cd)
		assert.Equal(t, pod, a.Metadata.K8SPodName)
		assert.Equal(t, "default", a.Metadata.K8SPodNamespace)

		assert.Equal(t, hostPrefixOf(ip).String(), res.IPs[i].Address.String(), "result address %d is card %d's", i, cd)
		require.NotNil(t, res.IPs[i].Interface)
		assert.Equal(t, 2*i+1, *res.IPs[i].Interface)
		assert.Equal(t, current.Interface{Name: containerIfName("eth0", i), Sandbox: netnsPath, Mac: strconv.Itoa(table)}, *res.Interfaces[2*i+1],
			"container entry %d names the route table ipamd replied", i)
		assert.Equal(t, hostVethNameAt("eni", "default", pod, i), res.Interfaces[2*i].Name)
		assert.Empty(t, res.Interfaces[2*i].Sandbox)

		e, ok := s.checkpointEntry(t, cd, containerID)
		require.True(t, ok, "card %d's checkpoint holds %s", cd, containerID)
		assert.Equal(t, upstreamschema.Entry{NetworkName: networkName, ContainerID: containerID, IfName: "eth0", IPv4: a.IP.String(),
			AllocationTimestamp: e.AllocationTimestamp, Metadata: upstreamschema.Metadata{K8SPodNamespace: "default", K8SPodName: pod, InterfacesCount: nCards}}, e,
			"card %d's checkpoint entry", cd)
		assert.NotZero(t, e.AllocationTimestamp)
		out = append(out, card{podIP: ip, table: table, device: a.DeviceNumber})
	}
	for i := range s.set.Len() {
		if slices.Contains(onCards, i) {
			continue
		}
		_, ok := s.set.FindOnCard(i, podKey(containerID))
		assert.False(t, ok, "card %d holds nothing of %s", i, containerID)
		_, ok = s.checkpointEntry(t, i, containerID)
		assert.False(t, ok, "card %d's checkpoint holds nothing of %s", i, containerID)
	}
	assert.Equal(t, current.Interface{Name: dummyIfName("default", pod), Mac: "0", Sandbox: strconv.Itoa(out[0].device)}, *res.Interfaces[2*nCards])
	return out
}

// requireReleased checks that no card's store or checkpoint holds
// containerID any more.
func (s *ourIPAMD) requireReleased(t *testing.T, containerID string) {
	t.Helper()
	for i := range s.set.Len() {
		_, ok := s.set.FindOnCard(i, podKey(containerID))
		assert.False(t, ok, "card %d's store still holds %s", i, containerID)
		_, ok = s.checkpointEntry(t, i, containerID)
		assert.False(t, ok, "card %d's checkpoint still holds %s", i, containerID)
	}
}

// wireServedCards makes the node of newMultiNICNode route every ENI table
// of servedENIs out of its card (routed: the tables newMultiNICNode gave
// a default route already), and each card's VPC route the card's whole
// range back (the addresses are ipamd's choice, not known ahead).
func wireServedCards(t *testing.T, m *multiNICNode, enis []ipamdENI, routed []card) {
	t.Helper()
	nh := netnsutil.Handle(t, m.node)
	for c, vpc := range m.vpcs {
		nodeAddr, vpcAddr := fmt.Sprintf("192.168.%d.1", 100+c), fmt.Sprintf("192.168.%d.2", 100+c)
		netnsutil.Route(t, vpc, fmt.Sprintf("10.%d.0.0/16", c), nodeAddr)
		l, err := nh.LinkByName("card" + strconv.Itoa(c))
		require.NoError(t, err)
		for _, e := range enis {
			table := networkutils.RouteTableFor(e.card, e.device)
			if e.card != c || table == routed[c].table {
				continue
			}
			require.NoError(t, nh.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(vpcAddr), Table: table,
				Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}), "default route of table %d", table)
		}
	}
}

// requireNoNodeStateFor checks that the node holds no route to and no
// 512/1536 rule for any of the addresses.
func requireNoNodeStateFor(t *testing.T, node ns.NetNS, cs []card) {
	t.Helper()
	h := netnsutil.Handle(t, node)
	rules, err := h.RuleList(netlink.FAMILY_V4)
	require.NoError(t, err)
	for _, c := range cs {
		for _, r := range rules {
			if (r.Dst != nil && r.Dst.IP.Equal(c.podIP)) || (r.Src != nil && r.Src.IP.Equal(c.podIP)) {
				t.Errorf("rule left on the node for %s: %s", c.podIP, r)
			}
		}
		routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: hostPrefixOf(c.podIP), Table: 254},
			netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
		require.NoError(t, err)
		assert.Empty(t, routes, "node route to %s", c.podIP)
	}
}

// requireHostVethsGone waits for the pod's host veths to leave the node
// once its namespace is deleted.
func requireHostVethsGone(t *testing.T, node ns.NetNS, pod string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		names, err := netnsutil.LinkNames(node)
		if err != nil {
			return false
		}
		for i := range n {
			if slices.Contains(names, hostVethNameAt("eni", "default", pod, i)) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "host veths of %s gone with its namespace", pod)
}

// upstreamSingleConf is upstream's conflist entry for a pod without the
// multi-NIC annotation.
func upstreamSingleConf(t *testing.T, prev *current.Result) []byte {
	t.Helper()
	var c map[string]any
	require.NoError(t, json.Unmarshal(upstreamMultiNICConf(t, prev), &c))
	delete(c, "runtimeConfig")
	return mustJSON(t, c)
}

// resultShape is r with what differs between two pods' results blanked:
// the version it is printed in, the pod's netns path, the pod-derived
// host-side names, the addresses and the route tables in the container
// entries (the two pods' card 1 addresses are on different ENIs;
// requireServedPod checks those against ipamd).
func resultShape(r *current.Result) current.Result {
	c := comparable(r)
	last := len(c.Interfaces) - 1
	for i, itf := range c.Interfaces {
		switch {
		case i == last || itf.Sandbox == "":
			itf.Name = "<host side>"
		default:
			itf.Mac = "<route table>"
		}
	}
	c.IPs = nil
	for _, ip := range r.IPs {
		cp := *ip
		cp.Address = net.IPNet{Mask: ip.Address.Mask}
		c.IPs = append(c.IPs, &cp)
	}
	return c
}

// Upstream's aws-cni and this plugin get multi-NIC pods from this
// repository's ipamd alike: one address per network card in card order,
// each interface's container entry naming the route table of the ENI its
// address is on (card 0 device 1: 2; card 1: 10100 or 10101), both cards'
// stores and checkpoint files (upstream's schema) holding the pod under
// one key with interfacesCount 2, and the pod talking out of each card.
// Each plugin's DEL frees the pod's address on both cards and removes the
// node's routes and rules for it, leaving the other pods alone; a repeated
// DEL is success (ipamd's "datastore: unknown pod"). A pod without the
// annotation, through upstream's plugin, gets one address, card 0's.
func TestUpstreamsPluginAndOursGetMultiNICPodsFromOurIPAMD(t *testing.T) {
	bin := upstreamCNI(t)
	ipamd := serveOurMultiNICIPAMD(t, servedENIs)
	m := newMultiNICNode(t, uplinkTables, false)
	wireServedCards(t, m, servedENIs, uplinkTables)

	// Upstream's ADD of a multi-NIC pod.
	webNs := newPodNetns(t)
	webPath := realNetnsPath(t, webNs)
	out, err := runUpstreamAs(t, bin, m.node, ipamd.dir, "ADD", webPath, "web", "c0ffeeweb", upstreamMultiNICConf(t, nil))
	require.NoError(t, err)
	var theirs current.Result
	require.NoError(t, json.Unmarshal(out, &theirs), "upstream's result: %s", out)
	web := ipamd.requireServedPod(t, &theirs, "web", "c0ffeeweb", webPath, 0, 1)
	for i, c := range web {
		requirePodInterfaceWiredFor(t, m.node, webNs, "web", i, c)
	}
	m.requireTalksThroughEachCard(t, webNs, web)
	assert.Equal(t, []int{1, 1}, ipamd.assigned())

	// Our ADD of another multi-NIC pod against the same ipamd.
	oursNs := newPodNetns(t)
	oursPath := realNetnsPath(t, oursNs)
	add := multiNICVerb(t, ipamd.sock(), oursPath, false, nil)
	add.ContainerID = "c0ffeeours"
	add.Args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=ours;K8S_POD_INFRA_CONTAINER_ID=c0ffeeours;K8S_POD_UID=uid-ours"
	res, err := addInProcess(t, m.node, add)
	require.NoError(t, err)
	var ours current.Result
	require.NoError(t, json.Unmarshal(mustJSON(t, res), &ours))
	oursCards := ipamd.requireServedPod(t, &ours, "ours", "c0ffeeours", oursPath, 0, 1)
	for i, c := range oursCards {
		requirePodInterfaceWiredFor(t, m.node, oursNs, "ours", i, c)
	}
	m.requireTalksThroughEachCard(t, oursNs, oursCards)
	assert.Equal(t, resultShape(&theirs), resultShape(&ours), "upstream's result and ours, field by field but names and addresses")
	assert.ElementsMatch(t, []int{networkutils.RouteTableFor(1, 0), networkutils.RouteTableFor(1, 1)}, []int{web[1].table, oursCards[1].table},
		"card 1's two ENIs each served one pod")
	assert.Equal(t, []int{2, 2}, ipamd.assigned())

	// Upstream's ADD of a third multi-NIC pod: card 1 has no address left,
	// so the ADD fails and card 0's address goes back; the pod and the node
	// keep nothing of it.
	fullNs := newPodNetns(t)
	_, err = runUpstreamAs(t, bin, m.node, ipamd.dir, "ADD", realNetnsPath(t, fullNs), "full", "c0ffeefull", upstreamMultiNICConf(t, nil))
	require.Error(t, err, "no address on card 1")
	assert.Equal(t, []int{2, 2}, ipamd.assigned(), "card 0's address given back")
	ipamd.requireReleased(t, "c0ffeefull")
	links, err := netnsutil.LinkNames(fullNs)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo"}, links)
	requireHostVethsGone(t, m.node, "full", 2)
	netnsutil.Delete(t, fullNs)

	// Upstream's ADD of a pod without the annotation: card 0 only.
	soloNs := newPodNetns(t)
	soloPath := realNetnsPath(t, soloNs)
	out, err = runUpstreamAs(t, bin, m.node, ipamd.dir, "ADD", soloPath, "solo", "c0ffeesolo", upstreamSingleConf(t, nil))
	require.NoError(t, err)
	var solo current.Result
	require.NoError(t, json.Unmarshal(out, &solo), "upstream's result: %s", out)
	soloCards := ipamd.requireServedPod(t, &solo, "solo", "c0ffeesolo", soloPath, 0)
	requirePodInterfaceWiredFor(t, m.node, soloNs, "solo", 0, soloCards[0])
	m.requireTalksThroughEachCard(t, soloNs, soloCards)
	assert.Equal(t, []int{3, 2}, ipamd.assigned())

	// Upstream's DEL of its multi-NIC pod, through our ipamd.
	_, err = runUpstreamAs(t, bin, m.node, ipamd.dir, "DEL", webPath, "web", "c0ffeeweb", upstreamMultiNICConf(t, &theirs))
	require.NoError(t, err, "upstream's DEL of its pod")
	ipamd.requireReleased(t, "c0ffeeweb")
	assert.Equal(t, []int{2, 1}, ipamd.assigned(), "the pod's address freed on both cards")
	requireNoNodeStateFor(t, m.node, web)
	netnsutil.Delete(t, webNs)
	requireHostVethsGone(t, m.node, "web", 2)
	// The other pods are untouched.
	for i, c := range oursCards {
		requirePodInterfaceWiredFor(t, m.node, oursNs, "ours", i, c)
	}
	requirePodInterfaceWiredFor(t, m.node, soloNs, "solo", 0, soloCards[0])

	// A repeated DEL by upstream (the runtime retries; ipamd no longer
	// knows the pod) is success and changes nothing.
	_, err = runUpstreamAs(t, bin, m.node, ipamd.dir, "DEL", webPath, "web", "c0ffeeweb", upstreamMultiNICConf(t, &theirs))
	require.NoError(t, err, "upstream's repeated DEL")
	assert.Equal(t, 2.0, ipamd.requests(t, "awscni_del_ip_req_count"), "the repeated DEL asked ipamd")
	assert.Equal(t, []int{2, 1}, ipamd.assigned())

	// Our DEL of our pod.
	del := multiNICVerb(t, ipamd.sock(), oursPath, false, map[string]any{"prevResult": prevResultOf(t, res)})
	del.ContainerID, del.Args = add.ContainerID, add.Args
	require.NoError(t, delInProcess(t, m.node, del), "our DEL of our pod")
	ipamd.requireReleased(t, "c0ffeeours")
	assert.Equal(t, []int{1, 0}, ipamd.assigned(), "the pod's address freed on both cards")
	requireNoNodeStateFor(t, m.node, oursCards)
	netnsutil.Delete(t, oursNs)
	requireHostVethsGone(t, m.node, "ours", 2)
	requirePodInterfaceWiredFor(t, m.node, soloNs, "solo", 0, soloCards[0])

	// Upstream's DEL of the single-address pod.
	_, err = runUpstreamAs(t, bin, m.node, ipamd.dir, "DEL", soloPath, "solo", "c0ffeesolo", upstreamSingleConf(t, &solo))
	require.NoError(t, err, "upstream's DEL of the single-address pod")
	ipamd.requireReleased(t, "c0ffeesolo")
	assert.Equal(t, []int{0, 0}, ipamd.assigned())
	requireNoNodeStateFor(t, m.node, soloCards)
	netnsutil.Delete(t, soloNs)
	requireHostVethsGone(t, m.node, "solo", 1)

	assert.Equal(t, 4.0, ipamd.requests(t, "awscni_add_ip_req_count"))
	assert.Equal(t, 4.0, ipamd.requests(t, "awscni_del_ip_req_count"))
	assert.Zero(t, ipamd.requests(t, "awscni_ipamd_invalid_request_count"), "no request refused (ClientVersion included)")
}

// A pod without the annotation, through upstream's plugin, gets card 1's
// address when card 0 has none free (ipamd's fall-through with
// ENABLE_MULTI_NIC on), and upstream wires it into card 1's ENI table
// (container entry mac 10100, rule 1536 into it, traffic out of card 1);
// its DEL frees it on card 1.
func TestUpstreamsPluginGetsTheNextCardsAddressWhenCard0HasNone(t *testing.T) {
	bin := upstreamCNI(t)
	enis := []ipamdENI{{0, 0, 0}, {0, 1, 1}, {1, 0, 1}}
	ipamd := serveOurMultiNICIPAMD(t, enis)
	m := newMultiNICNode(t, uplinkTables, false)
	wireServedCards(t, m, enis, uplinkTables)

	var pods []ns.NetNS
	for i, pod := range []string{"first", "spill"} {
		podNs := newPodNetns(t)
		pods = append(pods, podNs)
		path := realNetnsPath(t, podNs)
		out, err := runUpstreamAs(t, bin, m.node, ipamd.dir, "ADD", path, pod, "c0ffee"+pod, upstreamSingleConf(t, nil))
		require.NoError(t, err)
		var res current.Result
		require.NoError(t, json.Unmarshal(out, &res), "upstream's result: %s", out)
		got := ipamd.requireServedPod(t, &res, pod, "c0ffee"+pod, path, i)
		requirePodInterfaceWiredFor(t, m.node, podNs, pod, 0, got[0])
		m.requireTalksThroughEachCard(t, podNs, got)
		if pod == "spill" {
			assert.Equal(t, networkutils.RouteTableFor(1, 0), got[0].table)
			_, err = runUpstreamAs(t, bin, m.node, ipamd.dir, "DEL", path, pod, "c0ffee"+pod, upstreamSingleConf(t, &res))
			require.NoError(t, err)
			ipamd.requireReleased(t, "c0ffee"+pod)
			requireNoNodeStateFor(t, m.node, got)
		}
	}
	assert.Equal(t, []int{1, 0}, ipamd.assigned())
	for _, p := range pods {
		netnsutil.Delete(t, p)
	}
}

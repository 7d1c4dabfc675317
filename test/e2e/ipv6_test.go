package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// egressV4Range is where egress-cni's host-local takes the pods' v4if0
// addresses in an IPv6 cluster.
const egressV4Range = "169.254.172.0/22"

// ipv6Options is a node of an IPv6 cluster as upstream runs it: IPv6 on,
// IPv4 off, prefix delegation on.
func ipv6Options() Options {
	return Options{IPv6: true, Env: map[string]string{
		"ENABLE_IPv6":              "true",
		"ENABLE_IPv4":              "false",
		"ENABLE_PREFIX_DELEGATION": "true",
	}}
}

// v4Egress returns the pod's IPv4 egress address: the one address of its
// v4if0, which must be a /22 in egressV4Range.
func v4Egress(p *Pod) (netip.Addr, error) {
	h, err := netnsutil.HandleAt(p.Netns)
	if err != nil {
		return netip.Addr{}, err
	}
	defer h.Close()
	l, err := h.LinkByName("v4if0")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("pod %s: v4if0: %w", p.Name, err)
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(addrs) != 1 {
		return netip.Addr{}, fmt.Errorf("pod %s: v4if0 has %d IPv4 addresses, want 1", p.Name, len(addrs))
	}
	ip, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	r := netip.MustParsePrefix(egressV4Range)
	if ones, _ := addrs[0].Mask.Size(); !r.Contains(ip) || ones != r.Bits() {
		return netip.Addr{}, fmt.Errorf("pod %s: v4if0 has %s, want an address in %s", p.Name, addrs[0].IPNet, r)
	}
	return ip, nil
}

// checkpointFamilies reads the checkpoint file as written and returns, by
// container ID, which address keys ("ipv4", "ipv6") each allocation has
// and the value of "ipv6".
func checkpointFamilies(t testing.TB, n *Node) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(n.IPAMD.Store)
	require.NoError(t, err)
	var doc struct {
		Allocations []map[string]any `json:"allocations"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	out := map[string]map[string]string{}
	for _, a := range doc.Allocations {
		id, _ := a["containerID"].(string)
		fam := map[string]string{}
		for _, k := range []string{"ipv4", "ipv6"} {
			if v, ok := a[k]; ok {
				fam[k] = fmt.Sprint(v)
			}
		}
		out[id] = fam
	}
	return out
}

// TestIPv6 runs pods on a node of an IPv6 cluster: the agent delegates one
// /80 to the primary ENI at start and gives each pod one address from it
// (eth0, /128, via fe80::1), egress-cni gives each a v4if0 in
// 169.254.172.0/22; pods reach each other and the VPC router over IPv6,
// and the VPC over IPv4 SNATed to the node's address; the checkpoint
// records "ipv6"; and a lost DEL is reclaimed by the pod-IP reconciler.
func TestIPv6(t *testing.T) {
	n := NewNode(t, ipv6Options())
	primary := n.Sim.ENIs()[0]
	require.Len(t, primary.IPv6Prefixes, 1, "EC2: IPv6 prefixes on the primary ENI after start")
	pfx := primary.IPv6Prefixes[0]
	require.Equal(t, 80, pfx.Bits())
	require.Truef(t, netip.MustParsePrefix(nodeIPv6Subnet).Contains(pfx.Addr()), "%s is not in the node's subnet %s", pfx, nodeIPv6Subnet)
	assert.Empty(t, primary.SecondaryIPs, "no IPv4 address for pods in an IPv6 cluster")
	assert.Empty(t, primary.Prefixes, "no IPv4 prefix in an IPv6 cluster")

	infos, err := n.IPAMD.ENIs()
	require.NoError(t, err)
	require.Contains(t, infos.ENIs, primary.ID)
	view := infos.ENIs[primary.ID]
	assert.Contains(t, view.IPv6Cidrs, pfx.String(), "/v1/enis: the primary ENI's IPv6Cidrs")
	assert.Empty(t, view.AvailableIPv4Cidrs, "/v1/enis: IPv4 CIDRs of the primary ENI")

	pods := n.ParallelRun(t, "v6", 10, 3)
	t.Logf("FIGURE 10-pod create-to-IP latency, IPv6: %s", n.CreateLatency.Summary())
	seen := map[netip.Addr]string{}
	v4 := map[netip.Addr]string{}
	egressOf := map[string]netip.Addr{} // pod ID -> v4if0 address
	for _, p := range pods {
		require.Truef(t, p.IP.Is6(), "pod %s got %s, not an IPv6 address", p.Name, p.IP)
		assert.Truef(t, pfx.Contains(p.IP), "pod %s: %s is not in the primary ENI's %s", p.Name, p.IP, pfx)
		if other, dup := seen[p.IP]; dup {
			t.Errorf("pods %s and %s both got %s", other, p.Name, p.IP)
		}
		seen[p.IP] = p.Name
		assert.NoError(t, n.CheckPodNetwork(p))
		e, err := v4Egress(p)
		if assert.NoError(t, err) {
			if other, dup := v4[e]; dup {
				t.Errorf("pods %s and %s both got egress address %s", other, p.Name, e)
			}
			v4[e] = p.Name
			egressOf[p.ID] = e
		}
	}
	requireEgress(t, n, egressOf)

	st := requireConsistent(t, n)
	assert.Len(t, st.Assigned, len(pods), "introspection: assigned addresses")
	fams := checkpointFamilies(t, n)
	for _, p := range pods {
		assert.Equalf(t, map[string]string{"ipv6": p.IP.String()}, fams[p.ID], "checkpoint entry of %s (container %s)", p.Name, short(p.ID))
		if a, ok := st.Assigned[p.IP]; assert.Truef(t, ok, "introspection does not show %s (pod %s)", p.IP, p.Name) {
			assert.Equal(t, p.Ref(), a.Pod)
			assert.Equal(t, primary.ID, a.ENI)
		}
	}

	// Pods reach each other over IPv6 through the node, and the VPC
	// router (the upstream, which routes the /80 back to the node).
	for i, p := range pods {
		q := pods[(i+1)%len(pods)]
		assert.NoErrorf(t, n.Ping(p, q), "ping %s (%s) -> %s (%s)", p.Name, p.IP, q.Name, q.IP)
	}
	w6, err := netnsutil.WatchEchoes(n.Net.Upstream, true)
	require.NoError(t, err)
	for _, p := range pods[:3] {
		assert.NoErrorf(t, n.PingAddr(p, n.Net.IPv6Gateway), "ping %s (%s) -> VPC router %s", p.Name, p.IP, n.Net.IPv6Gateway)
	}
	assert.Equal(t, podIPs(pods[:3]), watched(t, w6, 3), "IPv6 echo sources the VPC router saw: the pods' own addresses")

	// IPv4 through egress-cni: the router sees the node's address, never
	// the pod's 169.254.172.x (it has no route back to that range).
	gw4 := netip.MustParsePrefix(nodeSubnet).Addr().Next()
	w4, err := netnsutil.WatchEchoes(n.Net.Upstream, false)
	require.NoError(t, err)
	for _, p := range pods[:3] {
		assert.NoErrorf(t, n.PingAddr(p, gw4), "ping %s over IPv4 egress -> %s", p.Name, gw4)
	}
	node := primary.PrimaryIP
	assert.Equal(t, []netip.Addr{node, node, node}, watched(t, w4, 3), "IPv4 echo sources the VPC router saw: SNATed to the node's address")

	// A lost DEL, reclaimed by the reconciler only.
	lost, kept := pods[:3], pods[3:]
	fresh := reclaimLostDELs(t, n, lost, kept)
	for _, p := range lost {
		delete(egressOf, p.ID) // egress-cni's DEL ran: it needs no agent
	}
	e, err := v4Egress(fresh)
	require.NoError(t, err)
	egressOf[fresh.ID] = e
	assert.Truef(t, pfx.Contains(fresh.IP), "the pod created after the restart has %s, not in %s", fresh.IP, pfx)
	assert.NoError(t, n.PingAddr(fresh, n.Net.IPv6Gateway), "the pod created after the restart reaches the VPC router")
	assert.Equal(t, []netip.Prefix{pfx}, n.Sim.ENIs()[0].IPv6Prefixes, "the primary ENI keeps its one /80 across the restart")
	again := n.MustRunPod(t, n.NextName("reuse"))
	assert.Truef(t, pfx.Contains(again.IP), "a pod after the reclaim has %s, not in %s", again.IP, pfx)
	assert.NoError(t, n.Ping(again, fresh))
	e, err = v4Egress(again)
	require.NoError(t, err)
	egressOf[again.ID] = e
	requireEgress(t, n, egressOf)
	requireConsistent(t, n)

	// Every pod gone: the agent's pool, its checkpoint and egress-cni's
	// rules and reservations are empty.
	n.ParallelDelete(t, append(kept, fresh, again), 3)
	var assigned int
	took, ok := WaitFor(10*time.Second, func() bool {
		infos, err := n.IPAMD.ENIs()
		assigned = infos.AssignedIPs
		return err == nil && assigned == 0
	})
	require.Truef(t, ok, "%d addresses still assigned %v after deleting every pod", assigned, took)
	st = requireConsistent(t, n)
	assert.Empty(t, st.Checkpoint)
	requireEgress(t, n, nil)
}

// watched stops w once it has seen want echo requests (or after 2 s: the
// ones it has not read yet die with its socket) and returns their sources.
func watched(t testing.TB, w *netnsutil.EchoWatch, want int) []netip.Addr {
	t.Helper()
	WaitFor(2*time.Second, func() bool { return len(w.Sources()) >= want })
	require.NoError(t, w.Close())
	return w.Sources()
}

// requireEgress fails t unless egress-cni's POSTROUTING jumps and
// host-local's reservations are exactly the v4if0 addresses of the live
// pods (by pod ID).
func requireEgress(t testing.TB, n *Node, live map[string]netip.Addr) {
	t.Helper()
	want := map[netip.Addr]bool{}
	for _, a := range live {
		want[a] = true
	}
	st, err := n.Egress()
	require.NoError(t, err)
	assert.Equal(t, want, st.Jumps, "nat POSTROUTING: one SNAT jump per live pod's v4if0 address")
	assert.Equal(t, want, st.Reserved, "host-local: one reservation per live pod's v4if0 address")
}

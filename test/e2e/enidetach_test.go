package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// An ENI the pool gives back while ipamd runs (host networking on) leaves
// nothing behind in the node: its link goes with the detachment, and no
// rule from its primary address or route in its table stays; the ENIs
// that remain keep working for their pods.
func TestAnENIGivenBackLeavesNoLinkRuleOrRoute(t *testing.T) {
	n := NewNode(t, Options{InstanceType: "m5.large", Env: map[string]string{"WARM_POOL_START_SPREAD": "0"}})
	// In steps the warm ENI keeps ahead of (9 addresses per ENI).
	var pods []*Pod
	for i, step := range []int{8, 8, 4} {
		n.WaitPool(t, 9*(i+1), time.Minute)
		pods = append(pods, n.ParallelRun(t, fmt.Sprintf("grow%d", i), step, 3)...)
	}
	before := attachedSecondaries(n.Sim.ENIs())
	require.GreaterOrEqual(t, len(before), 2, "20 pods on an m5.large need two secondary ENIs")
	_, err := n.CheckENILinks()
	require.NoError(t, err)

	keep := pods[:2]
	n.ParallelDelete(t, pods[2:], 3)
	// One idle ENI goes per decrease interval (30 s ± 50 %), none younger
	// than a minute.
	var gone []ec2sim.ENIState
	took, ok := WaitFor(4*time.Minute, func() bool {
		now := attachedSecondaries(n.Sim.ENIs())
		gone = gone[:0]
		for id, e := range before {
			if _, still := now[id]; !still {
				gone = append(gone, e)
			}
		}
		return len(gone) > 0
	})
	require.Truef(t, ok, "no secondary ENI was given back within 4 minutes of the pool going idle")
	t.Logf("an idle ENI was given back %v after the pods went", took.Round(time.Millisecond))

	// ipamd removes the ENI's rule once EC2 has detached and deleted it,
	// so the check waits a little past the detachment.
	for _, e := range gone {
		var left error
		WaitFor(15*time.Second, func() bool { left = leftInNode(n, e); return left == nil })
		require.NoError(t, left, "ENI %s (device %d), 15 s after its detachment", e.ID, e.DeviceIndex)
	}
	_, err = n.CheckENILinks()
	require.NoError(t, err, "the ENIs that stay")
	for _, p := range keep {
		require.NoError(t, n.CheckPodNetwork(p))
	}
	require.NoError(t, n.Ping(keep[0], keep[1]))
}

// attachedSecondaries are the instance's attached secondary ENIs by ID.
func attachedSecondaries(enis []ec2sim.ENIState) map[string]ec2sim.ENIState {
	out := map[string]ec2sim.ENIState{}
	for _, e := range enis {
		if e.Attached && e.DeviceIndex > 0 {
			out[e.ID] = e
		}
	}
	return out
}

// leftInNode reports what of a detached ENI is still in the node: a link
// with its MAC, a rule from its primary address, a route in its table.
func leftInNode(n *Node, e ec2sim.ENIState) error {
	h, err := netnsutil.HandleAt(n.Net.Node.Path())
	if err != nil {
		return err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		if l.Attrs().HardwareAddr.String() == e.MAC {
			return fmt.Errorf("link %s still has the detached ENI's MAC %s", l.Attrs().Name, e.MAC)
		}
	}
	rules, err := h.RuleList(unix.AF_INET)
	if err != nil {
		return err
	}
	for _, r := range rules {
		if r.Src != nil {
			if ip, ok := netip.AddrFromSlice(r.Src.IP); ok && ip.Unmap() == e.PrimaryIP {
				return fmt.Errorf("rule from %s (table %d) stays", e.PrimaryIP, r.Table)
			}
		}
	}
	// e is the ENI as it was while attached: its table was device+1.
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: e.DeviceIndex + 1}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return err
	}
	if len(routes) > 0 {
		return fmt.Errorf("table %d still has %d routes: %v", e.DeviceIndex+1, len(routes), routes)
	}
	return nil
}

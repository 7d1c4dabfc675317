package kubenode

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The checks every scenario ends with, as rules of the node.

// CheckPodsHoldTheirAddresses fails t unless every pod has its own pool
// address of the node's subnet, which ipamd's checkpoint gives to the
// pod's ready sandbox: no address shared, none the checkpoint gives to
// another sandbox.
func (n *Node) CheckPodsHoldTheirAddresses(t testing.TB, pods []corev1.Pod) {
	t.Helper()
	entries, err := n.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	holder := map[netip.Addr]string{} // address -> sandbox ID
	for _, e := range entries {
		holder[e.IP] = e.Key.ContainerID
	}
	sandboxes, err := n.SandboxIDs()
	if err != nil {
		t.Fatal(err)
	}
	subnet := netip.MustParsePrefix(nodeSubnet)
	seen := map[netip.Addr]string{}
	for _, p := range pods {
		ip, err := PodIP(&p)
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		if !subnet.Contains(ip) || ip == n.IP {
			t.Errorf("pod %s has %s, not a pool address of subnet %s", p.Name, ip, subnet)
		}
		if other, dup := seen[ip]; dup {
			t.Errorf("pods %s and %s share %s", other, p.Name, ip)
		}
		seen[ip] = p.Name
		if id := sandboxes[string(p.UID)]; holder[ip] != id {
			t.Errorf("pod %s (sandbox %s) has %s, which ipamd's checkpoint gives to %q", p.Name, id, ip, holder[ip])
		}
	}
}

// ScaleToZeroLeavesNothing scales the deployment to 0, waits for its pods
// (selector) to go, and fails t unless ipamd's checkpoint is empty within
// settle. It returns how many allocations were left (for the figures).
func (n *Node) ScaleToZeroLeavesNothing(t testing.TB, deployment, selector string, settle time.Duration) int {
	t.Helper()
	n.Deployment(t, deployment, 0)
	n.WaitGone(t, selector, 4*time.Minute)
	var left []string
	if !poll(settle, func() bool {
		entries, err := n.Checkpoint()
		left = left[:0]
		for _, e := range entries {
			left = append(left, e.IP.String()+" "+e.Key.ContainerID)
		}
		return err == nil && len(left) == 0
	}) {
		t.Errorf("addresses still allocated after every pod went: %v", left)
	}
	return len(left)
}

package e2e

import (
	"net/netip"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// EC2IPv6Prefixes are the IPv6 /80s EC2 says the instance's attached ENIs
// carry (by prefix, the ENI's ID). Their addresses are too many to list,
// unlike EC2PodIPs.
func (n *Node) EC2IPv6Prefixes() map[netip.Prefix]string {
	out := map[netip.Prefix]string{}
	for _, e := range n.Sim.ENIs() {
		if !e.Attached || e.DeviceIndex < 0 {
			continue
		}
		for _, p := range e.IPv6Prefixes {
			out[p] = e.ID
		}
	}
	return out
}

// ec2Holds reports which attached ENI carries ip in EC2: as a secondary
// IPv4 address or in an IPv4 prefix (ipv4, from EC2PodIPs), or in an IPv6
// /80 (v6).
func ec2Holds(ipv4 map[netip.Addr]string, v6 map[netip.Prefix]string, ip netip.Addr) (string, bool) {
	if id, ok := ipv4[ip]; ok {
		return id, true
	}
	for p, id := range v6 {
		if p.Contains(ip) {
			return id, true
		}
	}
	return "", false
}

// awaitIPv6Prefix waits until EC2 shows an IPv6 /80 on the primary ENI
// (the agent delegates one at start) and routes it from the upstream.
func (n *Node) awaitIPv6Prefix(t testing.TB, within time.Duration) {
	t.Helper()
	took, ok := WaitFor(within, func() bool {
		e := n.Sim.ENIs()[0]
		return len(e.IPv6Prefixes) > 0
	})
	if !ok {
		t.Fatalf("e2e: no IPv6 /80 on the primary ENI %v after the agent served", took)
	}
	n.RouteIPv6Prefixes(t)
}

// RouteIPv6Prefixes routes, in the upstream namespace, every IPv6 /80 EC2
// shows on the instance's ENIs to the node's IPv6 address, as the VPC's
// router knows where delegated prefixes live; prefixes already routed are
// left alone.
func (n *Node) RouteIPv6Prefixes(t testing.TB) {
	t.Helper()
	for p := range n.EC2IPv6Prefixes() {
		n.mu.Lock()
		done := n.routedV6[p]
		n.routedV6[p] = true
		n.mu.Unlock()
		if !done {
			netnsutil.Route(t, n.Net.Upstream, p.String(), n.Net.IPv6.String())
		}
	}
}

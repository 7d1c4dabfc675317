package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
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

// egressIPAMDir is host-local's data directory for egress-cni.
func (n *Node) egressIPAMDir() string { return filepath.Join(n.Dir, "egress-ipam") }

// EgressState is what egress-cni leaves on the node for IPv4 egress in an
// IPv6 cluster: the sources its POSTROUTING jumps match (one per pod, into
// the pod's SNAT chain), and the v4if0 addresses host-local holds.
type EgressState struct {
	Jumps, Reserved map[netip.Addr]bool
}

// Egress reads the node's nat table (iptables -t nat -S POSTROUTING) and
// host-local's reservations (one file per address under the network's
// directory).
func (n *Node) Egress() (EgressState, error) {
	st := EgressState{Jumps: map[netip.Addr]bool{}, Reserved: map[netip.Addr]bool{}}
	out, err := netnsutil.Command(n.Net.Node, "iptables", "-t", "nat", "-S", "POSTROUTING").CombinedOutput()
	if err != nil {
		return st, fmt.Errorf("iptables -t nat -S POSTROUTING: %w: %s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "-s" {
				continue
			}
			p, err := netip.ParsePrefix(f[i+1])
			if err != nil || !p.IsSingleIP() {
				return st, fmt.Errorf("nat POSTROUTING: unexpected source in %q", sc.Text())
			}
			st.Jumps[p.Addr()] = true
		}
	}
	// host-local keeps <dataDir>/<network name>/<address>.
	ents, err := os.ReadDir(filepath.Join(n.egressIPAMDir(), "aws-cni"))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	for _, e := range ents {
		if ip, err := netip.ParseAddr(e.Name()); err == nil {
			st.Reserved[ip] = true
		}
	}
	return st, nil
}

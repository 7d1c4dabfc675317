package networkutils

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The REJECT rule at work: a "pod" namespace holds an egress interface
// behind the node, wired as egress-cni wires it (169.254.172.5/22 on an
// IPv6 node, fd00::ac:5/118 on an IPv4 node with ENABLE_V6_EGRESS); a host
// upstream of the node's primary ENI tries to connect to it.
func TestEgressRejectRuleBlocksInboundOnly(t *testing.T) {
	v6Egress := baseConfig()
	v6Egress.V6Egress = true
	for _, tc := range []struct {
		name    string
		cfg     Config
		v       string // ip's family flag
		forward string // the node's forwarding sysctl
		node    string // the node's address on the egress veth
		pod     string // the pod's egress address
		podLen  int
		upAddr  string // the upstream host, with prefix length
		nodeUp  string // the node's primary address, as the upstream's next hop
		rangeS  string
	}{
		{"IPv6 node, IPv4 egress", v6Config(), "-4", "net.ipv4.ip_forward=1",
			"169.254.172.1", "169.254.172.5", 22, "10.0.0.1/24", "10.0.0.10", "169.254.172.0/22"},
		{"IPv4 node, IPv6 egress", v6Egress, "-6", "net.ipv6.conf.all.forwarding=1",
			"fd00::ac:1", "fd00::ac:5", 118, "fd01::1/64", "fd01::10", "fd00::ac:0/118"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			node := newTestNode(t)
			pod := fmt.Sprintf("nwu%d-pod%d", os.Getpid(), nsCounter.Add(1))
			run(t, "ip", "netns", "add", pod)
			t.Cleanup(func() {
				if out, err := exec.Command("ip", "netns", "del", pod).CombinedOutput(); err != nil {
					t.Errorf("ip netns del %s: %v: %s", pod, err, out)
				}
			})
			in := func(netns string, args ...string) { run(t, "ip", append([]string{"netns", "exec", netns}, args...)...) }
			// No duplicate address detection: addresses are usable at once.
			for _, n := range []string{node.name, pod, node.upstream} {
				in(n, "sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
			}
			node.exec(t, "sysctl", "-q", "-w", tc.forward)
			if tc.v == "-6" {
				node.ip(t, "-6", "addr", "add", tc.nodeUp+"/64", "dev", "eth0", "nodad")
			}
			node.ip(t, "link", "add", "egr0", "type", "veth", "peer", "name", "egrif0", "netns", pod)
			node.ip(t, "link", "set", "egr0", "up")
			node.ip(t, tc.v, "addr", "add", tc.node, "dev", "egr0", "nodad")
			node.ip(t, tc.v, "route", "add", tc.pod, "dev", "egr0")
			in(pod, "ip", "link", "set", "lo", "up")
			in(pod, "ip", "link", "set", "egrif0", "up")
			in(pod, "ip", tc.v, "addr", "add", fmt.Sprintf("%s/%d", tc.pod, tc.podLen), "dev", "egrif0", "nodad")
			in(pod, "ip", tc.v, "route", "add", "default", "via", tc.node, "dev", "egrif0", "onlink")
			in(node.upstream, "ip", "link", "set", "lo", "up")
			in(node.upstream, "ip", tc.v, "addr", "add", tc.upAddr, "dev", "up0", "nodad")
			in(node.upstream, "ip", tc.v, "route", "add", tc.rangeS, "via", tc.nodeUp)

			podNS := openNS(t, "/run/netns/"+pod)
			upNS := openNS(t, "/run/netns/"+node.upstream)
			podAddr := net.JoinHostPort(tc.pod, "8080")
			upAddr := net.JoinHostPort(strings.Split(tc.upAddr, "/")[0], "8081")
			listenIn(t, podNS, podAddr)
			listenIn(t, upNS, upAddr)

			// Without the rule the pod's egress address is reachable from outside.
			require.NoError(t, dialIn(upNS, podAddr))

			h, _ := node.host(t, tc.cfg)
			require.NoError(t, h.SetupHostNetwork(ctx))

			err := dialIn(upNS, podAddr)
			assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "connect to the pod's egress address is rejected: %v", err)
			// Connections the pod opens still work: their replies are not NEW.
			assert.NoError(t, dialIn(podNS, upAddr))
		})
	}
}

func openNS(t *testing.T, path string) ns.NetNS {
	t.Helper()
	n, err := ns.GetNS(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// listenIn accepts TCP connections on addr inside n, answering each with
// "ok" and closing it.
func listenIn(t *testing.T, n ns.NetNS, addr string) {
	t.Helper()
	var ln net.Listener
	require.NoError(t, n.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}))
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("ok"))
			_ = c.Close()
		}
	}()
}

// dialIn connects to addr from inside n and reads the listener's answer.
func dialIn(n ns.NetNS, addr string) error {
	return n.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil {
			return err
		}
		if string(b) != "ok" {
			return fmt.Errorf("read %q from %s", b, addr)
		}
		return nil
	})
}

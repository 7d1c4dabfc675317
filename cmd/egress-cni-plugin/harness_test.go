package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/buildutil"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// binDir holds egress-cni and host-local, built by TestMain (root only):
// it is the plugins' CNI_PATH, as /opt/cni/bin is on a node.
var binDir string

func TestMain(m *testing.M) {
	if os.Geteuid() == 0 {
		var err error
		binDir, err = buildutil.Temp("egress-cni-bin-",
			buildutil.Target{Name: "egress-cni", Pkg: "."},
			// The IPAM plugin the init image ships (go.mod's tool block).
			buildutil.Target{Name: "host-local", Pkg: "github.com/containernetworking/plugins/plugins/ipam/host-local"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

const networkName = "aws-cni" // libcni injects the list's name

// egressNode is a node namespace whose eth0 is a veth into an "uplink"
// namespace standing for the VPC, plus the plugin's data and log paths.
type egressNode struct {
	t        *testing.T
	node     ns.NetNS
	uplink   ns.NetNS
	dataDir  string // host-local's dataDir
	logFile  string
	nodeIP   string
	uplinkIP string
	v6       bool // IPv6 egress (IPv4 cluster); else IPv4 egress (IPv6 cluster)
}

// newEgressNode builds the node. For IPv4 egress the node and uplink talk
// IPv4 on eth0 (192.168.251.0/24); for IPv6 egress IPv6 (2001:db8:251::/64).
func newEgressNode(t *testing.T, v6 bool) *egressNode {
	t.Helper()
	netnsutil.RequireRoot(t)
	for _, bin := range []string{"nsenter", "iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is needed: the plugin runs inside the node namespace and programs SNAT there", bin)
		}
	}
	dir := t.TempDir()
	n := &egressNode{t: t, dataDir: filepath.Join(dir, "egress-ipam"), logFile: filepath.Join(dir, "egress.log"), v6: v6}
	n.node = netnsutil.New(t)
	n.uplink = netnsutil.New(t)
	netnsutil.SetUp(t, n.node, "lo")
	netnsutil.SetUp(t, n.uplink, "lo")
	netnsutil.Veth(t, n.node, "eth0", n.uplink, "eth0")
	if v6 {
		n.nodeIP, n.uplinkIP = "2001:db8:251::2", "2001:db8:251::1"
		for _, x := range []ns.NetNS{n.node, n.uplink} {
			netnsutil.Sysctl(t, x, "net/ipv6/conf/eth0/accept_dad", "0")
		}
		netnsutil.AddAddr(t, n.node, "eth0", n.nodeIP+"/64")
		netnsutil.AddAddr(t, n.uplink, "eth0", n.uplinkIP+"/64")
	} else {
		n.nodeIP, n.uplinkIP = "192.168.251.2", "192.168.251.1"
		netnsutil.AddAddr(t, n.node, "eth0", n.nodeIP+"/24")
		netnsutil.AddAddr(t, n.uplink, "eth0", n.uplinkIP+"/24")
	}
	return n
}

// egressPod is a pod sandbox with aws-cni's interface already in place
// (eth0, a veth to the node, as the previous plugin leaves it).
type egressPod struct {
	containerID string
	netns       ns.NetNS
	netnsPath   string
	prevResult  map[string]any
}

func (n *egressNode) newPod(name string) *egressPod {
	t := n.t
	t.Helper()
	p := &egressPod{containerID: "c0ffee" + name, netns: netnsutil.New(t)}
	p.netnsPath = p.netns.Path()
	netnsutil.SetUp(t, p.netns, "lo")
	hostVeth := "eni" + name
	netnsutil.Veth(t, p.netns, "eth0", n.node, hostVeth)
	// The primary family is the one egress is not for.
	podAddr, version := "10.0.5.7/32", "4"
	if !n.v6 {
		// IPv6 cluster: the pod's own address is IPv6.
		podAddr, version = "2001:db8:5::7/128", "6"
		netnsutil.Sysctl(t, p.netns, "net/ipv6/conf/eth0/accept_dad", "0")
	}
	netnsutil.AddAddr(t, p.netns, "eth0", podAddr)
	p.prevResult = map[string]any{
		"cniVersion": "0.4.0",
		"interfaces": []any{
			map[string]any{"name": hostVeth},
			map[string]any{"name": "eth0", "sandbox": p.netnsPath, "mac": "0"},
			map[string]any{"name": "dummy" + name, "mac": "0", "sandbox": "0"},
		},
		"ips": []any{map[string]any{"version": version, "address": podAddr, "interface": 1}},
	}
	return p
}

// netconf is the plugin's entry as the entrypoint renders it (facts
// §1.4) for this node's kind of cluster, with test paths.
func (n *egressNode) netconf(p *egressPod, extra map[string]any) []byte {
	subnet, dst := "169.254.172.0/22", "0.0.0.0/0"
	if n.v6 {
		subnet, dst = "fd00::ac:00/118", "::/0"
	}
	c := map[string]any{
		"cniVersion":    "0.4.0",
		"name":          networkName,
		"type":          "egress-cni",
		"mtu":           "9001",
		"enabled":       "true",
		"randomizeSNAT": "prng",
		"nodeIP":        n.nodeIP,
		"ipam": map[string]any{
			"type":    "host-local",
			"ranges":  []any{[]any{map[string]any{"subnet": subnet}}},
			"routes":  []any{map[string]any{"dst": dst}},
			"dataDir": n.dataDir,
		},
		"pluginLogFile":  n.logFile,
		"pluginLogLevel": "Debug",
	}
	if p != nil && p.prevResult != nil {
		c["prevResult"] = p.prevResult
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	b, err := json.Marshal(c)
	require.NoError(n.t, err)
	return b
}

type run struct {
	stdout, stderr []byte
	code           int
}

func (r run) String() string {
	return fmt.Sprintf("exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
}

// exec runs egress-cni inside the node namespace as a runtime would.
func (n *egressNode) exec(cmd string, p *egressPod, stdin []byte) run {
	n.t.Helper()
	c := netnsutil.Command(n.node, filepath.Join(binDir, "egress-cni"))
	c.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"CNI_COMMAND=" + cmd,
		"CNI_PATH=" + binDir,
		"CNI_CONTAINERID=" + p.containerID,
		"CNI_NETNS=" + p.netnsPath,
		"CNI_IFNAME=eth0",
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + p.containerID,
	}
	c.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(n.t, ok, "run egress-cni: %v", err)
		code = ee.ExitCode()
	}
	return run{out.Bytes(), errb.Bytes(), code}
}

// add runs ADD and returns the parsed result.
func (n *egressNode) add(p *egressPod) *current.Result {
	n.t.Helper()
	r := n.exec("ADD", p, n.netconf(p, nil))
	require.Equal(n.t, 0, r.code, "ADD: %s", r)
	res, err := create.Create("0.4.0", r.stdout)
	require.NoError(n.t, err, "ADD result: %s", r.stdout)
	cur, err := current.NewResultFromResult(res)
	require.NoError(n.t, err)
	return cur
}

func (n *egressNode) del(p *egressPod) {
	n.t.Helper()
	r := n.exec("DEL", p, n.netconf(p, nil))
	require.Equal(n.t, 0, r.code, "DEL: %s", r)
	require.Empty(n.t, bytes.TrimSpace(r.stdout), "DEL prints nothing on success")
}

// natRules is `iptables -t nat -S` (or ip6tables) inside the node.
func (n *egressNode) natRules() string {
	n.t.Helper()
	bin := "iptables"
	if n.v6 {
		bin = "ip6tables"
	}
	out, err := netnsutil.Command(n.node, bin, "-t", "nat", "-S").CombinedOutput()
	require.NoError(n.t, err, "%s", out)
	return string(out)
}

// leases lists host-local's address files (one per allocated address).
func (n *egressNode) leases() []string {
	n.t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.dataDir, networkName))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(n.t, err)
	var out []string
	for _, e := range entries {
		if net.ParseIP(e.Name()) != nil {
			out = append(out, e.Name())
		}
	}
	return out
}

func handle(t *testing.T, n ns.NetNS) *netlink.Handle { return netnsutil.Handle(t, n) }

// routeStrings lists a namespace's main-table routes of one family as
// "dst gw src scope dev" strings.
func routeStrings(t *testing.T, h *netlink.Handle, family int) []string {
	t.Helper()
	routes, err := h.RouteListFiltered(family, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	var out []string
	for _, r := range routes {
		l, err := h.LinkByIndex(r.LinkIndex)
		require.NoError(t, err)
		dst := "default"
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones > 0 {
				dst = r.Dst.String()
			}
		}
		s := dst
		if r.Gw != nil {
			s += " via " + r.Gw.String()
		}
		if r.Src != nil {
			s += " src " + r.Src.String()
		}
		s += " scope " + r.Scope.String() + " dev " + l.Attrs().Name
		out = append(out, s)
	}
	return out
}

// peerOf accepts one TCP connection on a listener inside the uplink and
// returns the address the connection came from, after dialling it from
// the pod.
func (n *egressNode) peerOf(p *egressPod) (net.IP, error) {
	var ln net.Listener
	addr := net.JoinHostPort(n.uplinkIP, "0")
	if err := n.uplink.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		return nil, err
	}
	defer ln.Close()
	accepted := make(chan net.Addr, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c.RemoteAddr()
		c.Close()
	}()
	var conn net.Conn
	if err := p.netns.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		return nil, fmt.Errorf("connect from the pod to %s: %w", ln.Addr(), err)
	}
	defer conn.Close()
	select {
	case a := <-accepted:
		if a == nil {
			return nil, fmt.Errorf("accept failed")
		}
		return a.(*net.TCPAddr).IP, nil
	case <-time.After(5 * time.Second):
		return nil, fmt.Errorf("no connection accepted")
	}
}

func hasLine(rules, want string) bool {
	for _, l := range strings.Split(rules, "\n") {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

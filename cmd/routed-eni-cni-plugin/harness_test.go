package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/buildutil"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
	"github.com/aws/amazon-vpc-cni-k8s/test/vlantest"
)

// pluginBin is the aws-cni binary TestMain builds (root only).
var pluginBin string

func TestMain(m *testing.M) {
	var dir string
	// The VM harness (test/vmkernel) has no Go toolchain; the tests it
	// runs call the verbs in-process.
	if os.Geteuid() == 0 && os.Getenv(vlantest.InVMEnv) != "1" {
		var err error
		// The test runs in the package directory.
		if dir, err = buildutil.Temp("aws-cni-bin-", buildutil.Target{Name: "aws-cni", Pkg: "."}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pluginBin = filepath.Join(dir, "aws-cni")
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

const (
	networkName = "aws-cni"
	nodeIP      = "192.168.250.2"
	upstreamIP  = "192.168.250.1"
)

// testNode is a "node": a namespace whose eth0 is a veth into an
// "upstream" namespace, an in-process ipamd on a temp-dir socket, and the
// paths the plugin is configured with.
type testNode struct {
	t        testing.TB
	dir      string
	node     ns.NetNS
	upstream ns.NetNS
	socket   string
	queueDir string
	lockDir  string
	logFile  string
	pool     devpool.Pool
	env      map[string]string
	cri      *fakeCRI

	pods []*testPod // every pod made by newPod

	mu     sync.Mutex
	agent  *ipamd.Agent
	cancel context.CancelFunc
	done   chan error
}

type nodeOption func(*testNode)

// withIPAMDEnv sets ipamd environment variables.
func withIPAMDEnv(kv ...string) nodeOption {
	return func(n *testNode) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.env[kv[i]] = kv[i+1]
		}
	}
}

// withFakeCRI gives ipamd a runtime (its reconciler and GC need one).
func withFakeCRI() nodeOption {
	// As on a real node, the runtime lists aws-node's own host-network
	// sandbox, and ipamd knows its name (MY_POD_NAME, as the chart sets
	// it): a list that does not name it is not trusted after a lost
	// checkpoint.
	host := podip.Sandbox{ID: "aws-node-host-network", Name: "aws-node-test", Namespace: "kube-system", Ready: true}
	return func(n *testNode) {
		n.env["MY_POD_NAME"] = host.Name
		n.cri = &fakeCRI{sandboxes: map[string]podip.Sandbox{host.ID: host}, ips: map[string]netip.Addr{host.ID: netip.MustParseAddr("192.0.2.10")}}
	}
}

func newTestNode(t testing.TB, pool devpool.Pool, opts ...nodeOption) *testNode {
	t.Helper()
	netnsutil.RequireRoot(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter (util-linux) is needed to run the plugin inside the node namespace")
	}
	dir := t.TempDir()
	n := &testNode{
		t:        t,
		dir:      dir,
		socket:   filepath.Join(dir, "ipamd.sock"),
		queueDir: filepath.Join(dir, "del-queue"),
		lockDir:  filepath.Join(dir, "address-locks"),
		logFile:  filepath.Join(dir, "plugin.log"),
		pool:     pool,
		env: map[string]string{
			"ENABLE_IPv4":                   "true",
			"IP_COOLDOWN_PERIOD":            "0",
			"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json"),
			"INTROSPECTION_BIND_ADDRESS":    "unix:" + filepath.Join(dir, "introspect.sock"),
			"POD_IP_RECONCILE_MODE":         "off",
		},
	}
	for _, o := range opts {
		o(n)
	}
	n.node = netnsutil.New(t)
	n.upstream = netnsutil.New(t)
	netnsutil.SetUp(t, n.node, "lo")
	netnsutil.SetUp(t, n.upstream, "lo")
	netnsutil.Veth(t, n.node, "eth0", n.upstream, "eth0")
	netnsutil.AddAddr(t, n.node, "eth0", nodeIP+"/24")
	netnsutil.AddAddr(t, n.upstream, "eth0", upstreamIP+"/24")
	netnsutil.DefaultRoute(t, n.node, upstreamIP)
	netnsutil.Sysctl(t, n.node, "net/ipv4/ip_forward", "1")
	n.startIPAMD()
	t.Cleanup(n.stopIPAMD)
	return n
}

func (n *testNode) startIPAMD() {
	t := n.t
	t.Helper()
	cfg, err := ipamd.LoadConfig(func(k string) (string, bool) {
		v, ok := n.env[k]
		return v, ok
	})
	require.NoError(t, err)
	pool := n.pool
	opts := ipamd.Options{
		Config:         cfg,
		SocketPath:     n.socket,
		MetricsAddress: "unix:" + filepath.Join(n.dir, "metrics.sock"),
		DevPool:        &pool,
		DelQueueDir:    n.queueDir,
	}
	if n.cri != nil {
		opts.CRI = n.cri
	}
	a, err := ipamd.NewAgent(context.Background(), opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	require.Eventually(t, func() bool { _, err := os.Stat(n.socket); return err == nil }, 5*time.Second, 5*time.Millisecond)
	n.mu.Lock()
	n.agent, n.cancel, n.done = a, cancel, done
	n.mu.Unlock()
}

func (n *testNode) stopIPAMD() {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel = nil
	n.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			n.t.Errorf("ipamd stopped with %v", err)
		}
	case <-time.After(10 * time.Second):
		n.t.Errorf("ipamd did not stop")
	}
}

func (n *testNode) store() *datastore.DataStore {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.agent.Store()
}

// allocation is ipamd's record for a pod attachment.
func (n *testNode) allocation(p *testPod) (datastore.Allocation, bool) {
	return n.store().Find(datastore.IPAMKey{NetworkName: networkName, ContainerID: p.containerID, IfName: p.ifName})
}

// testPod is a pod sandbox: its own namespace and CNI identity.
type testPod struct {
	name, namespace, uid, containerID, ifName string
	netns                                     ns.NetNS
	netnsPath                                 string // what CNI_NETNS says (may be emptied)
}

func (n *testNode) newPod(name string) *testPod {
	n.t.Helper()
	p := &testPod{
		name:        name,
		namespace:   "default",
		uid:         "uid-" + name,
		containerID: "c0ffee" + strings.ReplaceAll(name, "-", ""),
		ifName:      "eth0",
		netns:       netnsutil.New(n.t),
	}
	p.netnsPath = p.netns.Path()
	netnsutil.SetUp(n.t, p.netns, "lo")
	n.pods = append(n.pods, p)
	return p
}

func (p *testPod) cniArgs() string {
	return fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=%s",
		p.namespace, p.name, p.containerID, p.uid)
}

// netconf is the plugin's stdin: the conflist entry as a runtime passes it.
func (n *testNode) netconf(cniVersion string, extra map[string]any) []byte {
	c := map[string]any{
		"cniVersion":         cniVersion,
		"name":               networkName,
		"type":               "aws-cni",
		"vethPrefix":         "eni",
		"mtu":                "9001",
		"podSGEnforcingMode": "strict",
		"pluginLogFile":      n.logFile,
		"pluginLogLevel":     "Debug",
		"ipamdSocket":        n.socket,
		"delQueueDir":        n.queueDir,
		"addressLockDir":     n.lockDir,
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

// withPrev adds prevResult (a JSON result) to a netconf.
func withPrev(prev []byte) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(prev, &m); err != nil {
		panic(err)
	}
	return map[string]any{"prevResult": m}
}

// cniRun is one plugin execution.
type cniRun struct {
	stdout, stderr []byte
	exitCode       int
}

func (r cniRun) cniError() *types.Error {
	var e types.Error
	if err := json.Unmarshal(r.stdout, &e); err != nil || (e.Code == 0 && e.Msg == "") {
		return nil
	}
	return &e
}

func (r cniRun) String() string {
	return fmt.Sprintf("exit %d, stdout %s, stderr %s", r.exitCode, r.stdout, r.stderr)
}

// exec runs the plugin inside the node namespace like a runtime would.
// env entries override the CNI_* variables derived from the pod.
func (n *testNode) exec(cmd string, p *testPod, stdin []byte, env map[string]string) cniRun {
	n.t.Helper()
	r, err := n.run(cmd, p, stdin, env)
	if err != nil {
		n.t.Fatalf("run plugin: %v", err)
	}
	return r
}

// run is exec for goroutines other than the test's: it reports a plugin
// that could not be started instead of failing the test.
func (n *testNode) run(cmd string, p *testPod, stdin []byte, env map[string]string) (cniRun, error) {
	return n.runBin(pluginBin, cmd, p, stdin, env)
}

// runBin is run with another build of the plugin (benchmarks compare).
func (n *testNode) runBin(bin, cmd string, p *testPod, stdin []byte, env map[string]string) (cniRun, error) {
	if bin == "" {
		return cniRun{}, errors.New("no plugin binary: TestMain builds it only as root outside the VM harness")
	}
	vars := map[string]string{
		"CNI_COMMAND": cmd,
		"CNI_PATH":    filepath.Dir(pluginBin),
	}
	if p != nil {
		vars["CNI_CONTAINERID"] = p.containerID
		vars["CNI_NETNS"] = p.netnsPath
		vars["CNI_IFNAME"] = p.ifName
		vars["CNI_ARGS"] = p.cniArgs()
	}
	for k, v := range env {
		vars[k] = v
	}
	c := netnsutil.Command(n.node, bin)
	c.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range vars {
		c.Env = append(c.Env, k+"="+v)
	}
	c.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			return cniRun{}, err
		}
		code = ee.ExitCode()
	}
	return cniRun{stdout: out.Bytes(), stderr: errb.Bytes(), exitCode: code}, nil
}

// add runs ADD and returns the raw result JSON and its parsed form.
func (n *testNode) add(p *testPod, cniVersion string) ([]byte, *current.Result) {
	n.t.Helper()
	r := n.exec("ADD", p, n.netconf(cniVersion, nil), nil)
	require.Equal(n.t, 0, r.exitCode, "ADD: %s", r)
	res, err := create.Create(cniVersion, r.stdout)
	require.NoError(n.t, err, "ADD result: %s", r.stdout)
	cur, err := current.NewResultFromResult(res)
	require.NoError(n.t, err)
	return r.stdout, cur
}

// del runs DEL with prevResult (nil: none) and requires success.
func (n *testNode) del(p *testPod, prev []byte, env map[string]string) {
	n.t.Helper()
	var extra map[string]any
	if prev != nil {
		extra = withPrev(prev)
	}
	r := n.exec("DEL", p, n.netconf("1.0.0", extra), env)
	require.Equal(n.t, 0, r.exitCode, "DEL: %s", r)
	require.Empty(n.t, bytes.TrimSpace(r.stdout), "DEL prints nothing on success")
}

// nodeHandle is a netlink handle in the node namespace.
func (n *testNode) nodeHandle() *netlink.Handle { return netnsutil.Handle(n.t, n.node) }

// podLinks lists node links with the veth prefix ("": every link but the
// node's own lo and eth0).
func (n *testNode) podLinks(prefix string) []string {
	names, err := netnsutil.LinkNames(n.node)
	require.NoError(n.t, err)
	var out []string
	for _, s := range names {
		if s == "lo" || s == "eth0" {
			continue
		}
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// podRules lists the node's 512 and 1536 rules.
func (n *testNode) podRules() []netlink.Rule {
	rules, err := n.nodeHandle().RuleList(netlink.FAMILY_V4)
	require.NoError(n.t, err)
	var out []netlink.Rule
	for _, r := range rules {
		if r.Priority == 512 || r.Priority == 1536 {
			out = append(out, r)
		}
	}
	return out
}

// requireClean does what a runtime does after the pods' DELs, deleting
// each pod's namespace still there, then asserts nothing of the pods is
// left on the node (requireNodeClean).
func (n *testNode) requireClean() {
	n.t.Helper()
	for _, p := range n.pods {
		if _, err := os.Stat(p.netns.Path()); err == nil {
			netnsutil.Delete(n.t, p.netns)
		}
	}
	n.requireNodeClean()
}

// requireNodeClean asserts no pod veth (any link but lo and eth0), 512 or
// 1536 rule or pod route is left on the node.
func (n *testNode) requireNodeClean() {
	n.t.Helper()
	// Veths of deleted namespaces go when the kernel destroys the
	// namespace, which it does asynchronously.
	deadline := time.Now().Add(5 * time.Second)
	for len(n.podLinks("")) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Empty(n.t, n.podLinks(""), "host veths left in the node namespace")
	require.Empty(n.t, n.podRules(), "pod rules left in the node namespace")
	routes, err := n.nodeHandle().RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE)
	require.NoError(n.t, err)
	for _, r := range routes {
		if r.Dst != nil && strings.HasPrefix(r.Dst.String(), "10.250.") {
			n.t.Fatalf("pod route left: %s", r)
		}
	}
}

// logLines returns the plugin log's JSON records with the given msg.
func (n *testNode) logLines(msg string) []map[string]any {
	f, err := os.Open(n.logFile)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// podIP returns the pod's address from a result.
func podIP(t testing.TB, res *current.Result) net.IP {
	t.Helper()
	require.Len(t, res.IPs, 1)
	return res.IPs[0].Address.IP.To4()
}

// fakeCRI is the runtime ipamd's reconciler and GC consult.
type fakeCRI struct {
	mu        sync.Mutex
	sandboxes map[string]podip.Sandbox
	ips       map[string]netip.Addr
}

func (f *fakeCRI) set(p *testPod, ip net.IP) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxes[p.containerID] = podip.Sandbox{ID: p.containerID, Name: p.name, Namespace: p.namespace, Ready: true}
	if f.ips == nil {
		f.ips = map[string]netip.Addr{}
	}
	addr, _ := netip.AddrFromSlice(ip.To4())
	f.ips[p.containerID] = addr
}

func (f *fakeCRI) ListSandboxes(context.Context) ([]podip.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]podip.Sandbox, 0, len(f.sandboxes))
	for _, s := range f.sandboxes {
		out = append(out, s)
	}
	return out, nil
}

func (f *fakeCRI) SandboxStatus(_ context.Context, id string) (podip.SandboxStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[id]
	if !ok {
		return podip.SandboxStatus{}, fmt.Errorf("sandbox %s: %w", id, podip.ErrSandboxNotFound)
	}
	return podip.SandboxStatus{Sandbox: s, IPs: []netip.Addr{f.ips[id]}}, nil
}

// netnsLinks lists the links in a pod's namespace.
func netnsLinks(p *testPod) ([]string, error) { return netnsutil.LinkNames(p.netns) }

// vethBetween links two pods' namespaces directly.
func vethBetween(t testing.TB, a *testPod, aName string, b *testPod, bName string) {
	netnsutil.Veth(t, a.netns, aName, b.netns, bName)
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
	"github.com/aws/amazon-vpc-cni-k8s/test/vlantest"
)

// UpstreamPluginInVM is where the VM harness puts upstream's aws-cni
// (component upstream-cni; test/vmkernel passes it in).
const UpstreamPluginInVM = "/vmtest/upstream/aws-cni"

// upstreamSocketPath is where upstream's aws-cni always dials ipamd.
const upstreamSocketPath = "/var/run/aws-node/ipamd.sock"

// upstreamPlugin is upstream's binary in the guest. Outside the VM the test
// skips (no VLAN kernel); inside, a missing binary fails.
func upstreamPlugin(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(UpstreamPluginInVM); err != nil {
		if os.Getenv(vlantest.InVMEnv) == "1" {
			t.Fatalf("upstream's aws-cni is not at %s in the VM (test/vmkernel passes component upstream-cni): %v", UpstreamPluginInVM, err)
		}
		t.Skipf("upstream's aws-cni is only at %s inside the VM harness (test/vmkernel)", UpstreamPluginInVM)
	}
	return UpstreamPluginInVM
}

// serveAtUpstreamSocket serves backend where upstream's plugin dials. Only
// in the VM guest, whose /run is its own tmpfs.
func serveAtUpstreamSocket(t *testing.T, backend rpc.CNIBackendServer) {
	t.Helper()
	if _, err := os.Lstat("/var/run"); os.IsNotExist(err) {
		require.NoError(t, os.Symlink("/run", "/var/run"))
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(upstreamSocketPath), 0o755))
	_ = os.Remove(upstreamSocketPath)
	lis, err := net.Listen("unix", upstreamSocketPath)
	require.NoError(t, err)
	s := grpc.NewServer()
	rpc.RegisterCNIBackendServer(s, backend)
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); _ = os.Remove(upstreamSocketPath) })
}

// upstreamConf is the netconf the chart's entrypoint writes for aws-cni, as
// upstream's plugin reads it.
func upstreamConf(t *testing.T, mode driver.SGMode, prev *current.Result) []byte {
	t.Helper()
	c := map[string]any{"cniVersion": "1.0.0", "name": networkName, "type": "aws-cni", "vethPrefix": "eni", "mtu": "9001",
		"podSGEnforcingMode": string(mode), "pluginLogFile": filepath.Join(t.TempDir(), "upstream-plugin.log"), "pluginLogLevel": "DEBUG"}
	if prev != nil {
		c["prevResult"] = prevResultOf(t, prev)
	}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}

// runUpstream runs upstream's plugin for verb in the node namespace with the
// same pod and container as branchVerb, and returns its stdout.
func runUpstream(t *testing.T, bin string, node ns.NetNS, verb, netnsPath string, conf []byte) ([]byte, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := inNodeNS(t, node, func() error {
		cmd := exec.Command(bin)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(conf), &stdout, &stderr
		cmd.Env = []string{"CNI_COMMAND=" + verb, "CNI_CONTAINERID=c0ffeeweb", "CNI_NETNS=" + netnsPath, "CNI_IFNAME=eth0",
			"CNI_PATH=/opt/cni/bin", "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=c0ffeeweb;K8S_POD_UID=uid-web"}
		return cmd.Run()
	})
	if err != nil {
		return nil, fmt.Errorf("upstream aws-cni %s: %w (stdout %q, stderr %q)", verb, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// comparable is r without what differs between two ADDs of one pod in
// two namespaces: the version it is printed in and the pod's netns path.
func comparable(r *current.Result) current.Result {
	c := *r
	c.CNIVersion = ""
	c.Interfaces = nil
	for _, itf := range r.Interfaces {
		cp := *itf
		if cp.Sandbox != "" {
			cp.Sandbox = "<pod netns>"
		}
		c.Interfaces = append(c.Interfaces, &cp)
	}
	return c
}

// Upstream's aws-cni and this plugin wire a branch-ENI pod from the same
// ipamd reply into the same result, field by field, and each tears down
// what the other set up from its prevResult alone (ipamd is not asked):
// a rolling update of aws-node, or a rollback, in the middle of a branch
// pod's life leaves neither a broken pod nor a stale VLAN, rule or route.
// Both modes and both families, in a kernel with VLAN links.
func TestUpstreamsPluginAndOursShareABranchPodVLAN(t *testing.T) {
	vlantest.Require(t)
	bin := upstreamPlugin(t)
	for _, mode := range []driver.SGMode{driver.SGModeStrict, driver.SGModeStandard} {
		for _, v6 := range []bool{false, true} {
			spec := branchPodSpec{vlan: 11, mac: net.HardwareAddr{0x02, 0xbe, 0xef, 0, 0, 11}, ip: net.ParseIP("10.1.0.40").To4(), gw: net.ParseIP("10.1.0.1").To4()}
			name := string(mode) + " IPv4"
			if v6 {
				name = string(mode) + " IPv6"
				spec.ip, spec.gw = net.ParseIP("2600:1f14:1::40"), vlantest.BranchGatewayIPv6
			}
			t.Run(name, func(t *testing.T) { upstreamAndOursShareABranchPod(t, bin, mode, spec, v6) })
		}
	}
}

func upstreamAndOursShareABranchPod(t *testing.T, bin string, mode driver.SGMode, spec branchPodSpec, v6 bool) {
	vpc := vlantest.NewVPC(t, v6, mode == driver.SGModeStrict)
	vpc.AddBranch(t, spec.vlan, spec.mac, spec.ip, spec.gw)
	rulesBefore := vlantest.Rules(t, vpc.Node)
	ipamd := &branchIPAMD{add: spec.reply(vpc.TrunkIndex), del: &rpc.DelNetworkReply{Success: true}}
	serveAtUpstreamSocket(t, ipamd)
	sock, _ := backendOnlyIPAMD(t, ipamd)
	absent := filepath.Join(t.TempDir(), "absent.sock")

	// Upstream's ADD, then our DEL from its prevResult with ipamd gone.
	podNs := netnsutil.New(t)
	netnsutil.SetUp(t, podNs, "lo")
	out, err := runUpstream(t, bin, vpc.Node, "ADD", podNs.Path(), upstreamConf(t, mode, nil))
	require.NoError(t, err)
	var theirs current.Result
	require.NoError(t, json.Unmarshal(out, &theirs), "upstream's result: %s", out)
	require.NoError(t, vlantest.Ping(podNs, vpc.RouterIP()), "upstream-wired branch pod -> VPC")
	require.NoError(t, vlantest.TCPEcho(podNs, spec.ip, vpc.Node), "node -> upstream-wired branch pod over TCP")
	prev := map[string]any{"prevResult": prevResultOf(t, &theirs)}
	require.NoError(t, delInProcess(t, vpc.Node, branchVerb(t, absent, podNs.Path(), mode, prev)), "our DEL of upstream's pod")
	requireBranchGone(t, vpc.Node, spec)
	netnsutil.Delete(t, podNs)

	// Our ADD, then upstream's DEL from our prevResult.
	podNs = netnsutil.New(t)
	netnsutil.SetUp(t, podNs, "lo")
	ours, err := addInProcess(t, vpc.Node, branchVerb(t, sock, podNs.Path(), mode, nil))
	require.NoError(t, err)
	require.NoError(t, vlantest.Ping(podNs, vpc.RouterIP()), "our branch pod -> VPC")
	// Ours as the runtime stores it: through JSON, as upstream's came.
	var oursStored current.Result
	require.NoError(t, json.Unmarshal(mustJSON(t, ours), &oursStored))
	assert.Equal(t, comparable(&theirs), comparable(&oursStored), "the result of one reply, upstream's and ours, field by field")

	_, err = runUpstream(t, bin, vpc.Node, "DEL", podNs.Path(), upstreamConf(t, mode, ours))
	require.NoError(t, err, "upstream's DEL of our pod")
	assert.Empty(t, ipamd.delReasons(), "neither plugin asks ipamd about a branch pod's DEL when prevResult names it")
	// Upstream's teardown leaves the strict-mode route to the pod through
	// its veth until the runtime deletes the namespace, which takes the veth
	// and the route with it.
	netnsutil.Delete(t, podNs)
	requireLinkGone(t, vpc.Node, hostVethName(branchVethPrefix("eni", mode), "default", "web"))
	requireBranchGone(t, vpc.Node, spec)
	assert.Equal(t, rulesBefore, vlantest.Rules(t, vpc.Node), "the node's rules are as before the pods")
}

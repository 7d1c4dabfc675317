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

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
	"github.com/aws/amazon-vpc-cni-k8s/test/components"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
	"github.com/aws/amazon-vpc-cni-k8s/test/vlantest"
)

// Upstream's aws-cni (component upstream-cni) on the test machine's own
// kernel: a multi-NIC pod needs no VLAN, so no VM.
//
// Upstream's plugin always dials /var/run/aws-node/ipamd.sock. It runs
// here in a private mount namespace (unshare) in which a tmpfs covers
// /var and /var/run/aws-node is a bind of a test directory holding the
// stand-in ipamd's socket: nothing is created or served at the machine's
// own /var/run/aws-node. (/run, where the namespaces are, stays visible;
// the binary is copied out of /var/cache first.)

// upstreamCNI is a runnable copy of upstream's aws-cni outside /var.
func upstreamCNI(t *testing.T) string {
	t.Helper()
	if os.Getenv(vlantest.InVMEnv) == "1" {
		t.Skip("the VM harness has no component cache; this test runs on the machine's kernel")
	}
	netnsutil.RequireRoot(t)
	for _, tool := range []string{"nsenter", "unshare", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is needed to run upstream's aws-cni in the node namespace", tool)
		}
	}
	src := components.Bin(t, "aws-cni")
	dir := t.TempDir()
	if strings.HasPrefix(dir, "/var/") {
		t.Fatalf("the test's temp dir %s is under /var, which upstream's plugin will not see (set TMPDIR elsewhere)", dir)
	}
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	bin := filepath.Join(dir, "aws-cni")
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	return bin
}

// serveIPAMDIn serves backend at dir/ipamd.sock.
func serveIPAMDIn(t *testing.T, dir string, backend rpc.CNIBackendServer) {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(dir, "ipamd.sock"))
	require.NoError(t, err)
	s := grpc.NewServer()
	rpc.RegisterCNIBackendServer(s, backend)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
}

// upstreamMultiNICConf is the conflist entry as upstream's plugin reads it,
// with the pod's multi-NIC annotation.
func upstreamMultiNICConf(t *testing.T, prev *current.Result) []byte {
	t.Helper()
	c := map[string]any{"cniVersion": "1.0.0", "name": networkName, "type": "aws-cni", "vethPrefix": "eni", "mtu": "9001",
		"podSGEnforcingMode": "strict", "pluginLogFile": filepath.Join(t.TempDir(), "upstream-plugin.log"), "pluginLogLevel": "DEBUG",
		"runtimeConfig": map[string]any{"io.kubernetes.cri.pod-annotations": map[string]string{"k8s.amazonaws.com/nicConfig": "multi-nic-attachment"}}}
	if prev != nil {
		c["prevResult"] = prevResultOf(t, prev)
	}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}

// upstreamScript runs $BIN with $SOCKDIR at /var/run/aws-node.
const upstreamScript = `set -e
mount -t tmpfs aws-cni-test /var
mkdir -p /var/run/aws-node
mount --bind "$SOCKDIR" /var/run/aws-node
exec "$BIN"`

// runUpstreamIn runs upstream's plugin for verb in the node namespace for
// pod default/web, with ipamd at sockDir/ipamd.sock (none there: ipamd
// unreachable). It returns the plugin's stdout.
func runUpstreamIn(t *testing.T, bin string, node ns.NetNS, sockDir, verb, netnsPath string, conf []byte) ([]byte, error) {
	t.Helper()
	return runUpstreamAs(t, bin, node, sockDir, verb, netnsPath, "web", "c0ffeeweb", conf)
}

// runUpstreamAs is runUpstreamIn for pod default/<pod> in sandbox
// containerID.
func runUpstreamAs(t *testing.T, bin string, node ns.NetNS, sockDir, verb, netnsPath, pod, containerID string, conf []byte) ([]byte, error) {
	t.Helper()
	cmd := exec.Command("nsenter", "--net="+node.Path(), "--", "unshare", "--mount", "--propagation", "private", "--", "sh", "-c", upstreamScript)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(conf), &stdout, &stderr
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "BIN=" + bin, "SOCKDIR=" + sockDir,
		"CNI_COMMAND=" + verb, "CNI_CONTAINERID=" + containerID, "CNI_NETNS=" + netnsPath, "CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin",
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + pod + ";K8S_POD_INFRA_CONTAINER_ID=" + containerID + ";K8S_POD_UID=uid-" + pod}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("upstream aws-cni %s: %w (stdout %q, stderr %q)", verb, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

// realNetnsPath is p's namespace path with symlinks resolved (/var/run is
// hidden from upstream's plugin; /run is not).
func realNetnsPath(t *testing.T, p ns.NetNS) string {
	t.Helper()
	path, err := filepath.EvalSymlinks(p.Path())
	require.NoError(t, err)
	require.False(t, strings.HasPrefix(path, "/var/"), "namespace %s resolves under /var", path)
	return path
}

// comparableRequest is r without what differs between two ADDs of one pod
// by two plugins in two namespaces: the client's version and the netns.
func comparableRequest(r *rpc.AddNetworkRequest) map[string]any {
	return map[string]any{
		"K8S_POD_NAME": r.K8S_POD_NAME, "K8S_POD_NAMESPACE": r.K8S_POD_NAMESPACE,
		"K8S_POD_INFRA_CONTAINER_ID": r.K8S_POD_INFRA_CONTAINER_ID, "IfName": r.IfName, "NetworkName": r.NetworkName,
		"ContainerID": r.ContainerID, "RequiresMultiNICAttachment": r.RequiresMultiNICAttachment,
	}
}

// Upstream's aws-cni and this plugin, given one multi-NIC reply from
// ipamd, ask for it alike (RequiresMultiNICAttachment included), wire the
// pod into the same result field by field, and each tears down the
// other's pod, from its prevResult alone when ipamd cannot be reached and
// from ipamd's reply when it answers: a rolling update of aws-node, or a
// rollback, in the middle of a multi-NIC pod's life leaves neither a
// broken pod nor a stale route or rule. Both plugins' pods send each
// address's traffic out of its own card.
func TestUpstreamsPluginAndOursShareAMultiNICPod(t *testing.T) {
	bin := upstreamCNI(t)
	for _, c := range []struct {
		name       string
		n          int
		v6         bool
		ipamdOnDel bool
	}{
		{"3 cards IPv4, DEL from prevResult", 3, false, false},
		{"3 cards IPv4, DEL from ipamd's reply", 3, false, true},
		{"2 cards IPv6, DEL from prevResult", 2, true, false},
		{"2 cards IPv6, DEL from ipamd's reply", 2, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cards := cardsFor(c.n, c.v6)
			m := newMultiNICNode(t, cards, c.v6)
			ipamd := &multiNICIPAMD{allocs: allocations(cards)}
			sockDir := t.TempDir()
			serveIPAMDIn(t, sockDir, ipamd)
			sock := filepath.Join(sockDir, "ipamd.sock")
			delDir := t.TempDir() // no ipamd there
			if c.ipamdOnDel {
				delDir = sockDir
			}
			delSock := filepath.Join(delDir, "ipamd.sock")

			// Upstream's ADD, then our DEL.
			podNs := newPodNetns(t)
			path := realNetnsPath(t, podNs)
			out, err := runUpstreamIn(t, bin, m.node, sockDir, "ADD", path, upstreamMultiNICConf(t, nil))
			require.NoError(t, err)
			var theirs current.Result
			require.NoError(t, json.Unmarshal(out, &theirs), "upstream's result: %s", out)
			m.requireTalksThroughEachCard(t, podNs, cards)
			for i, cd := range cards {
				requirePodInterfaceWired(t, m.node, podNs, i, cd)
			}
			require.NoError(t, delInProcess(t, m.node, multiNICVerb(t, delSock, path, false, map[string]any{"prevResult": prevResultOf(t, &theirs)})),
				"our DEL of upstream's pod")
			m.requireNodeHasNoPodState(t, cards, false)
			netnsutil.Delete(t, podNs)
			m.requireNodeHasNoPodState(t, cards, true)

			// Our ADD, then upstream's DEL.
			podNs = newPodNetns(t)
			path = realNetnsPath(t, podNs)
			ours, err := addInProcess(t, m.node, multiNICVerb(t, sock, path, false, nil))
			require.NoError(t, err)
			m.requireTalksThroughEachCard(t, podNs, cards)
			var oursStored current.Result
			require.NoError(t, json.Unmarshal(mustJSON(t, ours), &oursStored))
			assert.Equal(t, comparable(&theirs), comparable(&oursStored), "the result of one reply, upstream's and ours, field by field")

			reqs := ipamd.addRequests()
			require.Len(t, reqs, 2)
			assert.True(t, reqs[0].RequiresMultiNICAttachment, "upstream asks for a multi-NIC attachment")
			assert.Equal(t, comparableRequest(reqs[0]), comparableRequest(reqs[1]), "AddNetwork, upstream's and ours")

			_, err = runUpstreamIn(t, bin, m.node, delDir, "DEL", path, upstreamMultiNICConf(t, ours))
			require.NoError(t, err, "upstream's DEL of our pod")
			m.requireNodeHasNoPodState(t, cards, false)
			netnsutil.Delete(t, podNs)
			m.requireNodeHasNoPodState(t, cards, true)
			if c.ipamdOnDel {
				assert.Equal(t, []string{reasonPodDeleted, reasonPodDeleted}, ipamd.delReasons(), "both DELs release at ipamd")
			} else {
				assert.Empty(t, ipamd.delReasons(), "ipamd was away for both DELs")
			}
		})
	}
}

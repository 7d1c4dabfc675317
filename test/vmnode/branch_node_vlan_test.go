package vmnode

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

const inVMEnv = "AWS_VPC_CNI_IN_VM"

// A branch-ENI pod on a strict-mode node, created and removed by the
// kubelet's CRI calls to a real containerd with runc: RunPodSandbox has
// the chart's conflist run aws-cni, which wires the pod over the VLAN of
// ipamd's branch reply on the trunk; the pod reaches the VPC through the
// VLAN, and the node and the VPC reach the pod over TCP. StopPodSandbox
// and RemovePodSandbox tear it down: the node's links, rules and routes
// are as before the pod.
func TestABranchPodsSandboxIsWiredOverItsVLANAndTornDownByTheRuntimeVLAN(t *testing.T) {
	if os.Getenv(inVMEnv) != "1" {
		t.Skip("vmnode: runs only in the VM harness's guest (test/vmkernel's TestABranchPodOnARealNodeInTheVMVLAN boots it)")
	}
	files := []string{Runc, Libseccomp, ConflistTemplate, PauseTar}
	for _, b := range NodeBinaries {
		files = append(files, filepath.Join(NodeBin, b))
	}
	for _, b := range CNIBinaries {
		files = append(files, filepath.Join(CNIBin, b))
	}
	requireFiles(t, files...)
	mountCgroup2(t)

	v := newVPC(t)
	pod := podMeta{name: "web", namespace: "default", uid: "uid-web"}
	ipamd := &branchIPAMD{pod: pod, add: &rpc.AddNetworkReply{Success: true,
		IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: branchIP.String(), DeviceNumber: -1, RouteTableId: 0}},
		PodVlanId:            int32(branchVLAN), PodENIMAC: branchMAC.String(), PodENISubnetGW: branchGW.String(), ParentIfIndex: int32(v.trunkIndex)}}
	serveIPAMD(t, ipamd)
	writeConflist(t)
	before := readNodeState(t, v.node)

	start := time.Now()
	n := startContainerd(t)
	t.Logf("containerd's CRI answered after %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	importPause(t)
	t.Logf("pause image imported in %s", time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start = time.Now()
	id, err := n.runSandbox(ctx, pod)
	if err != nil {
		t.Fatalf("RunPodSandbox: %v\ncontainerd log (tail):\n%s\nplugin log (tail):\n%s", err, logTail(containerdLog), logTail("/var/log/aws-routed-eni/plugin.log"))
	}
	t.Logf("RunPodSandbox took %s", time.Since(start).Round(time.Millisecond))
	used, total := guestMemoryUsedMB()
	t.Logf("guest memory with the pod running: %d MB used of %d MB", used, total)

	ip, netnsPath, err := n.sandboxNet(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, branchIP.String(), ip, "the sandbox's IP is the branch reply's")
	podNS, err := ns.GetNS(netnsPath)
	require.NoError(t, err)
	wired := readNodeState(t, v.node)
	assert.Contains(t, wired.links, driver.VLANLinkName(branchVLAN), "the branch's VLAN link on the trunk")
	assert.NotEmpty(t, wired.vlanRoutes, "the VLAN's route table")

	require.NoError(t, ping(podNS, routerIP), "branch pod -> VPC through the VLAN")
	require.NoError(t, tcpEcho(podNS, branchIP, v.node), "node -> branch pod over TCP (kubelet probe)")
	require.NoError(t, tcpEcho(podNS, branchIP, v.net), "VPC -> branch pod over TCP")
	// An open handle would keep the namespace, and the pod's veth, alive
	// after the runtime removes it.
	require.NoError(t, podNS.Close())

	start = time.Now()
	require.NoError(t, n.removeSandbox(ctx, id), "plugin log (tail):\n%s", logTail("/var/log/aws-routed-eni/plugin.log"))
	t.Logf("StopPodSandbox and RemovePodSandbox took %s", time.Since(start).Round(time.Millisecond))
	adds, dels := ipamd.calls()
	t.Logf("ipamd stand-in: %d AddNetwork, DelNetwork with reasons %q", adds, dels)
	assert.Equal(t, 1, adds, "one AddNetwork for the pod")

	// The pod's veth goes with its namespace, which the kernel destroys
	// asynchronously: wait for the links to be as before.
	assert.Eventually(t, func() bool {
		links, err := netnsutil.LinkNames(v.node)
		slices.Sort(links)
		return err == nil && slices.Equal(links, before.links)
	}, trafficTimeout, 100*time.Millisecond, "links left on the node")
	after := readNodeState(t, v.node)
	assert.Equal(t, before.links, after.links, "links")
	assert.Equal(t, before.rules, after.rules, "rules")
	assert.Empty(t, after.vlanRoutes, "routes of the VLAN's table")
	assert.Equal(t, before.mainRoutes, after.mainRoutes, "main table routes")
	for _, r := range after.mainRoutes {
		assert.NotContains(t, r, branchIP.String())
	}
}

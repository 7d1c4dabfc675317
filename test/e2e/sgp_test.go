package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/sgpcontroller"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// This host's kernel has no VLAN links, so no branch pod's datapath is
// wired here (that runs in the VM kernel: test/vmkernel). What runs here is
// the rest of security groups for pods on a real runtime, against the
// suite's real kube-apiserver, with the stand-in VPC resource controller
// (pkg/sim/sgpcontroller) making the trunk and the branches in the
// simulated EC2.

const podENIResource = "vpc.amazonaws.com/pod-eni"

// nodeHTTPClient dials inside the node's namespace, where the simulated
// EC2 listens.
func nodeHTTPClient(node ns.NetNS) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := node.Do(func(ns.NetNS) error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}}
}

// startSGPController runs the stand-in controller for the node until the
// test ends, with a short branch cooldown.
func startSGPController(t *testing.T, n *Node, cooldown time.Duration) *sgpcontroller.Controller {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ctrl, err := sgpcontroller.Start(ctx, sgpcontroller.Options{
		Kube: n.Kube.Server().Admin(), EC2Endpoint: n.Sim.EC2Endpoint(), HTTPClient: nodeHTTPClient(n.Net.Node),
		Region: n.Sim.Region(), NodeName: n.Kube.NodeName, InstanceID: n.Sim.InstanceID(), SubnetID: n.Sim.SubnetIDs()[0],
		BranchCooldown: cooldown,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctrl.Stop()
		cancel()
		dyn := n.Kube.dyn.Resource(sgpcontroller.CNINodeGVR)
		_ = dyn.Delete(context.Background(), n.Kube.NodeName, metav1.DeleteOptions{})
	})
	return ctrl
}

// createBranchPod is a pod object asking for a branch ENI, as a
// SecurityGroupPolicy's webhook leaves it: its first container limits
// vpc.amazonaws.com/pod-eni to 1.
func createBranchPod(t *testing.T, n *Node, name string) *corev1.Pod {
	t.Helper()
	return n.Kube.CreatePodWith(t, name, func(p *corev1.Pod) {
		one := resource.MustParse("1")
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Limits: corev1.ResourceList{podENIResource: one}, Requests: corev1.ResourceList{podENIResource: one}}
	})
}

// branchAnnotation waits for the controller's vpc.amazonaws.com/pod-eni
// annotation on pod name and returns its one element.
func branchAnnotation(t *testing.T, n *Node, name string) map[string]any {
	t.Helper()
	var got []map[string]any
	_, ok := WaitFor(30*time.Second, func() bool {
		p, err := n.Kube.Pod(name)
		if err != nil || p.Annotations[podENIResource] == "" {
			return false
		}
		return json.Unmarshal([]byte(p.Annotations[podENIResource]), &got) == nil && len(got) == 1
	})
	require.Truef(t, ok, "pod %s has no %s annotation", name, podENIResource)
	return got[0]
}

// cniClient talks to the agent's socket as the plugin does.
func cniClient(t *testing.T, n *Node) rpc.CNIBackendClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+n.IPAMD.Sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return rpc.NewCNIBackendClient(conn)
}

func branchAdd(t *testing.T, c rpc.CNIBackendClient, pod *corev1.Pod, sandbox string) *rpc.AddNetworkReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.AddNetwork(ctx, &rpc.AddNetworkRequest{ClientVersion: version.RPCVersion, K8S_POD_NAME: pod.Name,
		K8S_POD_NAMESPACE: pod.Namespace, K8S_POD_INFRA_CONTAINER_ID: sandbox, ContainerID: sandbox,
		Netns: "/var/run/netns/" + sandbox, IfName: "eth0", NetworkName: "aws-cni"})
	require.NoError(t, err)
	return r
}

func branchDel(c rpc.CNIBackendClient, pod *corev1.Pod, uid, sandbox string) (*rpc.DelNetworkReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.DelNetwork(ctx, &rpc.DelNetworkRequest{ClientVersion: version.RPCVersion, K8S_POD_NAME: pod.Name,
		K8S_POD_NAMESPACE: pod.Namespace, K8S_POD_INFRA_CONTAINER_ID: sandbox, ContainerID: sandbox,
		IfName: "eth0", NetworkName: "aws-cni", K8S_POD_UID: uid, Reason: "PodDeleted"})
}

// runRegularPod creates the pod object (every ADD looks the pod up when
// security groups for pods are on) and runs its sandbox with the object's
// UID, as a kubelet does.
func runRegularPod(t *testing.T, n *Node, prefix string) *Pod {
	t.Helper()
	name := n.NextName(prefix)
	obj := n.Kube.CreatePod(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := n.RunPodAs(ctx, name, string(obj.UID))
	require.NoError(t, err)
	return p
}

// A node with ENABLE_POD_ENI=true asks for a trunk through its CNINode,
// keeps the trunk out of the pool, answers a branch pod's ADD from the
// pod's annotation (the trunk's link, the branch's MAC, VLAN and subnet
// gateway, device -1, table 0) without taking a pool address, and its DEL
// likewise; a deleted pod's DEL succeeds and one naming another pod's UID
// fails. Regular pods beside them get pool addresses and reach each other,
// and the reconciler frees a regular pod's lost DEL across a restart while
// the branch pods, which the pool never held, are left to the controller.
func TestASecurityGroupsForPodsNodeServesBranchPodsBesideRegularOnes(t *testing.T) {
	env := map[string]string{"ENABLE_POD_ENI": "true", "POD_SECURITY_GROUP_ENFORCING_MODE": "strict"}
	n := NewNode(t, Options{APIServer: true, Env: env, LaunchLater: true})
	ctrl := startSGPController(t, n, 2*time.Second)
	launched, err := n.IPAMD.Launch()
	require.NoError(t, err)
	require.NoError(t, n.IPAMD.WaitServing(60*time.Second))

	// The trunk: asked for, attached by the controller, set up by ipamd and
	// kept out of the pool.
	var trunkID, trunkMAC string
	took, ok := WaitFor(60*time.Second, func() bool {
		id, mac, ok := ctrl.Trunk()
		trunkID, trunkMAC = id, mac
		if !ok {
			return false
		}
		enis, err := n.IPAMD.ENIs()
		return err == nil && enis.ENIs[id].IsTrunk
	})
	require.Truef(t, ok, "no trunk ENI in ipamd's /v1/enis after %v", took)
	t.Logf("FIGURE trunk in ipamd's datastore %v after the agent launched", time.Since(launched).Round(time.Millisecond))
	enis, err := n.IPAMD.ENIs()
	require.NoError(t, err)
	assert.Empty(t, enis.ENIs[trunkID].AvailableIPv4Cidrs, "the trunk gives pods no address")
	var trunkIndex int
	require.NoError(t, n.Net.Node.Do(func(ns.NetNS) error {
		links, err := netlink.LinkList()
		for _, l := range links {
			if l.Attrs().HardwareAddr.String() == trunkMAC {
				trunkIndex = l.Attrs().Index
				if l.Attrs().OperState != netlink.OperUp && l.Attrs().Flags&net.FlagUp == 0 {
					t.Errorf("the trunk's link %s is down", l.Attrs().Name)
				}
			}
		}
		return err
	}))
	require.NotZero(t, trunkIndex, "no link with the trunk's MAC %s in the node", trunkMAC)

	// Regular pods beside branch pods.
	var regular []*Pod
	for i := 0; i < 6; i++ {
		regular = append(regular, runRegularPod(t, n, "reg"))
	}
	require.NoError(t, n.Ping(regular[0], regular[1]))

	c := cniClient(t, n)
	type branchPod struct {
		pod     *corev1.Pod
		sandbox string
		ann     map[string]any
	}
	var branches []branchPod
	for i := 0; i < 2; i++ {
		p := createBranchPod(t, n, n.NextName("sgp"))
		branches = append(branches, branchPod{pod: p, sandbox: newUID(), ann: branchAnnotation(t, n, p.Name)})
	}
	assigned, _, err := n.IPAMD.Assigned()
	require.NoError(t, err)
	before := len(assigned)
	for _, b := range branches {
		r := branchAdd(t, c, b.pod, b.sandbox)
		require.Truef(t, r.Success, "branch pod %s refused", b.pod.Name)
		ip := b.ann["privateIp"].(string)
		subnet := netip.MustParsePrefix(b.ann["subnetCidr"].(string))
		assert.EqualValues(t, b.ann["vlanId"], r.PodVlanId, "PodVlanId")
		assert.Equal(t, b.ann["ifAddress"], r.PodENIMAC, "PodENIMAC")
		assert.Equal(t, subnet.Masked().Addr().Next().String(), r.PodENISubnetGW, "PodENISubnetGW: the subnet's first host")
		assert.EqualValues(t, trunkIndex, r.ParentIfIndex, "ParentIfIndex: the trunk's link")
		require.Len(t, r.IPAllocationMetadata, 1)
		md := r.IPAllocationMetadata[0]
		assert.Equal(t, ip, md.IPv4Addr)
		assert.Empty(t, md.IPv6Addr)
		assert.EqualValues(t, -1, md.DeviceNumber)
		assert.EqualValues(t, 0, md.RouteTableId)
		_, inPool := assigned[netip.MustParseAddr(ip)]
		assert.Falsef(t, inPool, "branch address %s is one of the pool's", ip)
	}
	assigned, _, err = n.IPAMD.Assigned()
	require.NoError(t, err)
	assert.Equal(t, before, len(assigned), "branch pods take no pool address")
	assert.Equal(t, len(regular), len(assigned))

	// A regular pod's DEL lost across a restart is reclaimed; the branch
	// pods, outside the pool, are untouched and still answered alike.
	lost := regular[:2]
	require.NoError(t, n.IPAMD.Stop())
	for _, p := range lost {
		n.MustDeletePod(t, p)
	}
	dropped, err := n.IPAMD.DropQueue()
	require.NoError(t, err)
	require.Equal(t, len(lost), dropped)
	require.NoError(t, n.IPAMD.Start())
	var held []netip.Addr
	took, ok = WaitFor(ReconcileStartDelay+ReconcileGrace+4*ReconcileInterval, func() bool {
		held = heldIPs(t, n, podIPs(lost))
		return len(held) == 0
	})
	require.Truef(t, ok, "lost DELs still held after %v: %v", took, held)
	for _, p := range regular[2:] {
		assert.NoError(t, n.CheckPodNetwork(p), "pod %s keeps its network", p.Name)
	}
	assert.Equal(t, podIPs(regular[2:]), heldIPs(t, n, podIPs(regular[2:])), "the other regular pods keep their addresses")
	for _, b := range branches {
		r := branchAdd(t, c, b.pod, b.sandbox)
		require.True(t, r.Success)
		assert.EqualValues(t, b.ann["vlanId"], r.PodVlanId, "after the restart")
	}
	if v, err := n.IPAMD.Metric("awscni_pod_eni_error_count"); err == nil {
		assert.Zero(t, v, "awscni_pod_eni_error_count")
	}

	// DEL: the live branch pod answers with its VLAN and address; another
	// UID is refused; a deleted pod's DEL succeeds.
	b := branches[0]
	r, err := branchDel(c, b.pod, string(b.pod.UID), b.sandbox)
	require.NoError(t, err)
	assert.True(t, r.Success)
	assert.EqualValues(t, b.ann["vlanId"], r.PodVlanId)
	require.Len(t, r.IPAllocationMetadata, 1)
	assert.Equal(t, b.ann["privateIp"], r.IPAllocationMetadata[0].IPv4Addr)
	r, err = branchDel(c, b.pod, "another-uid", b.sandbox)
	assert.False(t, err == nil && r.Success, "a DEL naming another pod's UID must not succeed")
	require.NoError(t, n.Kube.Admin.CoreV1().Pods(podNS).Delete(context.Background(), b.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	_, ok = WaitFor(20*time.Second, func() bool {
		r, err := branchDel(c, b.pod, string(b.pod.UID), b.sandbox)
		return err == nil && r.Success && r.PodVlanId == 0
	})
	assert.True(t, ok, "a deleted branch pod's DEL succeeds")
	_, ok = WaitFor(30*time.Second, func() bool { _, held := ctrl.Branch(b.pod.UID); return !held })
	assert.True(t, ok, "the controller removes the deleted pod's branch")

	assert.Equal(t, podIPs(regular[2:]), heldIPs(t, n, podIPs(regular[2:])), "regular pods keep their addresses through the branch pods' DELs")
	for _, p := range regular[2:] {
		n.MustDeletePod(t, p)
	}
	_, ok = WaitFor(20*time.Second, func() bool { a, _, err := n.IPAMD.Assigned(); return err == nil && len(a) == 0 })
	assert.True(t, ok, "nothing stays allocated")
	assert.Empty(t, n.IPAMD.Queue(), "no DEL was refused (a regular pod's second DEL is \"unknown pod\", which the plugin takes as done)")
	requireConsistent(t, n)
}

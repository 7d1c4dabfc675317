package ipamd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podeni"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/sgpcontroller"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
	"github.com/aws/amazon-vpc-cni-k8s/test/apiserver"
	"github.com/aws/amazon-vpc-cni-k8s/test/components"
)

// ipamd's side of security groups for pods against a real kube-apiserver
// and the simulator, with the stand-in VPC resource controller attaching
// the trunk and annotating the pod: the pod cache reads the pod the
// controller annotated, a branch pod's ADD is answered from that
// annotation while a regular pod beside it gets a pool address, and once
// the pod is deleted from the API server its DEL succeeds.
func TestABranchPodAnnotatedByTheControllerIsAnsweredOverTheSocket(t *testing.T) {
	bins := apiserver.Binaries{Etcd: components.Bin(t, "etcd"), KubeAPIServer: components.Bin(t, "kube-apiserver")}
	dir, err := os.MkdirTemp("", "ipamd-sgp-apiserver-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := apiserver.Launch(bins, dir)
	require.NoError(t, err, "kube-apiserver")
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	kube := srv.AdminClient(t)
	dyn, err := dynamic.NewForConfig(srv.Admin())
	require.NoError(t, err)
	_, err = kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: sgpNode}}, metav1.CreateOptions{})
	require.NoError(t, err)

	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, withEnv(quietListeners, map[string]string{"MY_NODE_NAME": sgpNode}), func(o *Options) {
		o.K8s, o.K8sDynamic, o.MaxPods = kube, dyn, 29
		o.Config.EnablePodENI = true
	})
	// The simulated node has no kernel links: the trunk's link index is
	// the agent's lookup's to find, tested with it.
	n.agent.rpc.TrunkLink = func() (int, error) { return 42, nil }
	conn := serveSimNode(t, n)
	cni := rpc.NewCNIBackendClient(conn)

	ctrl, err := sgpcontroller.Start(ctx, sgpcontroller.Options{Kube: srv.Admin(), EC2Endpoint: n.sim.EC2Endpoint(),
		NodeName: sgpNode, InstanceID: n.sim.InstanceID(), SubnetID: n.sim.SubnetIDs()[0], BranchCooldown: 500 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(ctrl.Stop)
	// The feature ipamd's node init asks for (its side of the trunk).
	feature := []byte(`{"spec":{"features":[{"name":"SecurityGroupsForPods"}]}}`)
	require.Eventually(t, func() bool {
		_, err := dyn.Resource(sgpcontroller.CNINodeGVR).Patch(ctx, sgpNode, types.MergePatchType, feature, metav1.PatchOptions{})
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the controller creates the node's CNINode")
	require.Eventually(t, func() bool { _, _, ok := ctrl.Trunk(); return ok }, 30*time.Second, 20*time.Millisecond, "trunk attached")

	for name, branch := range map[string]bool{"db-0": true, "web-0": false} {
		c := corev1.Container{Name: "app", Image: "pause"}
		if branch {
			c.Resources.Limits = corev1.ResourceList{podeni.ResourcePrefix: resource.MustParse("1")}
		}
		_, err := kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: sgpNode, Containers: []corev1.Container{c}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// The runtime retries the ADD until the controller has annotated the
	// pod, as the kubelet does.
	var add *rpc.AddNetworkReply
	require.Eventually(t, func() bool {
		add, err = cni.AddNetwork(ctx, sgpAdd("db-0"))
		return err == nil && add.Success
	}, 30*time.Second, 50*time.Millisecond, "the branch pod's ADD succeeds once annotated")
	pod, err := kube.CoreV1().Pods("default").Get(ctx, "db-0", metav1.GetOptions{})
	require.NoError(t, err)
	var branches []sgpcontroller.PodENI
	require.NoError(t, json.Unmarshal([]byte(pod.Annotations[podeni.Annotation]), &branches))
	require.Len(t, branches, 1)
	b := branches[0]
	subnet := netip.MustParsePrefix(b.SubnetCIDR)
	assert.Equal(t, int32(b.VlanID), add.PodVlanId)
	assert.Equal(t, b.IfAddress, add.PodENIMAC)
	assert.Equal(t, subnet.Masked().Addr().Next().String(), add.PodENISubnetGW)
	assert.Equal(t, int32(42), add.ParentIfIndex)
	require.Len(t, add.IPAllocationMetadata, 1)
	assert.Equal(t, &rpc.IPAllocationMetadata{IPv4Addr: b.PrivateIP, DeviceNumber: -1}, add.IPAllocationMetadata[0])
	assert.Zero(t, n.agent.store.Stats().AssignedIPs, "the branch pod is not in the datastore")

	web, err := cni.AddNetwork(ctx, sgpAdd("web-0"))
	require.NoError(t, err)
	require.True(t, web.Success)
	assert.Zero(t, web.PodVlanId)
	assert.NotEqual(t, b.PrivateIP, web.IPAllocationMetadata[0].IPv4Addr)

	del, err := cni.DelNetwork(ctx, sgpDel("db-0", string(pod.UID)))
	require.NoError(t, err)
	assert.Equal(t, int32(b.VlanID), del.PodVlanId)
	assert.Equal(t, b.PrivateIP, del.IPAllocationMetadata[0].IPv4Addr)

	zero := int64(0)
	require.NoError(t, kube.CoreV1().Pods("default").Delete(ctx, "db-0", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	require.Eventually(t, func() bool {
		del, err = cni.DelNetwork(ctx, sgpDel("db-0", string(pod.UID)))
		return err == nil && del.Success && del.PodVlanId == 0
	}, 30*time.Second, 50*time.Millisecond, "a deleted pod's DEL succeeds: NotFound is recognised")
	assert.Empty(t, del.IPAllocationMetadata)
	t.Logf("branch %s on VLAN %d, %s; regular pod %s", b.ENIID, b.VlanID, fmt.Sprint(b.PrivateIP), web.IPAllocationMetadata[0].IPv4Addr)
}

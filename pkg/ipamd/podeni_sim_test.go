package ipamd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podeni"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

const sgpNode = "node-sgp"

// sgpPod is a pod on sgpNode; branch pods carry the pod-eni limit and
// the controller's annotation.
func sgpPod(name string, branch bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: sgpNode, Containers: []corev1.Container{{Name: "app"}}}}
	if branch {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{podeni.ResourcePrefix: resource.MustParse("1")}
		p.Annotations = map[string]string{podeni.Annotation: `[{"eniId":"eni-0branch","ifAddress":"02:6f:aa:bb:cc:01",` +
			`"privateIp":"10.0.40.7","vlanID":3,"subnetCidr":"10.0.32.0/19"}]`}
	}
	return p
}

// startSGPNode is a simulator node with ENABLE_POD_ENI whose API server
// (client-go's fake) holds pods. trunk, when >0, stands for the trunk ENI's
// link index: the simulated node has no kernel links, and finding the
// trunk's link is the agent's own job, tested with it.
func startSGPNode(t *testing.T, trunk int, pods ...*corev1.Pod) (*simNode, *fake.Clientset) {
	k8s := fake.NewClientset()
	for _, p := range pods {
		require.NoError(t, k8s.Tracker().Add(p))
	}
	n := startSimNode(t, ec2sim.Config{}, withEnv(quietListeners, map[string]string{"MY_NODE_NAME": sgpNode}), func(o *Options) {
		o.K8s, o.MaxPods = k8s, 29
		o.Config.EnablePodENI = true
	})
	require.NotNil(t, n.agent.rpc.PodSource, "ENABLE_POD_ENI wires the pod cache")
	require.NotNil(t, n.agent.rpc.TrunkLink, "ENABLE_POD_ENI wires the trunk's link")
	if trunk > 0 {
		n.agent.rpc.TrunkLink = func() (int, error) { return trunk, nil }
	}
	return n, k8s
}

func sgpAdd(name string) *rpc.AddNetworkRequest {
	return &rpc.AddNetworkRequest{ClientVersion: version.RPCVersion, K8S_POD_NAMESPACE: "default", K8S_POD_NAME: name,
		ContainerID: "c-" + name, IfName: "eth0", NetworkName: "aws-cni", Netns: "/var/run/netns/" + name}
}

func sgpDel(name, uid string) *rpc.DelNetworkRequest {
	return &rpc.DelNetworkRequest{ClientVersion: version.RPCVersion, K8S_POD_NAMESPACE: "default", K8S_POD_NAME: name,
		ContainerID: "c-" + name, IfName: "eth0", NetworkName: "aws-cni", Reason: "PodDeleted", K8S_POD_UID: uid}
}

// wireFields are a message's top-level fields by number, as varints or
// bytes, read from its encoding: the numbers the plugin's decoder relies
// on (upstream-facts §2.2).
func wireFields(t *testing.T, m proto.Message) map[protowire.Number][]any {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	out := map[protowire.Number][]any{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		require.GreaterOrEqual(t, n, 0)
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			out[num], b = append(out[num], v), b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			out[num], b = append(out[num], string(v)), b[n:]
		default:
			t.Fatalf("unexpected wire type %d for field %d", typ, num)
		}
	}
	return out
}

// A branch pod's ADD and DEL over ipamd's socket are answered from its
// annotation, field by field, as the generated client and the plugin's
// own decoder read them; a regular pod beside it still gets a pool
// address; the branch pod never enters the datastore.
func TestABranchPodIsAnsweredFromItsAnnotationOverTheSocket(t *testing.T) {
	n, _ := startSGPNode(t, 42, sgpPod("branch", true), sgpPod("regular", false))
	conn := serveSimNode(t, n)
	cni := rpc.NewCNIBackendClient(conn)
	ctx := context.Background()

	add, err := cni.AddNetwork(ctx, sgpAdd("branch"))
	require.NoError(t, err)
	assert.True(t, add.Success)
	assert.Equal(t, int32(3), add.PodVlanId)
	assert.Equal(t, "02:6f:aa:bb:cc:01", add.PodENIMAC)
	assert.Equal(t, "10.0.32.1", add.PodENISubnetGW)
	assert.Equal(t, int32(42), add.ParentIfIndex)
	require.Len(t, add.IPAllocationMetadata, 1)
	assert.Equal(t, "10.0.40.7", add.IPAllocationMetadata[0].IPv4Addr)
	assert.Empty(t, add.IPAllocationMetadata[0].IPv6Addr)
	assert.Equal(t, int32(-1), add.IPAllocationMetadata[0].DeviceNumber)
	assert.Equal(t, int32(0), add.IPAllocationMetadata[0].RouteTableId)
	assert.NotEmpty(t, add.VPCv4CIDRs, "the VPC's CIDRs as for any pod")

	// Upstream's numbers: PodVlanId 7, PodENIMAC 8, PodENISubnetGW 9,
	// ParentIfIndex 10.
	w := wireFields(t, add)
	assert.Equal(t, []any{uint64(3)}, w[7])
	assert.Equal(t, []any{"02:6f:aa:bb:cc:01"}, w[8])
	assert.Equal(t, []any{"10.0.32.1"}, w[9])
	assert.Equal(t, []any{uint64(42)}, w[10])

	// The plugin's decoder, over its own connection.
	wire := ipamdwire.Client{Socket: n.agent.opts.SocketPath}
	pAdd, err := wire.AddNetwork(&ipamdwire.AddNetworkRequest{ClientVersion: version.RPCVersion, K8S_POD_NAMESPACE: "default",
		K8S_POD_NAME: "branch", ContainerID: "c-branch", IfName: "eth0", NetworkName: "aws-cni"}, 10*time.Second)
	require.NoError(t, err)
	assert.True(t, pAdd.Success)
	assert.Equal(t, int32(3), pAdd.PodVlanId)
	assert.Equal(t, "02:6f:aa:bb:cc:01", pAdd.PodENIMAC)
	assert.Equal(t, "10.0.32.1", pAdd.PodENISubnetGW)
	assert.Equal(t, int32(42), pAdd.ParentIfIndex)
	require.Len(t, pAdd.IPAllocationMetadata, 1)
	assert.Equal(t, ipamdwire.IPAllocationMetadata{IPv4Addr: "10.0.40.7", DeviceNumber: -1}, *pAdd.IPAllocationMetadata[0])
	assert.Empty(t, pAdd.FailureCause)

	reg, err := cni.AddNetwork(ctx, sgpAdd("regular"))
	require.NoError(t, err)
	require.True(t, reg.Success)
	assert.Zero(t, reg.PodVlanId)
	assert.GreaterOrEqual(t, reg.IPAllocationMetadata[0].DeviceNumber, int32(0))
	assert.NotEqual(t, "10.0.40.7", reg.IPAllocationMetadata[0].IPv4Addr)
	assert.Equal(t, 1, n.agent.store.Stats().AssignedIPs, "only the regular pod is in the datastore")

	del, err := cni.DelNetwork(ctx, sgpDel("branch", "uid-branch"))
	require.NoError(t, err)
	assert.True(t, del.Success)
	assert.Equal(t, int32(3), del.PodVlanId)
	require.Len(t, del.IPAllocationMetadata, 1)
	assert.Equal(t, "10.0.40.7", del.IPAllocationMetadata[0].IPv4Addr)
	assert.Equal(t, []any{uint64(3)}, wireFields(t, del)[4], "DelNetworkReply.PodVlanId is field 4")
	pDel, err := wire.DelNetwork(&ipamdwire.DelNetworkRequest{ClientVersion: version.RPCVersion, K8S_POD_NAMESPACE: "default",
		K8S_POD_NAME: "branch", ContainerID: "c-branch", IfName: "eth0", NetworkName: "aws-cni", K8S_POD_UID: "uid-branch"}, 10*time.Second)
	require.NoError(t, err)
	assert.True(t, pDel.Success)
	assert.Equal(t, int32(3), pDel.PodVlanId)
	assert.Equal(t, "10.0.40.7", pDel.IPAllocationMetadata[0].IPv4Addr)

	regDel, err := cni.DelNetwork(ctx, sgpDel("regular", "uid-regular"))
	require.NoError(t, err)
	assert.Equal(t, reg.IPAllocationMetadata[0].IPv4Addr, regDel.IPAllocationMetadata[0].IPv4Addr)
	assert.Zero(t, n.agent.store.Stats().AssignedIPs)
}

// The DEL of a pod the API server no longer has succeeds (its NotFound is
// recognised, unlike upstream's #3777); one naming another UID of the pod
// is an error.
func TestADeletedPodsDelSucceedsAndAnotherUIDsFails(t *testing.T) {
	n, k8s := startSGPNode(t, 42, sgpPod("branch", true))
	conn := serveSimNode(t, n)
	cni := rpc.NewCNIBackendClient(conn)
	ctx := context.Background()

	_, err := cni.DelNetwork(ctx, sgpDel("branch", "uid-other"))
	assert.Equal(t, codes.Unknown, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "UID")

	require.NoError(t, k8s.CoreV1().Pods("default").Delete(ctx, "branch", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := n.agent.podCache.Get(ctx, "default", "branch")
		return apierrors.IsNotFound(err)
	}, 10*time.Second, 10*time.Millisecond, "the deletion reaches the pod cache")
	del, err := cni.DelNetwork(ctx, sgpDel("branch", "uid-branch"))
	require.NoError(t, err)
	assert.True(t, del.Success)
	assert.Zero(t, del.PodVlanId)
	assert.Empty(t, del.IPAllocationMetadata)
}

// Without a trunk ENI a branch pod's ADD fails and says why, in the line
// the plugin puts in the kubelet's event.
func TestWithoutATrunkABranchPodsAddNamesTheMissingTrunk(t *testing.T) {
	n, _ := startSGPNode(t, 0, sgpPod("branch", true))
	serveSimNode(t, n)
	wire := ipamdwire.Client{Socket: n.agent.opts.SocketPath}
	r, err := wire.AddNetwork(&ipamdwire.AddNetworkRequest{ClientVersion: version.RPCVersion, K8S_POD_NAMESPACE: "default",
		K8S_POD_NAME: "branch", ContainerID: "c-branch", IfName: "eth0", NetworkName: "aws-cni"}, 10*time.Second)
	require.NoError(t, err)
	assert.False(t, r.Success)
	assert.Contains(t, r.FailureCause, "trunk_eni_missing: the pod asks for a branch ENI and the node has no trunk ENI yet")
	assert.Zero(t, n.agent.store.Stats().AssignedIPs)
}

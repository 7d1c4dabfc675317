package sgpcontroller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/sgpcontroller"
	"github.com/aws/amazon-vpc-cni-k8s/test/apiserver"
	"github.com/aws/amazon-vpc-cni-k8s/test/components"
)

// The tests here run the stand-in against a real kube-apiserver
// (test/apiserver, built by scripts/ci/components.sh) and the EC2
// simulator. One server serves every test of the binary; each test has
// its own node, simulator and pods.

var shared struct {
	once sync.Once
	srv  *apiserver.Server
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func realServer(t *testing.T) *apiserver.Server {
	t.Helper()
	shared.once.Do(func() {
		bins := apiserver.Binaries{Etcd: components.Bin(t, "etcd"), KubeAPIServer: components.Bin(t, "kube-apiserver")}
		if shared.dir, shared.err = os.MkdirTemp("", "sgpcontroller-apiserver-"); shared.err == nil {
			shared.srv, shared.err = apiserver.Launch(bins, shared.dir)
		}
	})
	require.NoError(t, shared.err, "kube-apiserver")
	return shared.srv
}

const (
	waitFor  = 30 * time.Second // generous: two busy cores, other tests running
	cooldown = 500 * time.Millisecond
)

var nodes atomic.Int64

const subnet6 = "2600:1f14:abc:de00::/64"

// env is one node: its Node object, its simulator and a running stand-in.
type env struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
	sim  *ec2sim.Sim
	ec2  *ec2.Client
	node string
	ctrl *sgpcontroller.Controller
}

func newEnv(t *testing.T) *env { return newEnvWith(t, false, 0) }

// newEnvWith builds a node, dual-stack when ipv6 (the stand-in then
// gives branches an IPv6 address too), with a branch limit (0: default).
func newEnvWith(t *testing.T, ipv6 bool, limit int) *env {
	t.Helper()
	srv := realServer(t)
	ctx := context.Background()
	e := &env{kube: srv.AdminClient(t), node: fmt.Sprintf("sgp-node-%d", nodes.Add(1))}
	var err error
	e.dyn, err = dynamic.NewForConfig(srv.Admin())
	require.NoError(t, err)
	_, err = e.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.node}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.kube.CoreV1().Nodes().Delete(ctx, e.node, metav1.DeleteOptions{}) })
	// Attachments take a while, as in EC2, so the trunk's wait is real.
	cfg := ec2sim.Config{InstanceType: "m5.large", AttachDelay: 200 * time.Millisecond}
	if ipv6 {
		cfg.VPCIPv6CIDR = "2600:1f14:abc:de00::/56"
		cfg.Subnets = []ec2sim.SubnetConfig{{CIDR: "10.0.0.0/20", IPv6CIDR: subnet6}}
	}
	e.sim = ec2simtest.Start(t, cfg)
	e.ec2 = ec2.New(ec2.Options{Region: "us-west-2", BaseEndpoint: aws.String(e.sim.EC2Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	e.ctrl, err = sgpcontroller.Start(ctx, sgpcontroller.Options{Kube: srv.Admin(), EC2Endpoint: e.sim.EC2Endpoint(),
		NodeName: e.node, InstanceID: e.sim.InstanceID(), SubnetID: e.sim.SubnetIDs()[0], BranchCooldown: cooldown, IPv6: ipv6,
		BranchLimit: limit})
	require.NoError(t, err)
	t.Cleanup(e.ctrl.Stop)
	return e
}

// enableSGP adds the feature to the node's CNINode, as ipamd does.
func (e *env) enableSGP(t *testing.T) {
	t.Helper()
	patch := []byte(`{"spec":{"features":[{"name":"SecurityGroupsForPods"}]}}`)
	_, err := e.dyn.Resource(sgpcontroller.CNINodeGVR).Patch(context.Background(), e.node, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

func (e *env) waitTrunk(t *testing.T) (string, string) {
	t.Helper()
	require.Eventually(t, func() bool { _, _, ok := e.ctrl.Trunk(); return ok }, waitFor, 20*time.Millisecond, "trunk attached")
	id, mac, _ := e.ctrl.Trunk()
	return id, mac
}

func (e *env) createPod(t *testing.T, name string, podENI bool) *corev1.Pod {
	t.Helper()
	c := corev1.Container{Name: "app", Image: "pause"}
	if podENI {
		c.Resources.Limits = corev1.ResourceList{sgpcontroller.PodENIResource: resource.MustParse("1")}
	}
	pod, err := e.kube.CoreV1().Pods("default").Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: e.node, Containers: []corev1.Container{c}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.kube.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: aws.Int64(0)})
	})
	return pod
}

// waitAnnotation waits for the pod's pod-eni annotation and decodes it.
func (e *env) waitAnnotation(t *testing.T, name string) sgpcontroller.PodENI {
	t.Helper()
	var v string
	require.Eventually(t, func() bool {
		pod, err := e.kube.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		v = pod.Annotations[sgpcontroller.PodENIAnnotation]
		return v != ""
	}, waitFor, 20*time.Millisecond, "pod %s annotated", name)
	var list []sgpcontroller.PodENI
	require.NoError(t, json.Unmarshal([]byte(v), &list), v)
	require.Len(t, list, 1, v)
	return list[0]
}

// With the SecurityGroupsForPods feature on the node's CNINode, the
// node gets a trunk ENI attached to its instance and advertises
// vpc.amazonaws.com/pod-eni; without it, neither.
func TestTheFeatureBringsATrunkAndTheNodesPodENIResource(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cn, err := e.dyn.Resource(sgpcontroller.CNINodeGVR).Get(ctx, e.node, metav1.GetOptions{})
	require.NoError(t, err, "the stand-in creates the node's CNINode")
	require.Equal(t, "Node", cn.GetOwnerReferences()[0].Kind)
	_, _, ok := e.ctrl.Trunk()
	require.False(t, ok, "no trunk before the feature")

	e.enableSGP(t)
	trunk, mac := e.waitTrunk(t)
	out, err := e.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{trunk}})
	require.NoError(t, err)
	ni := out.NetworkInterfaces[0]
	require.Equal(t, ec2types.NetworkInterfaceTypeTrunk, ni.InterfaceType)
	require.Equal(t, mac, aws.ToString(ni.MacAddress))
	require.Equal(t, ec2types.AttachmentStatusAttached, ni.Attachment.Status)
	require.Equal(t, int32(1), aws.ToInt32(ni.Attachment.DeviceIndex), "the next free device index")
	require.Equal(t, e.sim.InstanceID(), aws.ToString(ni.Attachment.InstanceId))

	require.Eventually(t, func() bool {
		node, err := e.kube.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		capacity, allocatable := node.Status.Capacity[sgpcontroller.PodENIResource], node.Status.Allocatable[sgpcontroller.PodENIResource]
		return capacity.Value() == sgpcontroller.DefaultBranchLimit && allocatable.Value() == sgpcontroller.DefaultBranchLimit
	}, waitFor, 20*time.Millisecond, "the node advertises %s", sgpcontroller.PodENIResource)
}

// A pod asking for vpc.amazonaws.com/pod-eni gets a branch ENI associated
// with the trunk and an annotation saying so, each at its own VLAN; a pod
// that does not ask is left alone. A pod created before the trunk waits
// for it.
func TestAPodAskingForAPodENIGetsABranchAndItsAnnotation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	early := e.createPod(t, "early", true)
	e.enableSGP(t)
	trunk, _ := e.waitTrunk(t)
	plain := e.createPod(t, "plain", false)
	late := e.createPod(t, "late", true)

	seen := map[int]string{}
	for _, pod := range []*corev1.Pod{early, late} {
		got := e.waitAnnotation(t, pod.Name)
		held, ok := e.ctrl.Branch(pod.UID)
		require.True(t, ok)
		require.Equal(t, held, got)
		require.NotContains(t, seen, got.VlanID, "VLAN IDs are unique on the trunk")
		seen[got.VlanID] = pod.Name

		eni := describe(t, e, got.ENIID)
		require.Equal(t, ec2types.NetworkInterfaceTypeBranch, eni.InterfaceType)
		require.Equal(t, aws.ToString(eni.MacAddress), got.IfAddress)
		require.Equal(t, aws.ToString(eni.PrivateIpAddress), got.PrivateIP)
		require.Equal(t, "10.0.0.0/20", got.SubnetCIDR)
		require.Empty(t, got.IPv6Addr)
		require.Empty(t, got.SubnetV6CIDR)

		out, err := e.ec2.DescribeTrunkInterfaceAssociations(ctx, &ec2.DescribeTrunkInterfaceAssociationsInput{
			Filters: []ec2types.Filter{{Name: aws.String("trunk-interface-association.branch-interface-id"), Values: []string{got.ENIID}}}})
		require.NoError(t, err)
		require.Len(t, out.InterfaceAssociations, 1)
		a := out.InterfaceAssociations[0]
		require.Equal(t, trunk, aws.ToString(a.TrunkInterfaceId))
		require.Equal(t, int32(got.VlanID), aws.ToInt32(a.VlanId))
		require.Equal(t, got.AssociationID, aws.ToString(a.AssociationId))
	}
	require.Equal(t, map[int]string{1: "early", 2: "late"}, seen)

	p, err := e.kube.CoreV1().Pods("default").Get(ctx, plain.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, p.Annotations, sgpcontroller.PodENIAnnotation)
	_, ok := e.ctrl.Branch(plain.UID)
	require.False(t, ok)
	require.Equal(t, 2, e.ctrl.Branches())
}

// A deleted pod's branch ENI is disassociated and deleted once the
// cooldown has passed, and its VLAN ID goes to the next pod.
func TestADeletedPodsBranchGoesAfterTheCooldown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.enableSGP(t)
	e.waitTrunk(t)
	pod := e.createPod(t, "gone", true)
	b := e.waitAnnotation(t, pod.Name)

	deleted := time.Now()
	require.NoError(t, e.kube.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: aws.Int64(0)}))
	require.Eventually(t, func() bool {
		_, err := e.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{b.ENIID}})
		return err != nil
	}, waitFor, 20*time.Millisecond, "branch %s deleted", b.ENIID)
	require.GreaterOrEqual(t, time.Since(deleted), cooldown, "not before the cooldown")
	require.Empty(t, e.sim.TrunkAssociations())
	_, held := e.ctrl.Branch(pod.UID)
	require.False(t, held)

	next := e.createPod(t, "next", true)
	require.Equal(t, b.VlanID, e.waitAnnotation(t, next.Name).VlanID, "the freed VLAN ID is used again")
}

func describe(t *testing.T, e *env, id string) ec2types.NetworkInterface {
	t.Helper()
	out, err := e.ec2.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	require.NoError(t, err)
	return out.NetworkInterfaces[0]
}

// On an IPv6 node the branch also carries an IPv6 address of its subnet,
// in ipv6Addr with the subnet's block in subnetV6Cidr.
func TestABranchOnAnIPv6NodeCarriesItsIPv6Address(t *testing.T) {
	e := newEnvWith(t, true, 0)
	e.enableSGP(t)
	e.waitTrunk(t)
	pod := e.createPod(t, "v6", true)
	got := e.waitAnnotation(t, pod.Name)
	eni := describe(t, e, got.ENIID)
	require.Len(t, eni.Ipv6Addresses, 1)
	require.Equal(t, aws.ToString(eni.Ipv6Addresses[0].Ipv6Address), got.IPv6Addr)
	require.Equal(t, subnet6, got.SubnetV6CIDR)
	require.True(t, netip.MustParsePrefix(subnet6).Contains(netip.MustParseAddr(got.IPv6Addr)))
	require.Equal(t, "10.0.0.0/20", got.SubnetCIDR)
}

// A node never holds more branches than it advertises: a pod beyond the
// limit gets its branch only once a deleted pod's branch has gone.
func TestAPodBeyondTheBranchLimitWaitsForAFreedBranch(t *testing.T) {
	e := newEnvWith(t, false, 1)
	ctx := context.Background()
	e.enableSGP(t)
	e.waitTrunk(t)
	first := e.createPod(t, "first", true)
	b := e.waitAnnotation(t, first.Name)
	second := e.createPod(t, "second", true)
	require.NoError(t, e.kube.CoreV1().Pods("default").Delete(ctx, first.Name, metav1.DeleteOptions{GracePeriodSeconds: aws.Int64(0)}))
	got := e.waitAnnotation(t, second.Name)
	_, err := e.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{b.ENIID}})
	require.Error(t, err, "the first branch was gone before the second pod got one")
	require.NotEqual(t, b.ENIID, got.ENIID)
	require.Equal(t, 1, e.ctrl.Branches())
}

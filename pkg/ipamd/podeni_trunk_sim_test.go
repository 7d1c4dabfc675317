package ipamd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/introspect"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

const trunkNode = "ip-10-0-0-10.sgp"

// trunkMarking is EC2 as ipamd sees it with the trunk ENIs marked by their
// InterfaceType (the simulator's ENIs are all "interface" here).
type trunkMarking struct {
	awsAPI
	mu     sync.Mutex
	trunks map[string]bool
}

func (m *trunkMarking) mark(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.trunks[id] = true
}

func (m *trunkMarking) marked(enis []awsutils.ENI) []awsutils.ENI {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range enis {
		if m.trunks[enis[i].ID] {
			enis[i].InterfaceType = awsutils.InterfaceTypeTrunk
		}
	}
	return enis
}

func (m *trunkMarking) InstanceENIs(ctx context.Context) ([]awsutils.ENI, error) {
	enis, err := m.awsAPI.InstanceENIs(ctx)
	return m.marked(enis), err
}

func (m *trunkMarking) DescribeENIs(ctx context.Context, ids []string) ([]awsutils.ENI, error) {
	enis, err := m.awsAPI.DescribeENIs(ctx, ids)
	return m.marked(enis), err
}

// sgpKube is the API server as pod ENI sees it: the node and, when made,
// its CNINode.
type sgpKube struct {
	kube *kubefake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
}

func newSGPKube(withCNINode bool) *sgpKube {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: trunkNode}}
	var objs []runtime.Object
	if withCNINode {
		objs = append(objs, cniNode())
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{k8sapi.CNINodeGVR: "CNINodeList"}, objs...)
	return &sgpKube{kube: kubefake.NewSimpleClientset(node), dyn: dyn}
}

func cniNode() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vpcresources.k8s.aws/v1alpha1", "kind": "CNINode",
		"metadata": map[string]any{"name": trunkNode, "resourceVersion": "1"}, "spec": map[string]any{},
	}}
}

// features are the node's CNINode features (nil: no CNINode).
func (k *sgpKube) features(t *testing.T) []any {
	t.Helper()
	obj, err := k.dyn.Resource(k8sapi.CNINodeGVR).Get(context.Background(), trunkNode, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	fs, _, err := unstructured.NestedSlice(obj.Object, "spec", "features")
	require.NoError(t, err)
	return fs
}

var sgpFeature = []any{map[string]any{"name": "SecurityGroupsForPods"}}

// startTrunkNode starts a pod-ENI node on the simulator, with the trunks
// marked by marking and the trunk's link found at ifindex 42.
func startTrunkNode(t *testing.T, k *sgpKube, env map[string]string, mutate ...func(*Options)) (*simNode, *trunkMarking) {
	t.Helper()
	full := map[string]string{"ENABLE_POD_ENI": "true", "MY_NODE_NAME": trunkNode}
	for key, v := range env {
		full[key] = v
	}
	var marking *trunkMarking
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, full, func(o *Options) {
		marking = &trunkMarking{awsAPI: o.AWS, trunks: map[string]bool{}}
		o.AWS, o.K8s, o.K8sDynamic = marking, k.kube, k.dyn
		for _, m := range mutate {
			m(o)
		}
	})
	n.agent.trunk.linkIndex = func(mac string) (int, error) {
		for _, e := range n.sim.ENIs() {
			if e.MAC == mac && marking.trunks[e.ID] {
				return 42, nil
			}
		}
		return 0, errors.New("no such link")
	}
	return n, marking
}

// attachTrunk is the VPC resource controller attaching a trunk ENI.
func attachTrunk(t *testing.T, n *simNode, m *trunkMarking) string {
	t.Helper()
	id, err := n.sim.CreateAttachedENI(map[string]string{awsutils.TagOwner: "eks-vpc-resource-controller"}, 0)
	require.NoError(t, err)
	m.mark(id)
	return id
}

func (n *simNode) storeENI(id string) (datastore.ENISummary, bool) {
	for _, s := range n.agent.store.ENISummaries() {
		if s.Info.ID == id {
			return s, true
		}
	}
	return datastore.ENISummary{}, false
}

// With pod ENI on (IPv4) ipamd asks for a trunk at start, keeps one ENI
// slot free for it while it is awaited (m5.large: 3 ENIs, so the pool
// stops at 2 however short), and, once the controller attaches it, takes
// it into the datastore as the trunk: no address from it, no tag put on
// it, its link the one trunkLinkIndex names, and no new ENI in its slot.
func TestPodENIHoldsASlotForTheTrunkAndTakesItInAsTheTrunk(t *testing.T) {
	k := newSGPKube(true)
	n, marking := startTrunkNode(t, k, map[string]string{"WARM_IP_TARGET": "25"})
	ctx := context.Background()
	assert.Equal(t, sgpFeature, k.features(t), "asked for at start")

	n.settle(t, 10)
	assert.Len(t, n.agent.store.ENISummaries(), 2, "one of the 3 ENI slots is held for the trunk")
	enis, _, _ := n.ec2Totals()
	assert.Equal(t, 2, enis)
	_, err := n.agent.trunkLinkIndex()
	assert.ErrorIs(t, err, errNoTrunk)
	assert.EqualError(t, err, "no trunk ENI attached")

	trunk := attachTrunk(t, n, marking)
	n.agent.pool.SyncENIs(ctx)
	s, ok := n.storeENI(trunk)
	require.True(t, ok, "the trunk joined the datastore")
	assert.True(t, s.Info.Trunk)
	assert.Empty(t, s.SecondaryIPs)
	assert.Empty(t, s.Prefixes)
	idx, err := n.agent.trunkLinkIndex()
	require.NoError(t, err)
	assert.Equal(t, 42, idx)
	rec := httptest.NewRecorder()
	n.agent.introspection().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, introspect.PathENIs, nil))
	assert.Contains(t, rec.Body.String(), `"IsTrunk":true`, "/v1/enis shows the trunk")

	n.settle(t, 10)
	enis, _, _ = n.ec2Totals()
	assert.Equal(t, 3, enis, "the trunk took its slot; no other ENI")
	for _, e := range n.sim.ENIs() {
		if e.ID == trunk {
			assert.NotContains(t, e.Tags, awsutils.TagInstanceID, "ipamd never tags the trunk")
			assert.Empty(t, e.SecondaryIPs, "ipamd never grows onto the trunk")
		}
	}
	assert.Zero(t, testutil.ToFloat64(n.agent.metrics.podENIErrors.WithLabelValues(fnTryEnableSGP)))
}

// An idle trunk is never freed: with the default warm target the pool
// frees idle ENIs it does not need, but not the trunk.
func TestTheTrunkIsNeverFreed(t *testing.T) {
	k := newSGPKube(true)
	// Every sync reads EC2, so the guard on what a sync added ends with
	// the next one.
	n, marking := startTrunkNode(t, k, nil, func(o *Options) { o.Timings.EC2VerifyInterval = time.Nanosecond })
	ctx := context.Background()
	n.settle(t, 10)
	trunk := attachTrunk(t, n, marking)
	n.agent.pool.SyncENIs(ctx)
	n.agent.pool.SyncENIs(ctx)
	n.outliveMinENILifetime()
	for range 5 {
		n.agent.pool.Step(ctx)
	}
	_, ok := n.storeENI(trunk)
	assert.True(t, ok, "the trunk stays in the datastore")
	for _, e := range n.sim.ENIs() {
		if e.ID == trunk {
			assert.True(t, e.Attached, "the trunk stays attached")
		}
	}
}

// Asking fails while the CNINode is missing (counted, ipamd starts
// anyway) and is asked again at the next pool step once it exists.
func TestAFailedAskForTheTrunkIsCountedAndRetriedAtTheNextStep(t *testing.T) {
	k := newSGPKube(false)
	n, _ := startTrunkNode(t, k, nil)
	failures := func() float64 {
		return testutil.ToFloat64(n.agent.metrics.podENIErrors.WithLabelValues(fnTryEnableSGP))
	}
	assert.GreaterOrEqual(t, failures(), 1.0, "the missing CNINode is counted")
	before := failures()

	_, err := k.dyn.Resource(k8sapi.CNINodeGVR).Create(context.Background(), cniNode(), metav1.CreateOptions{})
	require.NoError(t, err)
	n.agent.pool.Step(context.Background())
	assert.Equal(t, sgpFeature, k.features(t))
	assert.Equal(t, before, failures())
}

// Without a free ENI slot (every one taken before pod ENI was turned on)
// ipamd does not ask for a trunk.
func TestNoTrunkIsAskedForWithoutAFreeENISlot(t *testing.T) {
	k := newSGPKube(true)
	sim := ec2sim.Config{InstanceType: "m5.large"}
	// Fill the node's ENIs first, without pod ENI.
	n := startSimNode(t, sim, map[string]string{"WARM_IP_TARGET": "25"})
	n.settle(t, 10)
	enis, _, _ := n.ec2Totals()
	require.Equal(t, 3, enis)
	require.NoError(t, n.agent.store.Close())

	var marking *trunkMarking
	again := nodeOnSim(t, n.sim, map[string]string{"ENABLE_POD_ENI": "true", "MY_NODE_NAME": trunkNode, "WARM_IP_TARGET": "25",
		"AWS_VPC_K8S_CNI_BACKING_STORE": n.agent.opts.Config.CheckpointPath}, func(o *Options) {
		marking = &trunkMarking{awsAPI: o.AWS, trunks: map[string]bool{}}
		o.AWS, o.K8s, o.K8sDynamic = marking, k.kube, k.dyn
	})
	again.settle(t, 3)
	assert.Nil(t, k.features(t), "no slot: not asked")
	assert.Zero(t, testutil.ToFloat64(again.agent.metrics.podENIErrors.WithLabelValues(fnTryEnableSGP)))
}

// In IPv6 mode there is no pool manager: the trunk is asked for at start
// (whatever the ENI counts), and a job looks for it each pool interval
// until it is attached, then takes it into the datastore and stops.
func TestIPv6PodENIWaitsForTheTrunkThenTakesItIn(t *testing.T) {
	k := newSGPKube(true)
	full := withEnv(ipv6Env, map[string]string{"ENABLE_POD_ENI": "true", "MY_NODE_NAME": trunkNode})
	var marking *trunkMarking
	n := startSimNode(t, ec2simtest.IPv6Node(ec2sim.Config{InstanceType: "m5.large", Seed: 42}), full, func(o *Options) {
		marking = &trunkMarking{awsAPI: o.AWS, trunks: map[string]bool{}}
		o.AWS, o.K8s, o.K8sDynamic = marking, k.kube, k.dyn
	})
	assert.Equal(t, sgpFeature, k.features(t), "asked for at start")
	ctx := context.Background()
	w := ipv6TrunkWatch{n.agent}
	assert.False(t, w.pass(ctx), "no trunk yet")

	trunk := attachTrunk(t, n, marking)
	assert.True(t, w.pass(ctx), "the trunk is taken in")
	s, ok := n.storeENI(trunk)
	require.True(t, ok)
	assert.True(t, s.Info.Trunk)
	assert.Empty(t, s.IPv6Prefixes, "no pod address from the trunk")
	assert.True(t, w.pass(ctx), "done: nothing more to look for")
}

// In IPv6 mode too, an ask that fails at start (no CNINode yet: the
// controller creates it, racing ipamd) is made again by the job that looks
// for the trunk, once the CNINode exists.
func TestIPv6AsksForTheTrunkAgainOnceTheCNINodeExists(t *testing.T) {
	k := newSGPKube(false)
	full := withEnv(ipv6Env, map[string]string{"ENABLE_POD_ENI": "true", "MY_NODE_NAME": trunkNode})
	n := startSimNode(t, ec2simtest.IPv6Node(ec2sim.Config{InstanceType: "m5.large", Seed: 42}), full, func(o *Options) {
		o.K8s, o.K8sDynamic = k.kube, k.dyn
	})
	failures := func() float64 {
		return testutil.ToFloat64(n.agent.metrics.podENIErrors.WithLabelValues(fnTryEnableSGP))
	}
	require.GreaterOrEqual(t, failures(), 1.0, "the missing CNINode is counted at start")
	ctx := context.Background()
	w := ipv6TrunkWatch{n.agent}
	assert.False(t, w.pass(ctx), "no trunk yet")
	assert.Nil(t, k.features(t), "still no CNINode")
	before := failures()

	_, err := k.dyn.Resource(k8sapi.CNINodeGVR).Create(ctx, cniNode(), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.False(t, w.pass(ctx), "no trunk yet")
	assert.Equal(t, sgpFeature, k.features(t), "asked again once the CNINode exists")
	assert.Equal(t, before, failures())
}

// On an instance type that can never have a trunk (t3.medium), pod ENI
// holds no ENI slot and asks for nothing: every slot serves pods, as
// max-pods assumes. In IPv6 no job waits for a trunk.
func TestPodENIOnATypeThatCannotHaveATrunkHoldsNoSlotAndAsksNothing(t *testing.T) {
	k := newSGPKube(true)
	n := startSimNode(t, ec2sim.Config{InstanceType: "t3.medium"},
		map[string]string{"ENABLE_POD_ENI": "true", "MY_NODE_NAME": trunkNode, "WARM_IP_TARGET": "15"}, func(o *Options) {
			o.K8s, o.K8sDynamic = k.kube, k.dyn
		})
	n.settle(t, 10)
	enis, _, _ := n.ec2Totals()
	assert.Equal(t, 3, enis, "all 3 ENI slots serve pods")
	assert.Nil(t, k.features(t), "no trunk asked for")
	assert.Zero(t, testutil.ToFloat64(n.agent.metrics.podENIErrors.WithLabelValues(fnTryEnableSGP)))

	k6 := newSGPKube(true)
	full := withEnv(ipv6Env, map[string]string{"ENABLE_POD_ENI": "true", "MY_NODE_NAME": trunkNode})
	n6 := startSimNode(t, ec2simtest.IPv6Node(ec2sim.Config{InstanceType: "t3.medium", Seed: 42}), full, func(o *Options) {
		o.K8s, o.K8sDynamic = k6.kube, k6.dyn
	})
	assert.Nil(t, k6.features(t), "IPv6: no trunk asked for")
	for _, j := range n6.agent.jobs() {
		assert.NotEqual(t, "ipamd.ipv6TrunkWatch", fmt.Sprintf("%T", j), "no job waits for a trunk that cannot come")
	}
}

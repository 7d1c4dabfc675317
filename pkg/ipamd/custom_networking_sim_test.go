package ipamd

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/eniconfig"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/introspect"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

const (
	cnNode      = "ip-10-0-0-10.us-west-2.compute.internal"
	cnZoneLabel = "topology.kubernetes.io/zone"
	cnPodSubnet = "subnet-0cnpods"
	cnPodSG     = "sg-0cnpods0000001"
	cnHostSG    = "sg-0sim00000001"
)

// cnSim is a VPC whose pods live in their own subnet of a secondary CIDR
// block, with a subnet of another availability zone and a security group
// for pods.
func cnSim() ec2sim.Config {
	return ec2sim.Config{InstanceType: "m5.large", Seed: 42, SecurityGroupIDs: []string{cnHostSG, cnPodSG},
		SecondaryVPCCIDRs: []string{"100.64.0.0/16"},
		Subnets: []ec2sim.SubnetConfig{
			{ID: "subnet-0primary", CIDR: "10.0.0.0/24"},
			{ID: cnPodSubnet, CIDR: "100.64.0.0/20"},
			{ID: "subnet-0otheraz", CIDR: "100.64.32.0/20", AZ: "us-west-2b"},
		}}
}

// cnKube is the API server as custom networking sees it: the node, with
// labels and annotations, and ENIConfig objects.
type cnKube struct {
	kube *kubefake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
}

func newCNKube(labels, annotations map[string]string, configs ...*unstructured.Unstructured) *cnKube {
	// No pod capacity: max pods comes from the max-pods table.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cnNode, Labels: labels, Annotations: annotations}}
	objs := make([]runtime.Object, 0, len(configs))
	for _, c := range configs {
		objs = append(objs, c)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{eniconfig.GVR: "ENIConfigList"}, objs...)
	return &cnKube{kube: kubefake.NewSimpleClientset(node), dyn: dyn}
}

func eniConfigObject(name, subnet string, sgs ...string) *unstructured.Unstructured {
	spec := map[string]any{"subnet": subnet}
	if len(sgs) > 0 {
		list := make([]any, len(sgs))
		for i, s := range sgs {
			list[i] = s
		}
		spec["securityGroups"] = list
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.k8s.amazonaws.com/v1alpha1", "kind": "ENIConfig",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

// put creates or replaces an ENIConfig, as kubectl apply would.
func (k *cnKube) put(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	res := k.dyn.Resource(eniconfig.GVR)
	if _, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
		_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
		require.NoError(t, err)
		return
	}
	_, err := res.Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)
}

// relabel sets a node label, as kubectl label would.
func (k *cnKube) relabel(t *testing.T, key, value string) {
	t.Helper()
	ctx := context.Background()
	node, err := k.kube.CoreV1().Nodes().Get(ctx, cnNode, metav1.GetOptions{})
	require.NoError(t, err)
	node.Labels[key] = value
	_, err = k.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// eniConfigsPath asks the agent's introspection handler for
// /v1/eni-configs: the JSON string it answers and the status code.
func eniConfigsPath(t *testing.T, n *simNode) (string, int) {
	t.Helper()
	rec := httptest.NewRecorder()
	n.agent.introspection().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, introspect.PathENIConfigs, nil))
	var body string
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	return body, rec.Code
}

// startCNNode starts a custom-networking node on the simulator.
func startCNNode(t *testing.T, simCfg ec2sim.Config, k *cnKube, env map[string]string, mutate ...func(*Options)) *simNode {
	t.Helper()
	full := map[string]string{
		"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true",
		"MY_NODE_NAME":                       cnNode,
		"ENI_CONFIG_LABEL_DEF":               cnZoneLabel,
	}
	for k, v := range env {
		full[k] = v
	}
	return startSimNode(t, simCfg, full, append([]func(*Options){func(o *Options) {
		o.K8s, o.K8sDynamic = k.kube, k.dyn
	}}, mutate...)...)
}

// secondaryENIs are the attached ENIs other than the primary, in EC2.
func (n *simNode) secondaryENIs() []ec2sim.ENIState {
	var out []ec2sim.ENIState
	for _, e := range n.sim.ENIs() {
		if e.Attached && e.DeviceIndex > 0 {
			out = append(out, e)
		}
	}
	return out
}

func inSubnet(t *testing.T, cidr string, ips ...netip.Addr) {
	t.Helper()
	p := netip.MustParsePrefix(cidr)
	for _, ip := range ips {
		assert.True(t, p.Contains(ip), "%s is not in %s", ip, p)
	}
}

// A custom-networking node: its ENIs go in the ENIConfig's subnet with its
// security groups, the primary ENI gives pods nothing and shows excluded,
// and capacity and max pods leave the primary ENI out.
func TestCustomNetworkingENIsFromENIConfig(t *testing.T) {
	k := newCNKube(map[string]string{cnZoneLabel: "us-west-2a"}, nil,
		eniConfigObject("us-west-2a", cnPodSubnet, cnPodSG), eniConfigObject("default", "subnet-0otheraz"))
	n := startCNNode(t, cnSim(), k, map[string]string{"WARM_IP_TARGET": "3"})

	cfg := n.agent.pool.Config()
	assert.Equal(t, 2*9, cfg.Targets.MaxAddresses, "m5.large: 3 ENIs of 10 addresses, the primary gives pods none")
	assert.Equal(t, 20, cfg.Targets.MaxPods, "the max-pods table's 29 less the primary ENI's 9 secondary addresses")

	n.settle(t, 40)
	pods := n.assign(t, 12, "pod")
	for _, a := range pods {
		inSubnet(t, "100.64.0.0/20", a.IP)
	}
	enis := n.secondaryENIs()
	require.Len(t, enis, 2, "12 pods and 3 warm need both secondary ENIs")
	for _, e := range enis {
		assert.Equal(t, cnPodSubnet, e.SubnetID)
		assert.Equal(t, []string{cnPodSG}, e.SecurityGroupIDs, "the ENIConfig's groups, not the primary ENI's")
		inSubnet(t, "100.64.0.0/20", e.PrimaryIP)
	}
	prim := mustENI(t, n.sim, n.aws.InstanceIdentity().PrimaryENIID)
	assert.Empty(t, prim.SecondaryIPs, "the primary ENI gets no addresses for pods")
	infos := n.agent.store.ENIInfos()
	assert.True(t, infos.ENIs[prim.ID].IsExcludedForPodIPs, "/v1/enis shows the primary ENI excluded")

	name, code := eniConfigsPath(t, n)
	assert.Equal(t, 200, code)
	assert.Equal(t, "us-west-2a", name, "/v1/eni-configs names the ENIConfig the zone label selects")
	n.storeHasOnlyEC2Addresses(t)
}

// An ENIConfig with no security groups: the ENI gets the primary ENI's.
func TestCustomNetworkingDefaultsToPrimarySecurityGroups(t *testing.T) {
	k := newCNKube(nil, nil, eniConfigObject("default", cnPodSubnet))
	n := startCNNode(t, cnSim(), k, nil)
	n.settle(t, 40)
	enis := n.secondaryENIs()
	require.NotEmpty(t, enis)
	prim := mustENI(t, n.sim, n.aws.InstanceIdentity().PrimaryENIID)
	for _, e := range enis {
		assert.Equal(t, cnPodSubnet, e.SubnetID, "no label or annotation: the ENIConfig named default")
		assert.Equal(t, prim.SecurityGroupIDs, e.SecurityGroupIDs)
	}
}

// A missing ENIConfig, then one whose subnet is in another availability
// zone, then one naming an unknown subnet: no ENI is made (none left behind
// in EC2 either), each failure is counted, and ipamd goes on. Once the
// ENIConfig is right the pool grows from it.
func TestCustomNetworkingUnusableENIConfigRecovers(t *testing.T) {
	k := newCNKube(map[string]string{cnZoneLabel: "us-west-2a"}, nil)
	n := startCNNode(t, cnSim(), k, nil)
	failures := func() float64 { return testutil.ToFloat64(n.agent.metrics.errors.WithLabelValues("eniConfigUnusable")) }

	for _, bad := range []*unstructured.Unstructured{nil,
		eniConfigObject("us-west-2a", "subnet-0otheraz"),
		eniConfigObject("us-west-2a", "subnet-0doesnotexist1")} {
		if bad != nil {
			k.put(t, bad)
		}
		before := failures()
		n.settle(t, 5)
		assert.Greater(t, failures(), before, "each failed attempt is counted")
		assert.Len(t, n.sim.ENIs(), 1, "no ENI created, none left behind")
	}
	_, err := n.agent.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "early", IfName: "eth0"}, datastore.IPAMMetadata{})
	require.ErrorIs(t, err, datastore.ErrNoAvailableIP, "the primary ENI's addresses are never handed out meanwhile")

	k.put(t, eniConfigObject("us-west-2a", cnPodSubnet, cnPodSG))
	n.settle(t, 40)
	require.Len(t, n.secondaryENIs(), 1, "the fixed ENIConfig is used at the next pool step")
	a := n.assign(t, 1, "pod")
	inSubnet(t, "100.64.0.0/20", a[0].IP)
}

// A label change while pods run: the next ENI uses the newly selected
// ENIConfig; the ENIs already attached stay, with their pods.
func TestCustomNetworkingLabelChangeAppliesToNewENIs(t *testing.T) {
	simCfg := cnSim()
	simCfg.Subnets = append(simCfg.Subnets, ec2sim.SubnetConfig{ID: "subnet-0cnpods2", CIDR: "100.64.64.0/20"})
	k := newCNKube(map[string]string{cnZoneLabel: "us-west-2a"}, nil,
		eniConfigObject("us-west-2a", cnPodSubnet), eniConfigObject("pods-two", "subnet-0cnpods2"))
	n := startCNNode(t, simCfg, k, map[string]string{"WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "1"})
	n.settle(t, 40)
	first := n.assign(t, 9, "a")
	require.Len(t, n.secondaryENIs(), 1)

	k.relabel(t, cnZoneLabel, "pods-two")
	second := n.assign(t, 3, "b")
	enis := n.secondaryENIs()
	require.Len(t, enis, 2)
	assert.Equal(t, cnPodSubnet, enis[0].SubnetID, "the ENI already attached stays")
	assert.Equal(t, "subnet-0cnpods2", enis[1].SubnetID, "the new ENI follows the new label")
	inSubnet(t, "100.64.0.0/20", first[0].IP)
	inSubnet(t, "100.64.64.0/20", second[len(second)-1].IP)
}

// Prefix delegation on top of custom networking: /28 prefixes from the
// ENIConfig's subnet, none on the primary ENI.
func TestCustomNetworkingWithPrefixDelegation(t *testing.T) {
	k := newCNKube(nil, nil, eniConfigObject("default", cnPodSubnet, cnPodSG))
	n := startCNNode(t, cnSim(), k, map[string]string{"ENABLE_PREFIX_DELEGATION": "true"})
	n.settle(t, 40)
	pods := n.assign(t, 20, "pod")
	for _, a := range pods {
		inSubnet(t, "100.64.0.0/20", a.IP)
	}
	for _, e := range n.secondaryENIs() {
		assert.NotEmpty(t, e.Prefixes)
		for _, p := range e.Prefixes {
			inSubnet(t, "100.64.0.0/20", p.Addr())
		}
	}
	assert.Empty(t, mustENI(t, n.sim, n.aws.InstanceIdentity().PrimaryENIID).Prefixes)
	assert.Equal(t, 2*9*16, n.agent.pool.Config().Targets.MaxAddresses)
}

// Turning custom networking on over a node whose pods hold primary-ENI
// addresses: they keep them across the restart, the primary ENI's idle
// addresses go back to EC2, and new pods come from the ENIConfig's subnet.
func TestCustomNetworkingTurnedOnKeepsPodsOnPrimaryENI(t *testing.T) {
	simCfg := cnSim()
	plain := startSimNode(t, simCfg, map[string]string{"WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "5"})
	plain.settle(t, 40)
	held := plain.assign(t, 2, "old")
	primary := plain.aws.InstanceIdentity().PrimaryENIID
	for _, a := range held {
		require.Equal(t, primary, a.ENIID)
	}
	require.NoError(t, plain.agent.store.Close())

	k := newCNKube(nil, nil, eniConfigObject("default", cnPodSubnet, cnPodSG))
	n := nodeOnSim(t, plain.sim, map[string]string{
		"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true", "MY_NODE_NAME": cnNode,
		"WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "5",
		"AWS_VPC_K8S_CNI_BACKING_STORE": plain.agent.opts.Config.CheckpointPath,
	}, func(o *Options) { o.K8s, o.K8sDynamic = k.kube, k.dyn })
	n.settle(t, 40)
	for _, a := range held {
		got, ok := n.agent.store.Find(a.Key)
		require.True(t, ok, "the pod on the primary ENI keeps its address")
		assert.Equal(t, a.IP, got.IP)
	}
	prim := mustENI(t, n.sim, primary)
	assert.Len(t, prim.SecondaryIPs, 2, "only the addresses pods hold stay on the primary ENI")
	a := n.assign(t, 1, "new")
	inSubnet(t, "100.64.0.0/20", a[0].IP)
}

// Custom networking cannot run without the API server or without knowing
// its node: ipamd refuses to start, naming the setting.
func TestCustomNetworkingNeedsTheAPIServerAndTheNode(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.CustomNetworking = true
	_, err := NewAgent(context.Background(), Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"), DelQueueDir: filepath.Join(dir, "q"),
		DevPool: &devpool.Pool{ENIs: 1, PerENI: 1}})
	require.Error(t, err, "a development pool has no API client")
	assert.Contains(t, err.Error(), "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG")

	k := newCNKube(nil, nil, eniConfigObject("default", cnPodSubnet))
	sim := ec2simtest.Start(t, cnSim())
	ec2simtest.PointSDKAtSim(t, sim)
	client, err := awsutils.New(context.Background(), awsutils.Options{})
	require.NoError(t, err)
	cfg = testConfig(dir)
	cfg.CustomNetworking = true // and MY_NODE_NAME unset
	_, err = NewAgent(context.Background(), Options{Config: cfg, AWS: client, K8s: k.kube, K8sDynamic: k.dyn,
		SocketPath: filepath.Join(dir, "s.sock"), DelQueueDir: filepath.Join(dir, "q")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MY_NODE_NAME")
}

// The ENIConfig failure reaches the node as a Warning event, and
// /v1/eni-configs answers 404 when the node cannot be read.
func TestCustomNetworkingFailureIsANodeEvent(t *testing.T) {
	k := newCNKube(map[string]string{cnZoneLabel: "us-west-2z"}, nil)
	n := startCNNode(t, cnSim(), k, nil)
	n.settle(t, 3)
	var notes []string
	require.Eventually(t, func() bool {
		notes = notes[:0]
		for _, a := range k.kube.Actions() {
			if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "events" {
				if ev, ok := c.GetObject().(*eventsv1.Event); ok && ev.Reason == "ENIConfigUnusable" {
					notes = append(notes, ev.Note)
				}
			}
		}
		return len(notes) > 0
	}, 5*time.Second, 20*time.Millisecond, "a Warning event with reason ENIConfigUnusable")
	assert.Contains(t, notes[0], "us-west-2z", "the event names the missing ENIConfig")

	require.NoError(t, k.kube.CoreV1().Nodes().Delete(context.Background(), cnNode, metav1.DeleteOptions{}))
	_, code := eniConfigsPath(t, n)
	assert.Equal(t, 404, code)
}

// The leak signal counts without the primary ENI: a custom-networking
// m5.large whose two secondary ENIs are full (18 addresses, below the 20
// max pods) is at its address capacity and asks the reconciler to run,
// though the primary ENI still has room in EC2.
func TestCustomNetworkingLeakSignalAtCapacity(t *testing.T) {
	k := newCNKube(nil, nil, eniConfigObject("default", cnPodSubnet))
	var hooks []warmpool.Decision
	n := startCNNode(t, cnSim(), k, nil, func(o *Options) {
		o.OnLeak = func(d warmpool.Decision, _ datastore.Stats) { hooks = append(hooks, d) }
	})
	n.settle(t, 40)
	n.assign(t, 18, "pod")
	d := n.agent.pool.Step(context.Background())
	assert.True(t, d.AtCapacity, "18 addresses on the two secondary ENIs are the capacity")
	assert.False(t, d.AtMaxPods, "max pods (20) is not reached")
	assert.True(t, d.LeakSuspected)
	require.NotEmpty(t, hooks, "the reconciler is asked to run")
	assert.Len(t, n.secondaryENIs(), 2, "no third ENI: the instance has no room")
}

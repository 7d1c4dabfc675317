package rpcserver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podeni"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// fakePods is the node's pods as the cache (cached) and the API server
// (fresh) have them; err, when set, is every lookup's answer.
type fakePods struct {
	mu            sync.Mutex
	cached, fresh map[string]*corev1.Pod
	err           error
	lookups       int
}

func newFakePods(pods ...*corev1.Pod) *fakePods {
	f := &fakePods{cached: map[string]*corev1.Pod{}, fresh: map[string]*corev1.Pod{}}
	for _, p := range pods {
		f.cached[p.Namespace+"/"+p.Name], f.fresh[p.Namespace+"/"+p.Name] = p, p
	}
	return f
}

func (f *fakePods) lookup(m map[string]*corev1.Pod, ns, name string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	if f.err != nil {
		return nil, f.err
	}
	if p, ok := m[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, errors.Join(errors.New("wrapped"), apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name))
}

func (f *fakePods) Get(_ context.Context, ns, name string) (*corev1.Pod, error) {
	return f.lookup(f.cached, ns, name)
}

func (f *fakePods) Fresh(_ context.Context, ns, name string) (*corev1.Pod, error) {
	return f.lookup(f.fresh, ns, name)
}

const branchAnnotation = `[{"eniId":"eni-0b1","ifAddress":"02:6f:aa:bb:cc:01","privateIp":"10.0.40.7",` +
	`"ipv6Addr":"2600:1f14:aa::7","vlanID":3,"subnetCidr":"10.0.32.0/19","subnetV6Cidr":"2600:1f14:aa::/64"}]`

// k8sPod is the pod of addRequest(id); branch adds the pod-eni limit,
// annotation (when not "") the controller's annotation.
func k8sPod(id string, branch bool, annotation string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p-" + id, UID: types.UID("uid-" + id)}}
	c := corev1.Container{Name: "app"}
	if branch {
		c.Resources.Limits = corev1.ResourceList{podeni.ResourcePrefix: resource.MustParse("1")}
	}
	p.Spec.Containers = []corev1.Container{c}
	if annotation != "" {
		p.Annotations = map[string]string{podeni.Annotation: annotation}
	}
	return p
}

func trunkAt(i int) func() (int, error) { return func() (int, error) { return i, nil } }

// A branch pod's ADD is answered from its annotation and the trunk's
// link, with the settings every ADD reply carries, and the datastore
// never sees it.
func TestABranchPodsAddReplyCarriesItsAnnotationAndNeverTouchesTheDatastore(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  Settings
		want *rpc.AddNetworkReply
	}{
		{"IPv4", Settings{ExternalSNAT: false, VPCCIDRs: func() []string { return []string{"10.0.0.0/16"} }, ExcludeSNATCIDRs: []string{"192.168.0.0/16"}, NetworkPolicyMode: "standard"},
			&rpc.AddNetworkReply{Success: true, PodVlanId: 3, PodENIMAC: "02:6f:aa:bb:cc:01", PodENISubnetGW: "10.0.32.1", ParentIfIndex: 7,
				IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.0.40.7", DeviceNumber: -1, RouteTableId: 0}},
				VPCv4CIDRs:           []string{"10.0.0.0/16", "192.168.0.0/16"}, NetworkPolicyMode: "standard"}},
		{"IPv4, external SNAT", Settings{ExternalSNAT: true, VPCCIDRs: func() []string { return []string{"10.0.0.0/16"} }, ExcludeSNATCIDRs: []string{"192.168.0.0/16"}},
			&rpc.AddNetworkReply{Success: true, PodVlanId: 3, PodENIMAC: "02:6f:aa:bb:cc:01", PodENISubnetGW: "10.0.32.1", ParentIfIndex: 7,
				IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.0.40.7", DeviceNumber: -1, RouteTableId: 0}},
				VPCv4CIDRs:           []string{"10.0.0.0/16"}, UseExternalSNAT: true}},
		{"IPv6", Settings{IPv6: true, VPCv6CIDRs: func() []string { return []string{"2600:1f14:aa::/56"} }},
			&rpc.AddNetworkReply{Success: true, PodVlanId: 3, PodENIMAC: "02:6f:aa:bb:cc:01", PodENISubnetGW: "fe80:ec2::1", ParentIfIndex: 7,
				IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv6Addr: "2600:1f14:aa::7", DeviceNumber: -1, RouteTableId: 0}},
				VPCv6CIDRs:           []string{"2600:1f14:aa::/56"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			annotated := &podIPs{ips: map[string]string{}}
			s := serve(t, Options{Deps: Deps{PodSource: newFakePods(k8sPod("b", true, branchAnnotation)), TrunkLink: trunkAt(7), Pods: annotated},
				Settings: tc.set}, 2)
			got, err := s.cni.AddNetwork(context.Background(), addRequest("b"))
			require.NoError(t, err)
			assert.Equal(t, tc.want.String(), got.String())
			assert.Zero(t, s.store.Stats().AssignedIPs, "the datastore never sees a branch pod")
			ip, _ := annotated.get("default/p-b")
			assert.Equal(t, address(tc.want.IPAllocationMetadata[0]), ip, "ANNOTATE_POD_IP as for any pod")
		})
	}
}

// With ENABLE_POD_ENI every pod is looked up; a regular one (no pod-eni
// limit, even if annotated) gets a pool address as before.
func TestARegularPodIsLookedUpAndServedFromThePool(t *testing.T) {
	pods := newFakePods(k8sPod("r", false, ""), k8sPod("a", false, branchAnnotation))
	s := serve(t, Options{Deps: Deps{PodSource: pods, TrunkLink: trunkAt(7)}}, 2)
	for _, id := range []string{"r", "a"} {
		got, err := s.cni.AddNetwork(context.Background(), addRequest(id))
		require.NoError(t, err)
		require.True(t, got.Success)
		assert.Zero(t, got.PodVlanId)
		assert.Empty(t, got.PodENIMAC)
		assert.Equal(t, int32(0), got.IPAllocationMetadata[0].DeviceNumber)
	}
	assert.Equal(t, 2, pods.lookups)
	assert.Equal(t, 2, s.store.Stats().AssignedIPs)
}

// Without ENABLE_POD_ENI no pod is looked up, and a pod-eni limit means
// nothing.
func TestWithoutPodENIABranchPodIsARegularPod(t *testing.T) {
	s := serve(t, Options{}, 1)
	got, err := s.cni.AddNetwork(context.Background(), addRequest("b"))
	require.NoError(t, err)
	require.True(t, got.Success)
	assert.Zero(t, got.PodVlanId)
	assert.Equal(t, 1, s.store.Stats().AssignedIPs)
}

// An ADD the security-groups-for-pods step refuses is Success=false with
// a named cause: the trailer, the counter and the pod's warning; nothing
// is assigned.
func TestARefusedBranchPodAddNamesItsCause(t *testing.T) {
	noTrunk := func() (int, error) { return 0, errors.New("no trunk ENI attached to the node") }
	for _, tc := range []struct {
		name   string
		pods   *fakePods
		trunk  func() (int, error)
		reason string
		line   string
	}{
		{"pod lookup fails", &fakePods{err: apierrors.NewServiceUnavailable("apiserver down")}, trunkAt(7), string(PodLookupFailed),
			"pod_lookup_failed: ipamd could not read the pod, which ENABLE_POD_ENI needs for every pod (apiserver down); the runtime retries the ADD"},
		{"no trunk yet", newFakePods(k8sPod("b", true, branchAnnotation)), noTrunk, string(TrunkENIMissing),
			"trunk_eni_missing: the pod asks for a branch ENI and the node has no trunk ENI yet (no trunk ENI attached to the node); ipamd asks for one through the node's CNINode; the runtime retries the ADD"},
		{"no trunk source", newFakePods(k8sPod("b", true, branchAnnotation)), nil, string(TrunkENIMissing), "trunk_eni_missing: "},
		{"not annotated yet", newFakePods(k8sPod("b", true, "")), trunkAt(7), string(BranchENIPending),
			"branch_eni_pending: the pod's branch ENI is not attached yet (pod has no vpc.amazonaws.com/pod-eni annotation yet); the VPC resource controller annotates the pod once it is; the runtime retries the ADD"},
		{"bad annotation", newFakePods(k8sPod("b", true, `[{"vlanID":0}]`)), trunkAt(7), string(BranchENIInvalid),
			"branch_eni_annotation_invalid: the pod's branch ENI annotation cannot be used (bad vpc.amazonaws.com/pod-eni annotation: vlanID 0 is outside 1-4094); the runtime retries the ADD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warner := &podWarner{}
			s := serve(t, Options{Deps: Deps{PodSource: tc.pods, TrunkLink: tc.trunk, Warn: warner}}, 1)
			var md metadata.MD
			got, err := s.cni.AddNetwork(context.Background(), addRequest("b"), grpc.Trailer(&md))
			require.NoError(t, err, "Success=false, not a gRPC error, as upstream")
			assert.False(t, got.Success)
			assert.Empty(t, got.IPAllocationMetadata)
			assert.Zero(t, got.PodVlanId)
			require.Len(t, md.Get(AddFailureTrailer), 1)
			assert.Contains(t, md.Get(AddFailureTrailer)[0], tc.line)
			assert.Equal(t, 1.0, testutil.ToFloat64(s.metrics.addFailures.WithLabelValues(tc.reason)))
			assert.Contains(t, warner.last(), "default/p-b "+tc.reason+" "+tc.line)
			assert.Zero(t, s.store.Stats().AssignedIPs)
		})
	}
}

// A branch pod's reply comes from the pod as the API server has it now:
// the cache may be behind the controller's annotation or hold an earlier
// pod of the same name; only when the API server cannot be read does the
// cached pod answer.
func TestABranchPodsReplyComesFromThePodAsTheAPIServerHasItNow(t *testing.T) {
	older := strings.Replace(branchAnnotation, `"vlanID":3`, `"vlanID":9`, 1)
	for _, tc := range []struct {
		name          string
		cached, fresh *corev1.Pod // fresh nil: the direct read fails
		wantVLAN      int32
	}{
		{"cached before its annotation", k8sPod("b", true, ""), k8sPod("b", true, branchAnnotation), 3},
		{"cached with an earlier pod's branch", k8sPod("b", true, older), k8sPod("b", true, branchAnnotation), 3},
		{"the API server cannot be read", k8sPod("b", true, branchAnnotation), nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := newFakePods(tc.cached)
			if tc.fresh != nil {
				pods.fresh["default/p-b"] = tc.fresh
			} else {
				delete(pods.fresh, "default/p-b")
			}
			s := serve(t, Options{Deps: Deps{PodSource: pods, TrunkLink: trunkAt(7)}}, 1)
			got, err := s.cni.AddNetwork(context.Background(), addRequest("b"))
			require.NoError(t, err)
			require.True(t, got.Success)
			assert.Equal(t, tc.wantVLAN, got.PodVlanId)
		})
	}
}

// A pod the API server does not have (a static pod before its mirror pod,
// one deleted meanwhile) asks for no branch ENI: the pool serves it.
func TestAPodTheAPIServerDoesNotHaveIsServedFromThePool(t *testing.T) {
	s := serve(t, Options{Deps: Deps{PodSource: newFakePods(), TrunkLink: trunkAt(7)}}, 1)
	got, err := s.cni.AddNetwork(context.Background(), addRequest("s"))
	require.NoError(t, err)
	require.True(t, got.Success)
	assert.Zero(t, got.PodVlanId)
	assert.Equal(t, 1, s.store.Stats().AssignedIPs)
}

// The DEL of a pod the datastore does not know, with ENABLE_POD_ENI, as
// upstream: a deleted pod is done, another pod of that name is an error,
// a branch pod is answered from its annotation, any other pod is the
// usual unknown pod.
func TestADelTheDatastoreDoesNotKnowLooksThePodUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pods    *fakePods
		uid     string
		want    *rpc.DelNetworkReply
		code    codes.Code
		message string
	}{
		{"pod deleted (NotFound through wrapping)", newFakePods(), "uid-b", &rpc.DelNetworkReply{Success: true}, codes.OK, ""},
		{"branch pod", newFakePods(k8sPod("b", true, branchAnnotation)), "uid-b",
			&rpc.DelNetworkReply{Success: true, PodVlanId: 3, IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.0.40.7"}}}, codes.OK, ""},
		{"branch pod, request without UID", newFakePods(k8sPod("b", true, branchAnnotation)), "",
			&rpc.DelNetworkReply{Success: true, PodVlanId: 3, IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.0.40.7"}}}, codes.OK, ""},
		{"another pod of that name", newFakePods(k8sPod("b", true, branchAnnotation)), "uid-old", nil, codes.Unknown, "pod UID differs"},
		{"regular pod", newFakePods(k8sPod("b", false, "")), "uid-b", nil, codes.Unknown, "datastore: unknown pod"},
		{"lookup fails", &fakePods{err: apierrors.NewServiceUnavailable("apiserver down")}, "uid-b", nil, codes.Unavailable, "apiserver down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, Options{Deps: Deps{PodSource: tc.pods, TrunkLink: trunkAt(7)}, Settings: Settings{NetworkPolicyMode: "standard"}}, 1)
			req := delRequest("b")
			req.K8S_POD_UID = tc.uid
			got, err := s.cni.DelNetwork(context.Background(), req)
			assert.Equal(t, tc.code, status.Code(err), "%v", err)
			if tc.message != "" {
				assert.Contains(t, status.Convert(err).Message(), tc.message)
			}
			if tc.want != nil {
				require.NotNil(t, got)
				assert.Equal(t, tc.want.String(), got.String())
			}
		})
	}
}

// A pod the datastore knows is released without any lookup, even when the
// API server cannot be reached.
func TestADelOfAPoolPodNeedsNoLookup(t *testing.T) {
	pods := newFakePods(k8sPod("r", false, ""))
	s := serve(t, Options{Deps: Deps{PodSource: pods, TrunkLink: trunkAt(7)}}, 1)
	add, err := s.cni.AddNetwork(context.Background(), addRequest("r"))
	require.NoError(t, err)
	require.True(t, add.Success)
	pods.mu.Lock()
	pods.err, pods.lookups = errors.New("apiserver down"), 0
	pods.mu.Unlock()
	got, err := s.cni.DelNetwork(context.Background(), delRequest("r"))
	require.NoError(t, err)
	assert.True(t, got.Success)
	assert.Equal(t, add.IPAllocationMetadata[0].IPv4Addr, got.IPAllocationMetadata[0].IPv4Addr)
	assert.Zero(t, pods.lookups)
}

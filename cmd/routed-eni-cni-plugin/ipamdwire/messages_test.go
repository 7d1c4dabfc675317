package ipamdwire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// The requests, decoded by the generated code, carry every field.
func TestRequestsDecodeWithTheGeneratedTypes(t *testing.T) {
	add := &AddNetworkRequest{K8S_POD_NAME: "p", K8S_POD_NAMESPACE: "ns", K8S_POD_INFRA_CONTAINER_ID: "infra",
		Netns: "/var/run/netns/x", IfName: "eth0", NetworkName: "aws-cni", ContainerID: "c1", ClientVersion: "v9",
		RequiresMultiNICAttachment: true}
	var gotAdd rpc.AddNetworkRequest
	require.NoError(t, proto.Unmarshal(add.marshal(), &gotAdd))
	assert.True(t, proto.Equal(&rpc.AddNetworkRequest{K8S_POD_NAME: "p", K8S_POD_NAMESPACE: "ns",
		K8S_POD_INFRA_CONTAINER_ID: "infra", Netns: "/var/run/netns/x", IfName: "eth0", NetworkName: "aws-cni",
		ContainerID: "c1", ClientVersion: "v9", RequiresMultiNICAttachment: true}, &gotAdd), "%v", &gotAdd)

	del := &DelNetworkRequest{K8S_POD_NAME: "p", K8S_POD_NAMESPACE: "ns", K8S_POD_INFRA_CONTAINER_ID: "infra",
		Reason: "PodDeleted", IfName: "eth0", NetworkName: "aws-cni", ContainerID: "c1", ClientVersion: "v9", K8S_POD_UID: "u"}
	var gotDel rpc.DelNetworkRequest
	require.NoError(t, proto.Unmarshal(del.marshal(), &gotDel))
	assert.True(t, proto.Equal(&rpc.DelNetworkRequest{K8S_POD_NAME: "p", K8S_POD_NAMESPACE: "ns",
		K8S_POD_INFRA_CONTAINER_ID: "infra", Reason: "PodDeleted", IfName: "eth0", NetworkName: "aws-cni",
		ContainerID: "c1", ClientVersion: "v9", K8S_POD_UID: "u"}, &gotDel), "%v", &gotDel)

	var gotPool rpc.PoolStatusRequest
	require.NoError(t, proto.Unmarshal((&PoolStatusRequest{ClientVersion: "v9"}).marshal(), &gotPool))
	assert.Equal(t, "v9", gotPool.ClientVersion)

	gc := &GarbageCollectRequest{NetworkName: "aws-cni", ClientVersion: "v9",
		ValidAttachments: []*Attachment{{ContainerID: "a", IfName: "eth0"}, {}, {ContainerID: "b"}}}
	var gotGC rpc.GarbageCollectRequest
	require.NoError(t, proto.Unmarshal(gc.marshal(), &gotGC))
	assert.True(t, proto.Equal(&rpc.GarbageCollectRequest{NetworkName: "aws-cni", ClientVersion: "v9",
		ValidAttachments: []*rpc.Attachment{{ContainerID: "a", IfName: "eth0"}, {}, {ContainerID: "b"}}}, &gotGC), "%v", &gotGC)

	// A field added to rpc.proto must be added here too: every field of
	// the generated requests is set by the hand-written encoding.
	for _, m := range []proto.Message{&gotAdd, &gotDel, &gotGC} {
		r := m.ProtoReflect()
		fields := r.Descriptor().Fields()
		for i := range fields.Len() {
			assert.True(t, r.Has(fields.Get(i)), "%s.%s is not encoded by ipamdwire", r.Descriptor().Name(), fields.Get(i).Name())
		}
	}

	var gotHealth healthpb.HealthCheckRequest
	require.NoError(t, proto.Unmarshal(healthCheckRequest("svc"), &gotHealth))
	assert.Equal(t, "svc", gotHealth.Service)

	// Empty messages are empty on the wire, as proto3 encodes them.
	assert.Empty(t, (&AddNetworkRequest{}).marshal())
	assert.Empty(t, (&DelNetworkRequest{}).marshal())
}

// Replies encoded by the generated code decode to the same values; the
// fields the plugin does not read are skipped.
func TestRepliesFromTheGeneratedTypes(t *testing.T) {
	mds := []*rpc.IPAllocationMetadata{
		{IPv4Addr: "10.0.0.5", DeviceNumber: 2, RouteTableId: 3},
		{IPv6Addr: "2001:db8::5", DeviceNumber: 0, RouteTableId: -1},
	}
	want := []*IPAllocationMetadata{
		{IPv4Addr: "10.0.0.5", DeviceNumber: 2, RouteTableId: 3},
		{IPv6Addr: "2001:db8::5", DeviceNumber: 0, RouteTableId: -1},
	}
	b, err := proto.Marshal(&rpc.AddNetworkReply{Success: true, IPAllocationMetadata: mds, UseExternalSNAT: true,
		VPCv4CIDRs: []string{"10.0.0.0/16"}, PodVlanId: 7, PodENIMAC: "aa", PodENISubnetGW: "gw", ParentIfIndex: 4,
		VPCv6CIDRs: []string{"2001:db8::/56"}, NetworkPolicyMode: "strict"})
	require.NoError(t, err)
	var add AddNetworkReply
	require.NoError(t, add.unmarshal(b))
	assert.Equal(t, AddNetworkReply{Success: true, IPAllocationMetadata: want, PodVlanId: 7, PodENIMAC: "aa", PodENISubnetGW: "gw",
		ParentIfIndex: 4, NetworkPolicyMode: "strict"}, add)

	b, err = proto.Marshal(&rpc.DelNetworkReply{Success: true, IPAllocationMetadata: mds, PodVlanId: 9, NetworkPolicyMode: "standard"})
	require.NoError(t, err)
	var del DelNetworkReply
	require.NoError(t, del.unmarshal(b))
	assert.Equal(t, DelNetworkReply{Success: true, IPAllocationMetadata: want, PodVlanId: 9, NetworkPolicyMode: "standard"}, del)

	b, err = proto.Marshal(&rpc.PoolStatusReply{TotalIPs: 30, AssignedIPs: 31, AvailableIPs: -1})
	require.NoError(t, err)
	var pool PoolStatusReply
	require.NoError(t, pool.unmarshal(b))
	assert.Equal(t, PoolStatusReply{TotalIPs: 30, AssignedIPs: 31, AvailableIPs: -1}, pool)

	b, err = proto.Marshal(&rpc.GarbageCollectReply{Released: 3, Deferred: 1})
	require.NoError(t, err)
	var gc GarbageCollectReply
	require.NoError(t, gc.unmarshal(b))
	assert.Equal(t, GarbageCollectReply{Released: 3, Deferred: 1}, gc)

	b, err = proto.Marshal(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING})
	require.NoError(t, err)
	hs, err := unmarshalHealth(b)
	require.NoError(t, err)
	assert.Equal(t, HealthNotServing, hs)
	assert.Equal(t, "NOT_SERVING", hs.String())

	// A default reply is an empty message.
	var empty AddNetworkReply
	require.NoError(t, empty.unmarshal(nil))
	assert.Equal(t, AddNetworkReply{}, empty)
}

func TestMalformedRepliesAreErrors(t *testing.T) {
	good, err := proto.Marshal(&rpc.AddNetworkReply{Success: true,
		IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.0.0.5", RouteTableId: 2}}})
	require.NoError(t, err)
	for _, b := range [][]byte{
		good[:len(good)-1],       // truncated
		{0x12, 0x05, 0x0a},       // field 2 longer than the message
		{0x12, 0x02, 0x0a, 0x09}, // nested field longer than field 2
		{0x08},                   // varint missing
		{0x00},                   // field number 0
	} {
		var r AddNetworkReply
		assert.Error(t, r.unmarshal(b), "%x", b)
	}
}

func FuzzAddNetworkReply(f *testing.F) {
	good, _ := proto.Marshal(&rpc.AddNetworkReply{Success: true, PodVlanId: 3,
		IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.0.0.5", RouteTableId: 2}}})
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		var ours AddNetworkReply
		var gen rpc.AddNetworkReply
		oerr, gerr := ours.unmarshal(b), proto.Unmarshal(b, &gen)
		if gerr != nil || oerr != nil {
			return // both strict and lax decoders may reject; no panic is the point
		}
		if ours.Success != gen.Success || ours.PodVlanId != gen.PodVlanId || ours.NetworkPolicyMode != gen.NetworkPolicyMode ||
			len(ours.IPAllocationMetadata) != len(gen.IPAllocationMetadata) {
			t.Fatalf("ours %+v, generated %v", ours, &gen)
		}
	})
}

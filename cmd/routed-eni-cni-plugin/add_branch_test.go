package main

import (
	"encoding/json"
	"net"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
)

// These need no privileges: they parse replies and build results.

// ipamd's reply for a branch-ENI pod is read as upstream's plugin reads
// it: the first allocation's address (IPv4, else IPv6), the VLAN, the
// branch ENI's MAC and subnet gateway, and the trunk's ifindex; anything
// unusable is refused before the node is touched.
func TestABranchPodsReplyIsReadLikeUpstreams(t *testing.T) {
	v4 := func() *rpc.AddNetworkReply {
		return &rpc.AddNetworkReply{Success: true, PodVlanId: 7, PodENIMAC: "0a:1b:2c:3d:4e:5f", PodENISubnetGW: "10.1.0.1", ParentIfIndex: 3,
			IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.1.0.10", DeviceNumber: -1, RouteTableId: 0}}}
	}
	got, err := parseBranchReply(v4())
	require.NoError(t, err)
	assert.Equal(t, branchAttachment{IP: net.ParseIP("10.1.0.10").To4(), VlanID: 7, ENIMAC: mustMAC(t, "0a:1b:2c:3d:4e:5f"),
		SubnetGW: net.ParseIP("10.1.0.1").To4(), TrunkIndex: 3, RawTable: 0}, got)

	v6 := &rpc.AddNetworkReply{Success: true, PodVlanId: 4094, PodENIMAC: "0a:1b:2c:3d:4e:60", PodENISubnetGW: "fe80:ec2::1", ParentIfIndex: 4,
		IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv6Addr: "2600:1f14:1::10", DeviceNumber: -1}}}
	got, err = parseBranchReply(v6)
	require.NoError(t, err)
	assert.Equal(t, net.ParseIP("2600:1f14:1::10"), got.IP)
	assert.Equal(t, net.ParseIP("fe80:ec2::1"), got.SubnetGW)
	assert.Equal(t, 4094, got.VlanID)

	for name, mutate := range map[string]func(*rpc.AddNetworkReply){
		"no allocation":          func(r *rpc.AddNetworkReply) { r.IPAllocationMetadata = nil },
		"no address":             func(r *rpc.AddNetworkReply) { r.IPAllocationMetadata[0].IPv4Addr = "" },
		"bad MAC":                func(r *rpc.AddNetworkReply) { r.PodENIMAC = "zz" },
		"no gateway":             func(r *rpc.AddNetworkReply) { r.PodENISubnetGW = "" },
		"gateway of the v6 kind": func(r *rpc.AddNetworkReply) { r.PodENISubnetGW = "fe80:ec2::1" },
		"no trunk":               func(r *rpc.AddNetworkReply) { r.ParentIfIndex = 0 },
	} {
		r := v4()
		mutate(r)
		_, err := parseBranchReply(r)
		assert.Error(t, err, name)
	}
}

// Host veths of branch-ENI pods are named with "vlan" in strict mode and
// with the netconf's vethPrefix in standard mode.
func TestABranchPodsHostVethPrefixFollowsTheMode(t *testing.T) {
	assert.Equal(t, "vlan", branchVethPrefix("eni", driver.SGModeStrict))
	assert.Equal(t, "eni", branchVethPrefix("eni", driver.SGModeStandard))
	assert.Equal(t, "abc", branchVethPrefix("abc", driver.SGModeStandard))
	assert.Len(t, hostVethName(branchVethPrefix("eni", driver.SGModeStrict), "default", "web"), 15, "fits IFNAMSIZ")
}

// A branch-ENI pod's result has upstream's shape, and a DEL reading it
// back as prevResult finds the VLAN and the address: it tears the pod
// down without asking ipamd.
func TestABranchPodsResultLetsDelWorkWithoutIPAMD(t *testing.T) {
	for _, c := range []struct {
		name    string
		b       branchAttachment
		wantMac string
	}{
		{"IPv4", branchAttachment{IP: net.ParseIP("10.1.0.10").To4(), VlanID: 7, SubnetGW: net.ParseIP("10.1.0.1").To4()}, "7"},
		{"IPv6", branchAttachment{IP: net.ParseIP("2600:1f14:1::10"), VlanID: 300, SubnetGW: net.ParseIP("fe80:ec2::1")}, "300"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dummy := dummyIfName("default", "web")
			res := buildBranchResult("vlan0123456789a", "eth0", "/var/run/netns/x", dummy, c.b)
			require.Len(t, res.Interfaces, 3)
			assert.Equal(t, current.Interface{Name: "vlan0123456789a"}, *res.Interfaces[0])
			assert.Equal(t, current.Interface{Name: "eth0", Sandbox: "/var/run/netns/x", Mac: "0"}, *res.Interfaces[1])
			assert.Equal(t, current.Interface{Name: dummy, Mac: c.wantMac}, *res.Interfaces[2], "the dummy entry carries the VLAN, no sandbox")
			require.Len(t, res.IPs, 1)
			assert.Equal(t, 1, *res.IPs[0].Interface)
			want := hostNet(c.b.IP)
			assert.Equal(t, want.String(), res.IPs[0].Address.String())
			assert.True(t, res.IPs[0].Gateway.Equal(c.b.SubnetGW), "gateway is the branch subnet's")

			// Round trip through JSON in every spec version the plugin
			// speaks, as a runtime hands it to DEL.
			for _, v := range []string{"0.4.0", "1.0.0", "1.1.0"} {
				conv, err := res.GetAsVersion(v)
				require.NoError(t, err)
				raw, err := json.Marshal(conv)
				require.NoError(t, err)
				var m map[string]any
				require.NoError(t, json.Unmarshal(raw, &m))
				prev, err := parsePrevResultJSON(v, m)
				require.NoError(t, err, v)
				info, err := parsePrevInfo(prev, dummy, "eth0")
				require.NoError(t, err, v)
				assert.Equal(t, c.b.VlanID, info.VlanID, v)
				require.Len(t, info.Attachments, 1, v)
				assert.Equal(t, c.b.IP.String(), info.Attachments[0].IP.String(), v)
			}
		})
	}
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	require.NoError(t, err)
	return m
}

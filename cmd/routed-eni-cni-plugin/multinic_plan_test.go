package main

import (
	"net"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
)

// These need no privileges: they check the decisions behind a multi-NIC
// pod (names, tables, the result's shape, what DEL reads back).

// threeCards is ipamd's reply for a pod on three network cards: card 0's
// primary ENI (main), card 1 device 0, card 2 device 1.
var threeCards = []*rpc.IPAllocationMetadata{
	{IPv4Addr: "10.0.0.5", DeviceNumber: 0, RouteTableId: 254},
	{IPv4Addr: "10.1.0.6", DeviceNumber: 0, RouteTableId: 10100},
	{IPv4Addr: "10.2.0.7", DeviceNumber: 1, RouteTableId: 10201},
}

var web = pod{Name: "web", Namespace: "default"}

// Interface i of a pod is named as upstream names it: the host veth from
// the hash of "<ns>.<name>" with ".<i>" appended to the name for i > 0,
// the pod side CNI_IFNAME for i = 0 and mNicIf<i> after.
func TestEachInterfaceOfAMultiNICPodIsNamedAsUpstreamNamesIt(t *testing.T) {
	// Hashes computed independently: SHA-1 of "default.web", "default.web.1", "default.web.2".
	for _, c := range []struct {
		index         int
		host, podSide string
	}{
		{0, "eni68caf03a5f4", "eth0"},
		{1, "eni24175d5a8ef", "mNicIf1"},
		{2, "eni32179fc8ed5", "mNicIf2"},
	} {
		assert.Equal(t, c.host, hostVethNameAt("eni", "default", "web", c.index))
		assert.Equal(t, c.podSide, containerIfName("eth0", c.index))
		i, ok := containerIfIndex(c.podSide, "eth0")
		assert.True(t, ok, c.podSide)
		assert.Equal(t, c.index, i)
	}
	assert.Equal(t, hostVethName("eni", "default", "web"), hostVethNameAt("eni", "default", "web", 0))
	for _, name := range []string{"eth1", "mNicIf", "mNicIf0", "mNicIf01", "mNicIf-1", "mNicIfx"} {
		_, ok := containerIfIndex(name, "eth0")
		assert.False(t, ok, name)
	}
}

// ADD wires one interface per address of ipamd's reply, in its order,
// keeping each address's route table and device number.
func TestAMultiNICPodGetsOneInterfacePerAddress(t *testing.T) {
	ifs, err := planPod("eni", web, "eth0", threeCards)
	require.NoError(t, err)
	require.Len(t, ifs, 3)
	assert.Equal(t, podInterface{Index: 0, HostVeth: "eni68caf03a5f4", ContainerIf: "eth0", IP: net.IPv4(10, 0, 0, 5).To4(), RawTable: 254}, ifs[0])
	assert.Equal(t, podInterface{Index: 1, HostVeth: "eni24175d5a8ef", ContainerIf: "mNicIf1", IP: net.IPv4(10, 1, 0, 6).To4(), RawTable: 10100}, ifs[1])
	assert.Equal(t, podInterface{Index: 2, HostVeth: "eni32179fc8ed5", ContainerIf: "mNicIf2", IP: net.IPv4(10, 2, 0, 7).To4(), RawTable: 10201, DeviceNumber: 1}, ifs[2])

	nets := networks(ifs, "/var/run/netns/p", 9001)
	for i, n := range nets {
		assert.Equal(t, i, n.Index)
		assert.Equal(t, ifs[i].RawTable, n.RouteTable)
		assert.Equal(t, "/var/run/netns/p", n.NetnsPath)
	}

	v6, err := planPod("eni", web, "eth0", []*rpc.IPAllocationMetadata{{IPv6Addr: "2001:db8::5"}, {IPv6Addr: "2001:db8:1::6", RouteTableId: 10100}})
	require.NoError(t, err)
	assert.Equal(t, "2001:db8:1::6", v6[1].IP.String())

	for name, bad := range map[string][]*rpc.IPAllocationMetadata{
		"no address":            nil,
		"second not an address": {{IPv4Addr: "10.0.0.5"}, {IPv4Addr: "x"}},
		"nil entry":             {{IPv4Addr: "10.0.0.5"}, nil},
	} {
		_, err := planPod("eni", web, "eth0", bad)
		assert.Error(t, err, name)
	}
}

// The result of a multi-NIC ADD has upstream's shape: per interface the
// host veth then the container entry (route table in mac), each address
// pointing at its container entry, and last the dummy entry with the
// device number of the first address.
func TestAMultiNICResultHasUpstreamsShape(t *testing.T) {
	ifs, err := planPod("eni", web, "eth0", threeCards)
	require.NoError(t, err)
	res := buildResult(ifs, "/var/run/netns/p", dummyIfName("default", "web"))
	want := []current.Interface{
		{Name: "eni68caf03a5f4"}, {Name: "eth0", Sandbox: "/var/run/netns/p", Mac: "254"},
		{Name: "eni24175d5a8ef"}, {Name: "mNicIf1", Sandbox: "/var/run/netns/p", Mac: "10100"},
		{Name: "eni32179fc8ed5"}, {Name: "mNicIf2", Sandbox: "/var/run/netns/p", Mac: "10201"},
		{Name: "dummy68caf03a5f4", Mac: "0", Sandbox: "0"},
	}
	require.Len(t, res.Interfaces, len(want))
	for i := range want {
		assert.Equal(t, want[i], *res.Interfaces[i], "interface %d", i)
	}
	require.Len(t, res.IPs, 3)
	for i, ipc := range res.IPs {
		assert.Equal(t, 2*i+1, *ipc.Interface)
		assert.Equal(t, ifs[i].IP.String()+"/32", ipc.Address.String())
		assert.Nil(t, ipc.Gateway)
	}
	assert.Empty(t, res.Routes)
}

// DEL from prevResult (ipamd away) finds every interface of a multi-NIC
// pod: (entries - 1) / 2 of them, each address on its container entry,
// each with the table in that entry's mac, or the device's table when
// the mac is empty.
func TestDelFromPrevResultFindsEveryInterfaceOfAMultiNICPod(t *testing.T) {
	ifs, err := planPod("eni", web, "eth0", threeCards)
	require.NoError(t, err)
	built := buildResult(ifs, "/var/run/netns/p", dummyIfName("default", "web"))
	for _, v := range []string{"0.4.0", "1.0.0", "1.1.0"} {
		conv, err := built.GetAsVersion(v)
		require.NoError(t, err)
		res, err := current.NewResultFromResult(conv)
		require.NoError(t, err)
		got, err := parsePrevInfo(res, dummyIfName("default", "web"), "eth0")
		require.NoError(t, err, v)
		assert.Equal(t, []attachment{
			{IP: net.IPv4(10, 0, 0, 5).To4(), RouteTable: 254, IfName: "eth0"},
			{IP: net.IPv4(10, 1, 0, 6).To4(), RouteTable: 10100, IfName: "mNicIf1", Index: 1},
			{IP: net.IPv4(10, 2, 0, 7).To4(), RouteTable: 10201, IfName: "mNicIf2", Index: 2},
		}, got.Attachments, v)
	}

	// No table in mac: the default table of the dummy's device; an
	// mNicIf entry beyond the interface count is not the pod's.
	dummy := dummyIfName("default", "web")
	res := prevFromJSON(t, "1.0.0", `{"cniVersion":"1.0.0","interfaces":[
		{"name":"eni68caf03a5f4"},{"name":"eth0","sandbox":"/p"},
		{"name":"eni24175d5a8ef"},{"name":"mNicIf1","sandbox":"/p"},
		{"name":"mNicIf2","sandbox":"/p","mac":"7"},
		{"name":"`+dummy+`","mac":"0","sandbox":"2"}],
		"ips":[{"interface":1,"address":"10.0.0.5/32"},{"interface":3,"address":"10.1.0.6/32"},{"interface":4,"address":"10.2.0.7/32"}]}`)
	got, err := parsePrevInfo(res, dummy, "eth0")
	require.NoError(t, err)
	assert.Equal(t, []attachment{
		{IP: net.IPv4(10, 0, 0, 5).To4(), RouteTable: 3, DeviceNumber: 2, IfName: "eth0"},
		{IP: net.IPv4(10, 1, 0, 6).To4(), RouteTable: 3, DeviceNumber: 2, IfName: "mNicIf1", Index: 1},
	}, got.Attachments)
}

// DEL tears down each address ipamd's reply names on the pod interface of
// its position, with its route table.
func TestDelTearsDownEveryAddressIPAMDReleased(t *testing.T) {
	reply := &rpc.DelNetworkReply{Success: true, IPAllocationMetadata: threeCards}
	assert.Equal(t, []attachment{
		{IP: net.IPv4(10, 0, 0, 5).To4(), RouteTable: 254, IfName: "eth0"},
		{IP: net.IPv4(10, 1, 0, 6).To4(), RouteTable: 10100, IfName: "mNicIf1", Index: 1},
		{IP: net.IPv4(10, 2, 0, 7).To4(), RouteTable: 10201, DeviceNumber: 1, IfName: "mNicIf2", Index: 2},
	}, releasedAttachments(reply, "eth0"))
}

// When ipamd's reply skips an address (released earlier), each address it
// names is still torn down on the interface prevResult gives it.
func TestReleasedAddressesFollowPrevResultsInterfaces(t *testing.T) {
	reply := &rpc.DelNetworkReply{Success: true, IPAllocationMetadata: []*rpc.IPAllocationMetadata{threeCards[0], threeCards[2]}}
	byPosition := releasedAttachments(reply, "eth0")
	assert.Equal(t, "mNicIf1", byPosition[1].IfName, "position alone would pick the wrong interface")
	prev := &prevInfo{Attachments: []attachment{
		{IP: net.IPv4(10, 0, 0, 5).To4(), IfName: "eth0"},
		{IP: net.IPv4(10, 1, 0, 6).To4(), IfName: "mNicIf1", Index: 1},
		{IP: net.IPv4(10, 2, 0, 7).To4(), IfName: "mNicIf2", Index: 2},
	}}
	got := onPrevInterfaces(byPosition, prev)
	assert.Equal(t, "eth0", got[0].IfName)
	assert.Equal(t, "mNicIf2", got[1].IfName)
	assert.Equal(t, 2, got[1].Index)
	assert.Equal(t, 10201, got[1].RouteTable, "the table stays ipamd's")
	assert.Equal(t, byPosition, onPrevInterfaces(byPosition, nil), "no prevResult: by position")
}

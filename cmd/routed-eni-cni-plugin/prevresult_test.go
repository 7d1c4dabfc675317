package main

import (
	"bytes"
	"encoding/json"
	"net"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests need no privileges: they only parse results.

// prevFromJSON parses a prevResult the way the plugin receives it inside
// a netconf of the given version.
func prevFromJSON(t *testing.T, cniVersion, result string) *current.Result {
	t.Helper()
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(result), &raw))
	res, err := parsePrevResultJSON(cniVersion, raw)
	require.NoError(t, err)
	return res
}

func TestParsePrevInfo(t *testing.T) {
	dummy := dummyIfName("default", "web")
	for _, c := range []struct {
		name    string
		version string
		result  string
		want    prevInfo
		wantErr string
	}{
		{
			name:    "primary ENI, table in mac (ours and upstream >= v1.20)",
			version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"enic440f455693"},{"name":"eth0","sandbox":"/var/run/netns/x","mac":"254"},
				{"name":"` + dummy + `","mac":"0","sandbox":"0"}],"ips":[{"interface":1,"address":"10.0.0.5/32"}]}`,
			want: prevInfo{Attachments: []attachment{{IP: net.IPv4(10, 0, 0, 5).To4(), RouteTable: 254, DeviceNumber: 0, IfName: "eth0"}}},
		},
		{
			name:    "secondary ENI, table in mac",
			version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x","mac":"3"},
				{"name":"` + dummy + `","mac":"0","sandbox":"2"}],"ips":[{"interface":1,"address":"10.0.2.9/32"}]}`,
			want: prevInfo{Attachments: []attachment{{IP: net.IPv4(10, 0, 2, 9).To4(), RouteTable: 3, DeviceNumber: 2, IfName: "eth0"}}},
		},
		{
			name:    "0.4.0 result with no table in mac: the device's table",
			version: "0.4.0",
			result: `{"cniVersion":"0.4.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x"},
				{"name":"` + dummy + `","mac":"0","sandbox":"4"}],"ips":[{"version":"4","interface":1,"address":"10.0.4.1/32"}]}`,
			want: prevInfo{Attachments: []attachment{{IP: net.IPv4(10, 0, 4, 1).To4(), RouteTable: 5, DeviceNumber: 4, IfName: "eth0"}}},
		},
		{
			name:    "old result with a real MAC on the container entry",
			version: "0.4.0",
			result: `{"cniVersion":"0.4.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x","mac":"0a:58:0a:00:00:05"},
				{"name":"` + dummy + `","mac":"0","sandbox":"1"}],"ips":[{"version":"4","interface":1,"address":"10.0.1.7/32"}]}`,
			want: prevInfo{Attachments: []attachment{{IP: net.IPv4(10, 0, 1, 7).To4(), RouteTable: 2, DeviceNumber: 1, IfName: "eth0"}}},
		},
		{
			name:    "legacy table 1 means main",
			version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x","mac":"1"},
				{"name":"` + dummy + `","mac":"0","sandbox":"0"}],"ips":[{"interface":1,"address":"10.0.0.8/32"}]}`,
			want: prevInfo{Attachments: []attachment{{IP: net.IPv4(10, 0, 0, 8).To4(), RouteTable: 254, IfName: "eth0"}}},
		},
		{
			name:    "branch ENI: dummy mac is the VLAN",
			version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"vlan1"},{"name":"eth0","sandbox":"/x","mac":"0"},
				{"name":"` + dummy + `","mac":"7"}],"ips":[{"interface":1,"address":"10.0.9.9/32"}]}`,
			want: prevInfo{VlanID: 7, Attachments: []attachment{{IP: net.IPv4(10, 0, 9, 9).To4(), RouteTable: 107, IfName: "eth0"}}},
		},
		{
			name:    "address without an interface index",
			version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x","mac":"3"},
				{"name":"` + dummy + `","mac":"0","sandbox":"2"}],"ips":[{"address":"10.0.2.3/32"}]}`,
			want: prevInfo{Attachments: []attachment{{IP: net.IPv4(10, 0, 2, 3).To4(), RouteTable: 3, DeviceNumber: 2, IfName: "eth0"}}},
		},
		{
			name:    "malformed dummy mac",
			version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x"},
				{"name":"` + dummy + `","mac":"zz"}],"ips":[{"interface":1,"address":"10.0.0.5/32"}]}`,
			wantErr: "not an integer",
		},
		{
			name:    "malformed device number",
			version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x"},
				{"name":"` + dummy + `","mac":"0","sandbox":"/var/run/netns/x"}],"ips":[{"interface":1,"address":"10.0.0.5/32"}]}`,
			wantErr: "device number",
		},
		{
			name:    "no dummy entry (another plugin's result)",
			version: "1.0.0",
			result:  `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"interface":0,"address":"10.0.0.5/24"}]}`,
			wantErr: errNoDummy.Error(),
		},
		{
			name:    "IPv6 pod (IPv6 mode)",
			version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x","mac":"254"},
				{"name":"` + dummy + `","mac":"0","sandbox":"0"}],"ips":[{"interface":1,"address":"2001:db8::5/128"}]}`,
			want: prevInfo{Attachments: []attachment{{IP: net.ParseIP("2001:db8::5"), RouteTable: 254, IfName: "eth0"}}},
		},
		{
			name:    "no address",
			version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x","mac":"254"},
				{"name":"` + dummy + `","mac":"0","sandbox":"0"}],"ips":[]}`,
			wantErr: "no address",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := prevFromJSON(t, c.version, c.result)
			got, err := parsePrevInfo(res, dummy, "eth0")
			if c.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestParsePrevInfoAnyDummyWhenNameUnknown(t *testing.T) {
	res := prevFromJSON(t, "1.0.0", `{"cniVersion":"1.0.0","interfaces":[{"name":"eni1"},{"name":"eth0","sandbox":"/x","mac":"2"},
		{"name":"dummy0123456789a","mac":"0","sandbox":"1"}],"ips":[{"interface":1,"address":"10.0.1.2/32"}]}`)
	_, err := parsePrevInfo(res, dummyIfName("other", "pod"), "eth0")
	require.ErrorIs(t, err, errNoDummy)
	got, err := parsePrevInfo(res, "", "eth0")
	require.NoError(t, err)
	assert.Equal(t, 2, got.Attachments[0].RouteTable)
}

func TestResultRoundTripsThroughEveryVersion(t *testing.T) {
	pi := podInterface{HostVeth: "eni0123456789a", ContainerIf: "eth0", IP: net.IPv4(10, 250, 1, 4).To4(), RawTable: 2, DeviceNumber: 1}
	a := attachment{IP: pi.IP, RouteTable: 2, DeviceNumber: 1, IfName: "eth0"}
	res := buildResult([]podInterface{pi}, "/var/run/netns/cni-1", dummyIfName("default", "web"))
	for _, v := range supportedVersions.SupportedVersions() {
		t.Run(v, func(t *testing.T) {
			conv, err := res.GetAsVersion(v)
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, conv.PrintTo(&buf))
			out := buf.String()
			assert.Contains(t, out, `"mac": "2"`)
			assert.Contains(t, out, `"sandbox": "1"`)
			prev := prevFromJSON(t, v, out)
			got, err := parsePrevInfo(prev, dummyIfName("default", "web"), "eth0")
			require.NoError(t, err)
			assert.Equal(t, prevInfo{Attachments: []attachment{a}}, got)
		})
	}
	// The primary ENI: table 254 in the result, main after parsing.
	p := buildResult([]podInterface{{HostVeth: "h", ContainerIf: "eth0", IP: net.IPv4(10, 0, 0, 1).To4(), RawTable: 254}}, "/n", "dummyx")
	assert.Equal(t, "254", p.Interfaces[1].Mac)
	assert.Equal(t, "0", p.Interfaces[2].Sandbox)
	assert.Equal(t, "0", p.Interfaces[2].Mac)
	require.Len(t, p.IPs, 1)
	assert.Equal(t, 1, *p.IPs[0].Interface)
	assert.Equal(t, "10.0.0.1/32", p.IPs[0].Address.String())
}

func TestNames(t *testing.T) {
	// Values computed independently (SHA-1 of "<namespace>.<name>").
	assert.Equal(t, "enic440f455693", hostVethName("eni", "default", "nginx"))
	assert.Equal(t, "dummyc440f455693", dummyIfName("default", "nginx"))
	assert.Equal(t, "eni4d5f75c480c", hostVethName("eni", "kube-system", "coredns-5d78c9869d-abcde"))
	assert.Len(t, hostVethName("abcd", "ns", "n"), 15, "fits IFNAMSIZ with the longest prefix")
}

func TestTables(t *testing.T) {
	assert.Equal(t, 254, tableForDevice(0))
	assert.Equal(t, 2, tableForDevice(1))
	assert.Equal(t, 11, tableForDevice(10))
	assert.Equal(t, 254, normalizeTable(0))
	assert.Equal(t, 254, normalizeTable(1))
	assert.Equal(t, 254, normalizeTable(254))
	assert.Equal(t, 3, normalizeTable(3))
}

func TestPodMTU(t *testing.T) {
	for in, want := range map[string]int{"": 9001, "9001": 9001, "1500": 1500, "576": 576, "575": 9001, "9002": 9001, "abc": 9001, " 1400 ": 1400, "-1": 9001} {
		assert.Equal(t, want, podMTU(in), "%q", in)
	}
}

func TestLoadNetConf(t *testing.T) {
	c, err := loadNetConf([]byte(`{"cniVersion":"0.4.0","name":"aws-cni","type":"aws-cni"}`))
	require.Nil(t, err)
	assert.Equal(t, "eni", c.VethPrefix)
	assert.Equal(t, 9001, c.podMTU)
	assert.Equal(t, "strict", c.PodSGEnforcingMode)
	assert.Equal(t, "/var/log/aws-routed-eni/plugin.log", c.PluginLogFile)
	assert.Equal(t, "Debug", c.PluginLogLevel)
	assert.Equal(t, "/var/run/aws-node/ipamd.sock", c.IPAMDSocket)
	assert.Equal(t, "/var/run/aws-node/del-queue", c.DelQueueDir)
	assert.Nil(t, c.prevResult)

	c, err = loadNetConf([]byte(`{"cniVersion":"1.1.0","name":"aws-cni","type":"aws-cni","vethPrefix":"abcd","mtu":"1500",
		"runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"k8s.amazonaws.com/nicConfig":"multi-nic-attachment"}},
		"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}`))
	require.Nil(t, err)
	assert.Equal(t, "abcd", c.VethPrefix)
	assert.Equal(t, 1500, c.podMTU)
	assert.True(t, c.multiNICRequested())
	assert.Equal(t, []types.GCAttachment{{ContainerID: "c1", IfName: "eth0"}}, c.ValidAttachments)

	c, err = loadNetConf([]byte(`{"cniVersion":"1.0.0","name":"aws-cni","prevResult":{"cniVersion":"1.0.0","ips":"nope"}}`))
	require.Nil(t, err, "a bad prevResult is not fatal at load")
	assert.Error(t, c.prevErr)

	for in, code := range map[string]uint{
		``:                                  types.ErrDecodingFailure,
		`{`:                                 types.ErrDecodingFailure,
		`{"name":""}`:                       types.ErrInvalidNetworkConfig,
		`{"name":"n","vethPrefix":"abcde"}`: types.ErrInvalidNetworkConfig,
		`{"name":"n","vethPrefix":"a/b"}`:   types.ErrInvalidNetworkConfig,
		`{"name":"n","mtu":1500}`:           types.ErrDecodingFailure,
	} {
		_, err := loadNetConf([]byte(in))
		require.NotNil(t, err, in)
		assert.Equal(t, code, err.Code, in)
	}
}

func TestLoadPodArgs(t *testing.T) {
	p, err := loadPodArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u1;OTHER=x", true)
	require.Nil(t, err)
	assert.Equal(t, pod{Name: "web", Namespace: "ns", InfraContainerID: "abc", UID: "u1"}, p)

	_, err = loadPodArgs("K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;OTHER=x", true)
	require.NotNil(t, err, "unknown keys without IgnoreUnknown")
	assert.Equal(t, types.ErrInvalidEnvironmentVariables, err.Code)

	_, err = loadPodArgs("", true)
	require.NotNil(t, err)
	p, err = loadPodArgs("", false)
	require.Nil(t, err, "DEL works without pod names")
	assert.Equal(t, pod{}, p)

	_, err = loadPodArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME="+string(bytes.Repeat([]byte("a"), 254)), true)
	require.NotNil(t, err)
}

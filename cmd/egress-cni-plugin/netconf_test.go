package main

import (
	"crypto/sha512"
	"encoding/hex"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The conflist entry as the entrypoint renders it for an IPv6 cluster,
// with the list's name injected by libcni and aws-cni's result.
const v6ClusterEntry = `{
  "cniVersion": "0.4.0", "name": "aws-cni", "type": "egress-cni",
  "mtu": "9001", "enabled": "true", "randomizeSNAT": "prng", "nodeIP": "192.168.1.10",
  "ipam": {"type": "host-local", "ranges": [[{"subnet": "169.254.172.0/22"}]],
           "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "/run/cni/v6pd/egress-v4-ipam"},
  "pluginLogFile": "/var/log/aws-routed-eni/egress-v4-plugin.log", "pluginLogLevel": "Debug",
  "prevResult": {"cniVersion": "0.4.0",
    "interfaces": [{"name": "eni0123456789a"}, {"name": "eth0", "sandbox": "/var/run/netns/x", "mac": "0"}],
    "ips": [{"version": "6", "address": "2001:db8::5/128", "interface": 1}]}
}`

func TestLoadNetConfUpstreamEntry(t *testing.T) {
	conf, prevErr, err := loadNetConf([]byte(v6ClusterEntry))
	require.NoError(t, err)
	require.NoError(t, prevErr)
	assert.Equal(t, "aws-cni", conf.Name)
	assert.Equal(t, "egress-cni", conf.Type)
	assert.True(t, conf.enabled())
	assert.Equal(t, "prng", conf.RandomizeSNAT)
	assert.True(t, conf.NodeIP.Equal(net.ParseIP("192.168.1.10")))
	assert.Equal(t, "host-local", conf.IPAM.Type)
	assert.Equal(t, "/var/log/aws-routed-eni/egress-v4-plugin.log", conf.PluginLogFile)
	assert.Equal(t, v4Egress, conf.family())
	assert.NoError(t, conf.checkNodeIP())
	mtu, err := conf.podMTU()
	require.NoError(t, err)
	assert.Equal(t, 9001, mtu)
	prev, err := conf.prevResult(prevErr)
	require.NoError(t, err)
	require.Len(t, prev.IPs, 1)
	assert.Equal(t, "2001:db8::5/128", prev.IPs[0].Address.String())
	assert.Len(t, prev.Interfaces, 2)
}

func TestLoadNetConfCases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		json     string
		err      bool
		prevErr  bool
		enabled  bool
		family   egressFamily
		nodeOK   bool
		mtu      int // 0: podMTU fails
		logFile  string
		logLevel string
	}{
		{name: "empty stdin", json: "  ", err: true},
		{name: "not JSON", json: "{", err: true},
		{name: "bad nodeIP", json: `{"name":"n","nodeIP":"not-an-ip"}`, err: true},
		{name: "disabled, empty nodeIP (IPv4 cluster default)", json: `{"name":"n","enabled":"false","nodeIP":"","mtu":"9001"}`,
			family: v6Egress, mtu: 9001, logFile: defaultLogFile, logLevel: defaultLogLevel},
		{name: "enabled only for the exact string true", json: `{"name":"n","enabled":"TRUE","nodeIP":"10.0.0.1","mtu":"1500"}`,
			family: v4Egress, nodeOK: true, mtu: 1500, logFile: defaultLogFile, logLevel: defaultLogLevel},
		{name: "IPv6 egress", json: `{"name":"n","enabled":"true","nodeIP":"2600:1f14::10","mtu":"9001","pluginLogFile":"/l","pluginLogLevel":"Info"}`,
			enabled: true, family: v6Egress, nodeOK: true, mtu: 9001, logFile: "/l", logLevel: "Info"},
		{name: "IPv6 egress needs a global nodeIP", json: `{"name":"n","enabled":"true","nodeIP":"fe80::1","mtu":"9001"}`,
			enabled: true, family: v6Egress, mtu: 9001, logFile: defaultLogFile, logLevel: defaultLogLevel},
		{name: "IPv6 egress without nodeIP", json: `{"name":"n","enabled":"true","mtu":"9001"}`,
			enabled: true, family: v6Egress, mtu: 9001, logFile: defaultLogFile, logLevel: defaultLogLevel},
		{name: "mtu not a number", json: `{"name":"n","enabled":"true","nodeIP":"10.0.0.1","mtu":"jumbo"}`,
			enabled: true, family: v4Egress, nodeOK: true, logFile: defaultLogFile, logLevel: defaultLogLevel},
		{name: "mtu out of range", json: `{"name":"n","enabled":"true","nodeIP":"10.0.0.1","mtu":"70000"}`,
			enabled: true, family: v4Egress, nodeOK: true, logFile: defaultLogFile, logLevel: defaultLogLevel},
		{name: "bad prevResult is kept for ADD only", json: `{"name":"n","cniVersion":"0.4.0","enabled":"true","nodeIP":"10.0.0.1","mtu":"9001","prevResult":{"ips":[{"address":"bogus"}]}}`,
			prevErr: true, enabled: true, family: v4Egress, nodeOK: true, mtu: 9001, logFile: defaultLogFile, logLevel: defaultLogLevel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, prevErr, err := loadNetConf([]byte(tc.json))
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.prevErr, prevErr != nil, "prevErr %v", prevErr)
			assert.Equal(t, tc.enabled, conf.enabled())
			assert.Equal(t, tc.family, conf.family())
			assert.Equal(t, tc.nodeOK, conf.checkNodeIP() == nil)
			mtu, err := conf.podMTU()
			if tc.mtu == 0 {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
				assert.Equal(t, tc.mtu, mtu)
			}
			assert.Equal(t, tc.logFile, conf.PluginLogFile)
			assert.Equal(t, tc.logLevel, conf.PluginLogLevel)
		})
	}
}

func TestPrevResultRequired(t *testing.T) {
	conf, prevErr, err := loadNetConf([]byte(`{"name":"n","enabled":"true","nodeIP":"10.0.0.1"}`))
	require.NoError(t, err)
	_, err = conf.prevResult(prevErr)
	assert.ErrorContains(t, err, "must be called as a chained plugin")
}

// Chain names are containernetworking's: "CNI-" + the prefix + the hex
// SHA-512 of network name and container ID, cut to 28 characters.
func TestChainNameAndComment(t *testing.T) {
	sum := sha512.Sum512([]byte("aws-cni" + "c0ffee"))
	h := hex.EncodeToString(sum[:])
	assert.Equal(t, "CNI-E4-"+h[:21], chainName(v4Egress, "aws-cni", "c0ffee"))
	assert.Equal(t, "CNI-E6-"+h[:21], chainName(v6Egress, "aws-cni", "c0ffee"))
	assert.Len(t, chainName(v4Egress, "aws-cni", "x"), 28)
	assert.NotEqual(t, chainName(v4Egress, "aws-cni", "a"), chainName(v4Egress, "aws-cni", "b"))
	assert.Equal(t, `name: "aws-cni" id: "c0ffee"`, ruleComment("aws-cni", "c0ffee"))
}

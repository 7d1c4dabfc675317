package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBadInputsFailCleanly(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 4})
	p := n.newPod("bad")
	good := n.netconf("1.0.0", nil)
	notNetns := filepath.Join(t.TempDir(), "plain-file")
	require.NoError(t, os.WriteFile(notNetns, nil, 0o600))
	for _, c := range []struct {
		name  string
		stdin []byte
		env   map[string]string
		code  uint
		msg   string
	}{
		{name: "malformed stdin", stdin: []byte(`{"cniVersion":"1.0.0","name":`), code: 6},
		{name: "empty stdin", stdin: []byte(``), code: 6},
		{name: "no network name", stdin: n.netconf("1.0.0", map[string]any{"name": nil}), code: 7},
		{name: "unsupported cniVersion", stdin: n.netconf("0.3.1", nil), code: 1, msg: "incompatible CNI versions"},
		{name: "unknown cniVersion", stdin: n.netconf("9.9.9", nil), code: 1},
		{name: "vethPrefix of 5 chars", stdin: n.netconf("1.0.0", map[string]any{"vethPrefix": "abcde"}), code: 7, msg: "vethPrefix"},
		{name: "bad podSGEnforcingMode", stdin: n.netconf("1.0.0", map[string]any{"podSGEnforcingMode": "lax"}), code: 7},
		{name: "mtu of the wrong JSON type", stdin: n.netconf("1.0.0", map[string]any{"mtu": 9001}), code: 6},
		{name: "no pod name", stdin: good, env: map[string]string{"CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=default"}, code: 4, msg: "K8S_POD_NAME"},
		{name: "no CNI_ARGS", stdin: good, env: map[string]string{"CNI_ARGS": ""}, code: 4},
		{name: "malformed CNI_ARGS", stdin: good, env: map[string]string{"CNI_ARGS": "K8S_POD_NAME"}, code: 4},
		{name: "unknown CNI_ARGS key", stdin: good, env: map[string]string{"CNI_ARGS": "K8S_POD_NAMESPACE=d;K8S_POD_NAME=x;FOO=bar"}, code: 4},
		{name: "absurd pod name", stdin: good, env: map[string]string{"CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=d;K8S_POD_NAME=" + strings.Repeat("x", 300)}, code: 4, msg: "K8S_POD_NAME"},
		{name: "absurd namespace", stdin: good, env: map[string]string{"CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAME=x;K8S_POD_NAMESPACE=" + strings.Repeat("n", 64)}, code: 4},
		{name: "absurd container id", stdin: good, env: map[string]string{"CNI_CONTAINERID": strings.Repeat("c", 300)}, code: 4},
		{name: "IfName of 20 chars", stdin: good, env: map[string]string{"CNI_IFNAME": strings.Repeat("i", 20)}, code: 4},
		{name: "netns does not exist", stdin: good, env: map[string]string{"CNI_NETNS": "/var/run/netns/aws-cni-test-no-such-ns"}, code: 8},
		{name: "no CNI_NETNS", stdin: good, env: map[string]string{"CNI_NETNS": ""}, code: 4},
		{name: "CNI_NETNS not a namespace", stdin: good, env: map[string]string{"CNI_NETNS": notNetns}, code: 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := n.exec("ADD", p, c.stdin, c.env)
			require.NotEqual(t, 0, r.exitCode, "%s", r)
			e := r.cniError()
			require.NotNil(t, e, "a CNI error on stdout: %s", r)
			assert.Equal(t, c.code, e.Code, "%s", r)
			if c.msg != "" {
				assert.Contains(t, e.Msg+e.Details, c.msg)
			}
			assert.Empty(t, n.podLinks("eni"), "no host veth left")
			assert.Empty(t, n.podLinks("abc"), "no host veth left")
			assert.Empty(t, n.podRules(), "no rules left")
			assert.Equal(t, 0, n.store().Stats().AssignedIPs, "no allocation left in ipamd")
		})
	}
	links, err := netnsLinks(p)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo"}, links, "nothing created in the pod")
}

func TestADDFailureInTheDriverGivesTheAddressBack(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 4})
	p := n.newPod("clash")
	// The pod already has an "eth0" that is not ours: creating the veth
	// fails after ipamd assigned an address.
	clash := n.newPod("clash-peer")
	vethBetween(t, p, "eth0", clash, "peer0")
	r := n.exec("ADD", p, n.netconf("1.0.0", nil), nil)
	require.NotEqual(t, 0, r.exitCode, "%s", r)
	require.NotNil(t, r.cniError())
	assert.Contains(t, r.cniError().Msg, "setup pod network")
	_, held := n.allocation(p)
	assert.False(t, held, "the address went back to ipamd (SetupNSFailed)")
	assert.Empty(t, n.podLinks("eni"))
	assert.Empty(t, n.podRules())
}

func TestAddFailsCleanlyWhenIPAMDIsDownOrExhausted(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 1})
	first, second := n.newPod("first"), n.newPod("second")
	raw, _ := n.add(first, "1.0.0")
	r := n.exec("ADD", second, n.netconf("1.0.0", nil), nil)
	require.NotEqual(t, 0, r.exitCode, "pool exhausted: %s", r)
	require.NotNil(t, r.cniError())
	// Upstream's message, then ipamd's one line on why (its trailer).
	assert.Equal(t, "failed to assign an IP address to container: provisioning_disabled: ipamd does not grow the pool "+
		"(DISABLE_NETWORK_RESOURCE_PROVISIONING=true, 1 of 1 addresses assigned); addresses come only from ENIs attached by others", r.cniError().Msg)
	assert.Len(t, n.podLinks("eni"), 1, "only the first pod's veth")

	n.stopIPAMD()
	r = n.exec("ADD", second, n.netconf("1.0.0", nil), nil)
	require.NotEqual(t, 0, r.exitCode, "ipamd down: %s", r)
	require.NotNil(t, r.cniError())
	assert.EqualValues(t, 11, r.cniError().Code, "try again later")
	assert.Len(t, n.podLinks("eni"), 1)
	n.startIPAMD()
	n.del(first, raw, nil)
	n.requireClean()
}

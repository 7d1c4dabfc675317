package main

import (
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatus(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 1})
	conf := n.netconf("1.1.0", nil)

	r := n.exec("STATUS", nil, conf, nil)
	require.Equal(t, 0, r.exitCode, "STATUS with addresses free: %s", r)

	p := n.newPod("status")
	raw, _ := n.add(p, "1.1.0")
	r = n.exec("STATUS", nil, conf, nil)
	require.NotEqual(t, 0, r.exitCode, "STATUS with the pool exhausted")
	require.NotNil(t, r.cniError(), "%s", r)
	assert.EqualValues(t, 50, r.cniError().Code)
	assert.Contains(t, r.cniError().Msg, "no IP address available")

	n.del(p, raw, nil)
	r = n.exec("STATUS", nil, conf, nil)
	require.Equal(t, 0, r.exitCode, "STATUS after the address came back: %s", r)

	n.stopIPAMD()
	r = n.exec("STATUS", nil, conf, nil)
	require.NotEqual(t, 0, r.exitCode)
	require.NotNil(t, r.cniError(), "%s", r)
	assert.EqualValues(t, 50, r.cniError().Code, "plugin not available while ipamd is down")

	// STATUS needs a 1.1.0 config.
	r = n.exec("STATUS", nil, n.netconf("1.0.0", nil), nil)
	require.NotEqual(t, 0, r.exitCode)
}

func TestGC(t *testing.T) {
	n := newTestNode(t, devpool.Pool{ENIs: 1, PerENI: 4},
		withFakeCRI(), withIPAMDEnv("POD_IP_RECONCILE_MODE", "report"))
	a, b := n.newPod("gc-a"), n.newPod("gc-b")
	rawA, resA := n.add(a, "1.1.0")
	rawB, resB := n.add(b, "1.1.0")
	n.cri.set(a, podIP(t, resA))
	n.cri.set(b, podIP(t, resB))

	conf := n.netconf("1.1.0", map[string]any{
		"cni.dev/valid-attachments": []map[string]string{{"containerID": a.containerID, "ifname": "eth0"}},
	})
	r := n.exec("GC", nil, conf, nil)
	require.Equal(t, 0, r.exitCode, "GC: %s", r)

	if lines := n.logLines("GC: ipamd does not implement garbage collection; nothing collected"); len(lines) > 0 {
		t.Log("ipamd answers Unimplemented: the plugin succeeded and logged it")
	} else {
		lines := n.logLines("GC done")
		require.Len(t, lines, 1, "GC logs the reply")
		released, _ := lines[0]["released"].(float64)
		deferred, _ := lines[0]["deferred"].(float64)
		assert.EqualValues(t, 1, released+deferred, "only pod b is outside the valid list: %v", lines[0])
		assert.EqualValues(t, 1, lines[0]["validAttachments"])
	}
	_, held := n.allocation(a)
	assert.True(t, held, "a is valid and stays allocated")

	n.stopIPAMD()
	r = n.exec("GC", nil, conf, nil)
	require.NotEqual(t, 0, r.exitCode, "GC with ipamd down")
	require.NotNil(t, r.cniError())
	assert.EqualValues(t, 11, r.cniError().Code, "try again later")
	n.startIPAMD()

	n.del(a, rawA, nil)
	n.del(b, rawB, nil)
	n.requireClean()
}

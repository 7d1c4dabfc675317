package ipamcheck_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamcheck"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// On a node with security groups for pods, a branch ENI pod's sandbox
// reports its branch ENI's address, which ipamd never holds: the check
// shows it outside the pool, beside the live regular pod, and finds no
// leak.
func TestCheckShowsBranchPodsOutsideThePool(t *testing.T) {
	n := newNode(t)
	n.start(t, podip.Enforce)
	flags := []string{"-introspection-addr", n.introspect, "-runtime-endpoint", n.criEndpoint}
	webID, branchID := sandboxID("web-0"), sandboxID("db-0")
	web := n.pod(t, webID, "web-0", false)
	n.rt.Add(fakecri.Sandbox{ID: branchID, Name: "db-0", Namespace: "shop", IP: "198.51.100.7", State: runtimeapi.PodSandboxState_SANDBOX_READY})

	code, table, stderr := check(nil, flags...)
	t.Logf("\n%s", table)
	require.Equal(t, ipamcheck.ExitClean, code, stderr)
	assert.Regexp(t, `live$`, row(t, table, web))
	assert.Regexp(t, `^198\.51\.100\.7 +- +shop/db-0 +`+branchID[:13]+` +\d+s +outside ipamd's pool: a branch ENI pod \(security groups for pods\)`, row(t, table, "198.51.100.7"))
	assert.Contains(t, table, "1 pod address outside ipamd's pool (branch ENI pods or another plugin's)")

	code, out, stderr := check(nil, append(flags, "-o", "json")...)
	require.Equal(t, ipamcheck.ExitClean, code, stderr)
	var rep ipamcheck.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, 1, rep.Summary.OutsidePool)
	assert.False(t, rep.LeaksFound)
	var found bool
	for _, a := range rep.Addresses {
		if a.Address == "198.51.100.7" {
			found = true
			assert.Equal(t, ipamcheck.OutsidePool, a.Verdict)
			assert.Equal(t, "db-0", a.PodName)
			assert.Empty(t, a.ENI)
		}
	}
	assert.True(t, found)
}

package ipamd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// On a CRI-O node where a containerd also answers, first among the probed
// sockets and with sandboxes of its own, ipamd (no CRI_RUNTIME_ENDPOINT)
// reconciles against CRI-O, the runtime that lists its own pod
// (MY_POD_NAME), and stops asking containerd.
func TestProbeModeReconcilesAgainstTheRuntimeListingOwnPod(t *testing.T) {
	crio, _ := testsupport.StartFakeCRI(t) // lists aws-node's own sandbox
	b := strings.TrimPrefix(crio.Endpoint(), "unix://")
	containerd := fakecri.New()
	containerd.Add(fakecri.Sandbox{Name: "buildkit-0", Namespace: "ci", IP: "172.17.0.2"})
	a := filepath.Join(filepath.Dir(b), "containerd.sock")
	require.NoError(t, containerd.Serve(a))
	t.Cleanup(containerd.Stop)

	n := startNodeOpts(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 3}, func(o *Options) {
		o.RuntimeSockets = []string{a, b}
		o.Config.Reconciler.Mode = podip.Enforce
		o.Config.Reconciler.StartDelay, o.Config.Reconciler.Interval = time.Hour, time.Hour
	})
	require.Equal(t, testsupport.AgentPodName, n.agent.opts.Config.PodName)
	for range 2 {
		rep := n.agent.recon.Pass(context.Background(), false)
		assert.Empty(t, rep.Skipped)
	}
	asked := containerd.Calls()["ListPodSandbox"]
	lists := crio.Calls()["ListPodSandbox"]
	rep := n.agent.recon.Pass(context.Background(), false)
	assert.Empty(t, rep.Skipped)
	assert.Equal(t, asked, containerd.Calls()["ListPodSandbox"], "containerd is no longer asked")
	assert.Equal(t, lists+1, crio.Calls()["ListPodSandbox"], "the pass lists CRI-O's sandboxes")
}

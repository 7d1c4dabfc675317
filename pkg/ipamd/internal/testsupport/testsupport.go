// Package testsupport holds what the tests of ipamd's packages share: a
// manual clock, a fake container runtime served over a real unix socket,
// and the awsutils client on the EC2/IMDS simulator. Only tests import it.
// It never imports the ipamd packages whose tests use it (pkg/ipamd and
// its jobs), so that each of them can.
package testsupport

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// HostSandboxID is the host-network sandbox every fake runtime lists, as a
// real node always lists aws-node's own; AgentPodName is its pod's name
// (the MY_POD_NAME of the ipamd under test).
const (
	HostSandboxID = "aws-node-host-network-sandbox"
	AgentPodName  = "aws-node-test"
)

// HostSandbox is that sandbox.
func HostSandbox() fakecri.Sandbox {
	return fakecri.Sandbox{ID: HostSandboxID, Name: AgentPodName, Namespace: "kube-system", IP: "192.0.2.10",
		State: runtimeapi.PodSandboxState_SANDBOX_READY}
}

// StartFakeCRI serves a fake runtime (listing HostSandbox) on a short
// socket path and returns it with a real CRI client connected to it.
func StartFakeCRI(t testing.TB) (*fakecri.Runtime, *cri.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	rt := fakecri.New()
	sock := filepath.Join(dir, "cri.sock")
	require.NoError(t, rt.Serve(sock))
	t.Cleanup(rt.Stop)
	rt.Add(HostSandbox())
	c, err := cri.Dial(sock, 300*time.Millisecond, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return rt, c
}

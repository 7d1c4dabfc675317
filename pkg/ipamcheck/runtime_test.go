package ipamcheck

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// Run in the aws-node container without CRI_RUNTIME_ENDPOINT on a CRI-O
// node where a containerd also lists sandboxes of its own, the check lists
// CRI-O, the runtime that lists aws-node's pod (MY_POD_NAME), as ipamd does.
func TestListSandboxesOnTheRuntimeListingOwnPod(t *testing.T) {
	dir, err := os.MkdirTemp("", "ipc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	serve := func(name, pod string) string {
		rt := fakecri.New()
		rt.Add(fakecri.Sandbox{Name: pod, Namespace: "kube-system"})
		path := filepath.Join(dir, name)
		require.NoError(t, rt.Serve(path))
		t.Cleanup(rt.Stop)
		return path
	}
	containerd, crio := serve("containerd.sock", "buildkit-0"), serve("crio.sock", "aws-node-x7k2p")
	candidates := []string{containerd, crio}

	env := map[string]string{"MY_POD_NAME": "aws-node-x7k2p"}
	o, _, ok := parseFlags(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard, Defaults{RuntimeCandidates: candidates})
	require.True(t, ok)
	list, used, err := listSandboxes(context.Background(), o.runtimeEndpoint, candidates, o.ownPod, time.Second)
	require.NoError(t, err)
	assert.Equal(t, crio, used)
	require.Len(t, list, 1)
	assert.Equal(t, "aws-node-x7k2p", list[0].Name)

	_, used, err = listSandboxes(context.Background(), "", candidates, "", time.Second)
	require.NoError(t, err)
	assert.Equal(t, containerd, used, "own pod unknown (run on the host): the first runtime that lists sandboxes")
}

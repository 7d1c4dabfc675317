package cri

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

func TestKeepsIPsAfterTeardown(t *testing.T) {
	for name, keeps := range map[string]bool{
		"cri-o":      true, // CRI-O 1.34's Version answer
		"CRI-O":      true,
		"containerd": false, // containerd 1.6 and 2.x
		"fakecri":    false,
		"":           false, // not told yet: the IPs count
		"cri-o-next": false, // an unknown runtime: the IPs count
	} {
		assert.Equalf(t, keeps, KeepsIPsAfterTeardown(name), "runtime %q", name)
	}
}

// The name the runtime gives in its Version answer is known on the client
// and the Runtime once it has answered a call, and every sandbox status
// says which runtime answered it, so the caller can judge a stopped
// sandbox's IPs by that runtime's rule.
func TestRuntimeNameFromVersion(t *testing.T) {
	for _, name := range []string{"cri-o", "containerd"} {
		t.Run(name, func(t *testing.T) {
			dir := sockDir(t)
			rt, path := serve(t, dir, "rt.sock")
			rt.SetRuntimeName(name)
			id := rt.Add(fakecri.Sandbox{Name: "job", Namespace: "default", IP: "10.0.0.7",
				State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}).ID

			c, err := Dial(path, time.Second, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			assert.Empty(t, c.RuntimeName(), "not asked before the runtime answered a call")
			st, err := c.SandboxStatus(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, name, c.RuntimeName(), "asked once the runtime answered")
			assert.Equal(t, name, st.Runtime, "a status names the runtime that answered it")
			assert.False(t, st.Ready)
			assert.Equal(t, "10.0.0.7", st.IP, "the client reports the IPs as the runtime does; judging them is the caller's")

			r := newRuntime(t, Config{Candidates: []string{path}})
			assert.Empty(t, r.RuntimeName(), "no runtime chosen yet")
			_, err = r.ListSandboxes(context.Background())
			require.NoError(t, err)
			assert.Equal(t, name, r.RuntimeName(), "the chosen runtime's name")
			st, err = r.SandboxStatus(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, name, st.Runtime)
		})
	}
}

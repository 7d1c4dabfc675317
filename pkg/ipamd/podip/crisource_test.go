package podip

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// The IPs the adapter gives a sandbox, by runtime and state: a NOTREADY
// sandbox on CRI-O, which keeps reporting the IPs its DEL released, has
// none; everywhere else (containerd, which reports none once it tore the
// network down, and any runtime not known to keep them) the IPs count as
// the runtime reports them.
func TestCRISourceStoppedSandboxIPs(t *testing.T) {
	const v4, v6 = "10.0.0.7", "2600:1f14:abc:de00::7"
	both := []netip.Addr{netip.MustParseAddr(v4), netip.MustParseAddr(v6)}
	ready, notReady := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	for _, tc := range []struct {
		runtime string
		state   runtimeapi.PodSandboxState
		want    []netip.Addr
	}{
		{"cri-o", ready, both},
		{"cri-o", notReady, nil},
		{"containerd", ready, both},
		{"containerd", notReady, both}, // still being torn down: the IPs are evidence
		{"fakecri", notReady, both},    // not known to keep them
		{"", notReady, both},           // no name: conservative
	} {
		t.Run(tc.runtime+"/"+tc.state.String(), func(t *testing.T) {
			rt, client := testsupport.StartFakeCRI(t)
			rt.SetRuntimeName(tc.runtime)
			sb := rt.Add(fakecri.Sandbox{Name: "job", Namespace: "default", State: tc.state, IP: v4, AdditionalIPs: []string{v6}})
			src := CRISource(client)
			// The reconciler asks by ID after a list, as here.
			_, err := src.ListSandboxes(context.Background())
			require.NoError(t, err)
			st, err := src.SandboxStatus(context.Background(), sb.ID)
			require.NoError(t, err)
			assert.Equal(t, tc.want, st.IPs)
			assert.Equal(t, Sandbox{ID: sb.ID, Name: "job", Namespace: "default", Ready: tc.state == ready}, st.Sandbox)
		})
	}
}

// Through the probing runtime client ipamd opens (OpenCRI), the chosen
// runtime's name decides.
func TestOpenCRIStoppedSandboxOnCRIO(t *testing.T) {
	dir := t.TempDir()
	if len(dir) > 80 {
		dir = "/tmp"
	}
	rt := fakecri.New()
	sock := filepath.Join(dir, "crio.sock")
	require.NoError(t, rt.Serve(sock))
	t.Cleanup(rt.Stop)
	rt.SetRuntimeName("cri-o")
	rt.Add(testsupport.HostSandbox())
	job := rt.Add(fakecri.Sandbox{Name: "job", Namespace: "default", IP: "10.0.0.7", State: runtimeapi.PodSandboxState_SANDBOX_READY})

	src, verifying, err := OpenCRI(Config{}, []string{sock}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	assert.True(t, verifying)
	_, err = src.ListSandboxes(context.Background())
	require.NoError(t, err)
	st, err := src.SandboxStatus(context.Background(), job.ID)
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("10.0.0.7")}, st.IPs, "READY: the IP counts")

	rt.SetState(job.ID, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	st, err = src.SandboxStatus(context.Background(), job.ID)
	require.NoError(t, err)
	assert.False(t, st.Ready)
	assert.Empty(t, st.IPs, "stopped on CRI-O: the IP it still reports was released by its DEL")
}

// The adapter carries whether a sandbox's pod asked for multi-NIC, from
// the list and from the status.
func TestCRISourceCarriesMultiNIC(t *testing.T) {
	rt, client := testsupport.StartFakeCRI(t)
	multi := rt.Add(fakecri.Sandbox{Name: "m", Namespace: "prod", State: runtimeapi.PodSandboxState_SANDBOX_READY, IP: "10.0.0.7",
		Annotations: map[string]string{cri.MultiNICAnnotation: cri.MultiNICAttachment}})
	single := rt.Add(fakecri.Sandbox{Name: "s", Namespace: "prod", State: runtimeapi.PodSandboxState_SANDBOX_READY, IP: "10.0.0.8"})
	src := CRISource(client)
	list, err := src.ListSandboxes(context.Background())
	require.NoError(t, err)
	got := map[string]bool{}
	for _, s := range list {
		got[s.ID] = s.MultiNIC
	}
	assert.True(t, got[multi.ID])
	assert.False(t, got[single.ID])
	st, err := src.SandboxStatus(context.Background(), multi.ID)
	require.NoError(t, err)
	assert.True(t, st.MultiNIC)
}

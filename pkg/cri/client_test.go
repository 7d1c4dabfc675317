package cri

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// A runtime restart deletes and recreates the socket. While it is gone the
// client's calls fail (driving gRPC's reconnect backoff up); once it is back
// a call succeeds within the short reconnect backoff, not gRPC's default of
// up to two minutes, and the runtime's name is asked again.
func TestClientReconnectsAfterRuntimeRestart(t *testing.T) {
	dir := sockDir(t)
	rt, path := serve(t, dir, "rt.sock", "a")
	c, err := Dial(path, time.Second, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	out, err := c.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, names(out))
	assert.Equal(t, fakecri.DefaultRuntimeName, c.RuntimeName())

	rt.Stop()
	down := time.Now()
	for time.Since(down) < 1500*time.Millisecond {
		_, err = c.ListSandboxes(context.Background())
		require.Error(t, err)
		assert.Equal(t, codes.Unavailable, status.Code(err), "error: %v", err)
		assert.Contains(t, err.Error(), path, "the error names the socket")
		time.Sleep(100 * time.Millisecond)
	}

	assert.Equal(t, fakecri.DefaultRuntimeName, c.RuntimeName(), "the name is kept while the runtime is away")

	rt.SetRuntimeName("cri-o") // what now serves the socket is asked again
	require.NoError(t, rt.Serve(path))
	out, took := listWithin(t, c, reconnect.Backoff.MaxDelay*2)
	assert.Equal(t, []string{"a"}, names(out))
	assert.Equal(t, "cri-o", c.RuntimeName())
	t.Logf("listed again %v after the socket came back", took)
}

// Every call, the sandbox list with its own codec included, goes out as
// exactly application/grpc: CRI-O resets a connection whose first request
// says application/grpc+proto, and the agent then never reached it.
func TestRequestsAreSentAsPlainGRPC(t *testing.T) {
	rt, path := serve(t, sockDir(t), "crio.sock", "web")
	rt.RequirePlainContentType(true)
	c, err := Dial(path, 2*time.Second, nil)
	require.NoError(t, err)
	defer c.Close()
	out, err := c.ListSandboxes(context.Background())
	require.NoError(t, err, "the first request on a fresh connection is a list")
	require.Len(t, out, 1)
	_, err = c.ListSandboxes(context.Background())
	require.NoError(t, err)
}

// A failed Version handshake leaves the runtime's name unknown and is asked
// again at the runtime's next answer: the name decides what a stopped
// sandbox's IPs prove, so one failure must not leave it unknown for good.
func TestAFailedHandshakeIsAskedAgain(t *testing.T) {
	dir := sockDir(t)
	rt, path := serve(t, dir, "rt.sock", "a")
	rt.SetRuntimeName("cri-o")
	rt.FailVersion(1, codes.Internal)
	c, err := Dial(path, time.Second, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	list, err := c.ListSandboxes(context.Background())
	require.NoError(t, err, "the list answers although the handshake failed")
	require.Len(t, list, 1)
	assert.Empty(t, c.RuntimeName(), "not known yet")

	_, err = c.SandboxStatus(context.Background(), list[0].ID)
	require.NoError(t, err)
	assert.Equal(t, "cri-o", c.RuntimeName(), "asked again at the next answer")
	assert.Equal(t, 2, rt.Calls()["Version"])
	_, err = c.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, rt.Calls()["Version"], "asked no more once known")
}

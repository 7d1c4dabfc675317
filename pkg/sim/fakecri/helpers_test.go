package fakecri

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// socketPath returns a fresh socket path short enough for a unix socket.
func socketPath(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cri.sock")
	if len(p) <= 100 {
		return p
	}
	dir, err := os.MkdirTemp("", "cri")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "cri.sock")
}

// start serves a new runtime and returns it with a connected client.
func start(t *testing.T) (*Runtime, runtimeapi.RuntimeServiceClient) {
	t.Helper()
	r := New()
	require.NoError(t, r.Serve(socketPath(t)))
	t.Cleanup(r.Stop)
	return r, dial(t, r.Endpoint())
}

func dial(t *testing.T, endpoint string) runtimeapi.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

func requireCode(t *testing.T, want codes.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, status.Code(err), "error: %v", err)
}

func ids(items []*runtimeapi.PodSandbox) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.GetId())
	}
	return out
}

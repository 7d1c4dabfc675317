package probe

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// shortDir keeps unix socket paths under the 108-byte limit.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "probe")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func serveUnix(t *testing.T, register func(*grpc.Server)) string {
	sock := filepath.Join(shortDir(t), "h.sock")
	lis, err := net.Listen("unix", sock)
	require.NoError(t, err)
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return "unix://" + sock
}

func opts(addr string) Options {
	return Options{Addr: addr, ConnectTimeout: time.Second, RPCTimeout: time.Second}
}

func TestCheckConnectsLazilyCreatedSocketFailsFast(t *testing.T) {
	// A socket that does not exist yet must not cost the whole connect
	// timeout: the entrypoint polls this way while ipamd starts.
	o := opts("unix://" + filepath.Join(shortDir(t), "none.sock"))
	o.ConnectTimeout = 5 * time.Second
	start := time.Now()
	res := Check(context.Background(), o)
	assert.Equal(t, ConnectionFailed, res.Code, "%v", res.Err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Contains(t, res.Err.Error(), "none.sock")
}

func TestCheckStatusTransitions(t *testing.T) {
	hs := health.NewServer()
	addr := serveUnix(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	o := opts(addr)
	o.Service = "svc"
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	assert.Equal(t, NotServing, Check(context.Background(), o).Code)
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	res := Check(context.Background(), o)
	assert.Equal(t, Serving, res.Code)
	assert.NoError(t, res.Err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, res.Status)
}

func TestCheckCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Check(ctx, opts("unix://"+filepath.Join(shortDir(t), "x.sock")))
	assert.Equal(t, ConnectionFailed, res.Code)
}

func TestValidate(t *testing.T) {
	assert.Error(t, Options{ConnectTimeout: 1, RPCTimeout: 1}.Validate())
	assert.Error(t, Options{Addr: "x", RPCTimeout: 1}.Validate())
	assert.Error(t, Options{Addr: "x", ConnectTimeout: 1}.Validate())
	assert.NoError(t, Options{Addr: "x", ConnectTimeout: 1, RPCTimeout: 1}.Validate())
	assert.Equal(t, BadArguments, Check(context.Background(), Options{Addr: "x"}).Code)
}

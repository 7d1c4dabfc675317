package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
)

func tempDir(t *testing.T) string {
	// Unix socket paths must stay under 108 bytes; t.TempDir() can be long.
	d, err := os.MkdirTemp("", "ghp")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// server is a real gRPC server on a unix socket.
type server struct {
	addr string
	sock string
	mu   sync.Mutex
	ua   []string
}

func (s *server) userAgents() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ua...)
}

func startServer(t *testing.T, register func(*grpc.Server)) *server {
	t.Helper()
	srv := &server{sock: filepath.Join(tempDir(t), "s.sock")}
	srv.addr = "unix://" + srv.sock
	lis, err := net.Listen("unix", srv.sock)
	require.NoError(t, err)
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		srv.mu.Lock()
		srv.ua = append(srv.ua, md.Get("user-agent")...)
		srv.mu.Unlock()
		return h(ctx, req)
	}))
	if register != nil {
		register(g)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return srv
}

// slowHealth answers only when the caller gives up.
type slowHealth struct {
	healthpb.UnimplementedHealthServer
}

func (slowHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func runProbe(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestExitCodes(t *testing.T) {
	hs := health.NewServer() // "" is SERVING by default
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthy := startServer(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	noHealth := startServer(t, nil)
	slow := startServer(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, slowHealth{}) })

	// A socket file nobody listens on any more (ipamd died, socket stayed).
	stale := filepath.Join(tempDir(t), "stale.sock")
	l, err := net.Listen("unix", stale)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())

	// A listener that accepts but never speaks HTTP/2: the connection never
	// becomes ready, so the connect timeout decides.
	mute := filepath.Join(tempDir(t), "mute.sock")
	ml, err := net.Listen("unix", mute)
	require.NoError(t, err)
	accepted := make(chan net.Conn, 16)
	t.Cleanup(func() {
		ml.Close()
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	})
	go func() {
		for {
			c, err := ml.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- c:
			default:
				c.Close()
			}
		}
	}()

	tests := []struct {
		name      string
		args      []string
		want      int
		errSubstr string
	}{
		{"serving overall", []string{"-addr", healthy.addr}, 0, ""},
		{"serving service", []string{"-addr=" + healthy.addr, "-service=up"}, 0, ""},
		{"not serving", []string{"-addr", healthy.addr, "-service", "down"}, 4, "NOT_SERVING"},
		{"unknown service", []string{"-addr", healthy.addr, "-service", "nope"}, 3, "NotFound"},
		{"unimplemented", []string{"-addr", noHealth.addr}, 3, "does not implement"},
		{"rpc deadline", []string{"-addr", slow.addr, "-rpc-timeout", "100ms"}, 3, "timed out"},
		{"no server", []string{"-addr", "unix://" + filepath.Join(tempDir(t), "missing.sock")}, 2, "missing.sock"},
		{"stale socket", []string{"-addr", "unix://" + stale}, 2, "failed to connect"},
		{"handshake never completes", []string{"-addr", "unix://" + mute, "-connect-timeout", "200ms"}, 2, "within 200ms"},
		{"missing addr", nil, 1, "-addr not specified"},
		{"zero connect timeout", []string{"-addr", healthy.addr, "-connect-timeout", "0s"}, 1, "connect-timeout"},
		{"negative rpc timeout", []string{"-addr", healthy.addr, "-rpc-timeout", "-1s"}, 1, "rpc-timeout"},
		{"unknown flag", []string{"-addr", healthy.addr, "-bogus"}, 1, "bogus"},
		{"bad duration", []string{"-addr", healthy.addr, "-rpc-timeout", "soon"}, 1, "rpc-timeout"},
		{"positional argument", []string{"-addr", healthy.addr, "extra"}, 1, "unexpected arguments"},
		{"unparsable target", []string{"-addr", "unix://%zz"}, 1, "invalid -addr"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runProbe(tc.args...)
			assert.Equal(t, tc.want, code, "stderr: %s", errOut)
			if tc.want == 0 {
				assert.Equal(t, "status: SERVING\n", out)
				assert.Empty(t, errOut)
			} else {
				assert.Contains(t, errOut, tc.errSubstr)
			}
		})
	}
}

func TestUserAgentAndVerbose(t *testing.T) {
	srv := startServer(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })
	code, _, errOut := runProbe("-addr", srv.addr, "-v")
	require.Equal(t, 0, code)
	assert.Contains(t, errOut, "parsed options")
	assert.Contains(t, errOut, "rpc phase took")
	code, _, _ = runProbe("-addr", srv.addr, "-user-agent", "kubelet-probe")
	require.Equal(t, 0, code)
	ua := srv.userAgents()
	require.Len(t, ua, 2)
	assert.True(t, strings.HasPrefix(ua[0], "grpc-health-probe"), ua[0])
	assert.True(t, strings.HasPrefix(ua[1], "kubelet-probe"), ua[1])
}

func TestTCPAddress(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	code, _, errOut := runProbe("-addr", lis.Addr().String())
	assert.Equal(t, 0, code, errOut)
}

// TestRealIpamdHealth probes the health service of a real ipamd agent (on a
// synthetic pool), the way the aws-node liveness probe does.
func TestRealIpamdHealth(t *testing.T) {
	dir := tempDir(t)
	env := map[string]string{
		"ENABLE_IPv4":                   "true",
		"IP_COOLDOWN_PERIOD":            "0",
		"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json"),
		"DISABLE_INTROSPECTION":         "true",
		"DISABLE_METRICS":               "true",
		"POD_IP_RECONCILE_MODE":         "off",
	}
	cfg, err := ipamd.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	sock := filepath.Join(dir, "ipamd.sock")
	agent, err := ipamd.NewAgent(context.Background(), ipamd.Options{
		Config: cfg, SocketPath: sock, DevPool: &devpool.Pool{ENIs: 1, PerENI: 3},
		DelQueueDir: filepath.Join(dir, "delq"), MetricsAddress: "unix:" + filepath.Join(dir, "m.sock"),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("agent did not stop")
		}
	})
	addr := "unix://" + sock
	require.Eventually(t, func() bool {
		code, _, _ := runProbe("-addr", addr)
		return code == 0
	}, 10*time.Second, 20*time.Millisecond)
	code, _, errOut := runProbe("-addr", addr, "-service", ipamd.HealthServiceName, "-connect-timeout=5s", "-rpc-timeout=5s")
	assert.Equal(t, 0, code, errOut)
}

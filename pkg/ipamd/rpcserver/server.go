package rpcserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// HealthServiceName is the service name upstream's probes and entrypoint
// may ask about; the empty service name is SERVING too.
const HealthServiceName = "grpc.health.v1.aws-node"

// MaxRequestBytes bounds a request message: real ones are a few hundred bytes.
const MaxRequestBytes = 8 << 20 // GC requests list every attachment

// ListenUnix opens the gRPC socket as upstream does: parent directory 0755,
// any stale socket removed, socket mode 0660. It never listens on TCP.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return l, nil
}

// New builds the gRPC server: the CNI backend, the config server, the
// maintenance service (GC, STATUS), the standard health service and
// reflection, as upstream's ipamd does. m holds the request metrics.
func New(o Options, m *Metrics) (*grpc.Server, *health.Server) {
	s := grpc.NewServer(serverOptions()...)
	h := newCNIHandler(o, m)
	rpc.RegisterCNIBackendServer(s, h)
	rpc.RegisterConfigServerBackendServer(s, h)
	rpc.RegisterCNIMaintenanceServer(s, newMaintenanceHandler(o, m))
	hs := health.NewServer()
	hs.SetServingStatus(HealthServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return s, hs
}

// streamWorkers is how many goroutines serve calls without being created
// for each one (more concurrent calls than this still run, each on a
// goroutine of its own).
const streamWorkers = 32

// serverOptions shape the server for its one client: the aws-cni plugin,
// which opens a connection on the local socket, makes one small call and
// closes it.
//   - Static flow-control windows of the HTTP/2 default size: with dynamic
//     windows each connection's first request DATA frame makes the server
//     send a bandwidth probe ping, a frame each way that a single call of a
//     few hundred bytes never benefits from. The default size means no
//     extra SETTINGS or WINDOW_UPDATE either.
//   - Stream workers: a call runs on a goroutine whose stack has already
//     grown instead of a fresh one growing it again on every call.
func serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.StaticStreamWindowSize(http2DefaultWindow),
		grpc.StaticConnWindowSize(http2DefaultWindow),
		grpc.NumStreamWorkers(streamWorkers),
	}
}

// http2DefaultWindow is HTTP/2's initial flow-control window (RFC 9113).
const http2DefaultWindow = 65535

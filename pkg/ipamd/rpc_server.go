package ipamd

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

// maxRequestBytes bounds a request message: real ones are a few hundred bytes.
const maxRequestBytes = 8 << 20 // GC requests list every attachment

// listenUnix opens the gRPC socket as upstream does: parent directory 0755,
// any stale socket removed, socket mode 0660. It never listens on TCP.
func listenUnix(path string) (net.Listener, error) {
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

// newGRPCServer registers the CNI backend, the config server, the standard
// health service and reflection, as upstream's ipamd does.
func newGRPCServer(h *rpcHandler, m *maintenanceHandler) (*grpc.Server, *health.Server) {
	s := grpc.NewServer(grpc.MaxRecvMsgSize(maxRequestBytes))
	rpc.RegisterCNIBackendServer(s, h)
	rpc.RegisterConfigServerBackendServer(s, h)
	rpc.RegisterCNIMaintenanceServer(s, m)
	hs := health.NewServer()
	hs.SetServingStatus(HealthServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return s, hs
}

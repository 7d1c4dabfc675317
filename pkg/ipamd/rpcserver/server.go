package rpcserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
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

// Options are what the handlers serve from. Nil funcs mean the feature is
// absent: no pool manager to wake, no reconciler to reclaim or collect
// garbage through.
type Options struct {
	Store Allocator
	Stats interface{ Stats() datastore.Stats }
	// Version is the ClientVersion requests must carry.
	Version string
	// Settings that shape replies (upstream's names).
	NetworkPolicyMode string
	EnableMultiNIC    bool
	ExternalSNAT      bool
	ExcludeSNATCIDRs  []string
	// VPCCIDRs returns the VPC IPv4 CIDRs for ADD replies.
	VPCCIDRs func() []string
	// IPv6 (ENABLE_IPv6): ADD replies carry VPCv6CIDRs instead of the IPv4
	// CIDRs and external-SNAT flag.
	IPv6       bool
	VPCv6CIDRs func() []string
	// The instance as the network-policy agent is told about it
	// (GetNetworkPolicyConfigs); empty without EC2 (a development pool).
	InstanceID, Region, NodeIPv4, NodeIPv6 string
	// Pods, when set, records each pod's address on the pod
	// (ANNOTATE_POD_IP). Its calls must not block.
	Pods PodAnnotator
	// OnExhausted is told when an ADD finds no address (it wakes the pool
	// manager, which merges wake-ups).
	OnExhausted func()
	// Reclaim frees one confirmed leaked address for an ADD that found
	// none (the pod-IP reconciler).
	Reclaim func(ctx context.Context) bool
	// GC releases allocations of network whose attachment is not in valid
	// (the reconciler's safe path); nil: GC releases nothing.
	GC func(ctx context.Context, network string, valid map[[2]string]bool) (released, deferred int)
	// Errors is upstream's awscni_ipamd_error_count, shared with the rest
	// of ipamd.
	Errors *prometheus.CounterVec
	Log    *slog.Logger
	// LogLimit bounds the warnings malformed requests log (zero: the
	// loglimit defaults, 10 lines per RPC and reason a minute).
	LogLimit loglimit.Config

	metrics  *Metrics
	warnings *loglimit.Logger
}

// complete fills what the handlers need beyond what the caller set.
func (o *Options) complete(m *Metrics) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.metrics = m
	o.warnings = loglimit.New(o.Log, o.LogLimit)
}

// New builds the gRPC server: the CNI backend, the config server, the
// maintenance service (GC, STATUS), the standard health service and
// reflection, as upstream's ipamd does. m holds the request metrics.
func New(o Options, m *Metrics) (*grpc.Server, *health.Server) {
	o.complete(m)
	s := grpc.NewServer(serverOptions()...)
	h := &cniHandler{Options: o}
	rpc.RegisterCNIBackendServer(s, h)
	rpc.RegisterConfigServerBackendServer(s, h)
	rpc.RegisterCNIMaintenanceServer(s, &maintenanceHandler{Options: o})
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

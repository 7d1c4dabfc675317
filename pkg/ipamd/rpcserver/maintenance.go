package rpcserver

import (
	"context"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// maxGCAttachments bounds a GC request (a node runs at most a few hundred
// pods).
const maxGCAttachments = 100_000

// maintenanceHandler serves rpc.CNIMaintenance: the plugin's CNI 1.1 GC and
// STATUS verbs.
type maintenanceHandler struct {
	rpc.UnimplementedCNIMaintenanceServer
	deps    Deps
	version string
	metrics *Metrics
}

func newMaintenanceHandler(o Options, m *Metrics) *maintenanceHandler {
	return &maintenanceHandler{deps: o.Deps, version: o.Version, metrics: m}
}

// GarbageCollect releases allocations of a network whose attachment the
// runtime no longer knows, through the reconciler's safe path (grace
// period, fresh sandbox list, per-pass cap, mass brake).
func (m *maintenanceHandler) GarbageCollect(ctx context.Context, in *rpc.GarbageCollectRequest) (*rpc.GarbageCollectReply, error) {
	if in.ClientVersion != m.version {
		m.metrics.invalid.WithLabelValues("GarbageCollect", "version_mismatch").Inc()
		return nil, status.Errorf(codes.FailedPrecondition, "client version %q does not match ipamd version %q", in.ClientVersion, m.version)
	}
	if reason, err := validate(field{"NetworkName", in.NetworkName, true, maxIDLen}); err != nil {
		m.metrics.invalid.WithLabelValues("GarbageCollect", reason).Inc()
		return nil, status.Errorf(codes.InvalidArgument, "GarbageCollect: %v", err)
	}
	if len(in.ValidAttachments) > maxGCAttachments {
		m.metrics.invalid.WithLabelValues("GarbageCollect", "too_many_attachments").Inc()
		return nil, status.Errorf(codes.InvalidArgument, "GarbageCollect: %d attachments, at most %d", len(in.ValidAttachments), maxGCAttachments)
	}
	valid := make(map[[2]string]bool, len(in.ValidAttachments))
	for _, a := range in.ValidAttachments {
		valid[[2]string{a.GetContainerID(), a.GetIfName()}] = true
	}
	if m.deps.GC == nil {
		return &rpc.GarbageCollectReply{}, nil
	}
	released, deferred := m.deps.GC(ctx, in.NetworkName, valid)
	return &rpc.GarbageCollectReply{Released: int32(released), Deferred: int32(deferred)}, nil
}

// PoolStatus reports the pool for the plugin's STATUS verb.
func (m *maintenanceHandler) PoolStatus(_ context.Context, in *rpc.PoolStatusRequest) (*rpc.PoolStatusReply, error) {
	if in.ClientVersion != m.version {
		return nil, status.Errorf(codes.FailedPrecondition, "client version %q does not match ipamd version %q", in.ClientVersion, m.version)
	}
	s := m.deps.Stats.Stats()
	// The reply's AvailableIPs field carries the assignable count: STATUS
	// asks whether an ADD could succeed now. An IPv6 /80 holds 2^48
	// addresses: the counts saturate instead of wrapping to 0 or below.
	return &rpc.PoolStatusReply{TotalIPs: saturate32(s.TotalIPs), AssignedIPs: saturate32(s.AssignedIPs),
		AvailableIPs: saturate32(s.AssignableIPs())}, nil
}

// saturate32 is n as an int32 field, clamped to its range.
func saturate32(n int) int32 {
	return int32(max(min(n, math.MaxInt32), math.MinInt32))
}

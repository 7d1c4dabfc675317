package rpcserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// cniHandler serves rpc.CNIBackend and rpc.ConfigServerBackend.
type cniHandler struct {
	rpc.UnimplementedCNIBackendServer
	rpc.UnimplementedConfigServerBackendServer
	deps Deps
	set  Settings
	rep  reporter
}

func newCNIHandler(o Options, m *Metrics) *cniHandler {
	return &cniHandler{deps: o.Deps, set: o.Settings, rep: newReporter(o.Observability, m)}
}

// Reasons the CNI plugin sends on DEL; anything else is counted as "other"
// so a client cannot blow up the metric's label set.
var knownDelReasons = map[string]bool{"": true, "PodDeleted": true, "SetupNSFailed": true}

func (h *cniHandler) checkVersion(rpcName, got string) error {
	if got == h.set.Version {
		return nil
	}
	h.rep.metrics.invalid.WithLabelValues(rpcName, "version_mismatch").Inc()
	return status.Errorf(codes.FailedPrecondition, "client version %q does not match ipamd version %q", got, h.set.Version)
}

func (h *cniHandler) invalid(rpcName, reason string, err error) error {
	h.rep.metrics.invalid.WithLabelValues(rpcName, reason).Inc()
	// A client can send these as fast as it likes: rate-limited per RPC
	// and reason, every one still counted by the metric above.
	h.rep.warnings.Warn(rpcName+" "+reason, "rejected malformed request", "rpc", rpcName, "reason", reason, "error", err)
	return status.Errorf(codes.InvalidArgument, "%s: %v", rpcName, err)
}

// AddNetwork gives the pod interface its address (a multi-NIC pod: one per
// managed card). As upstream, failures to
// allocate are Success=false (the plugin then fails the ADD and the runtime
// retries); a gRPC error is returned only for a refused request.
func (h *cniHandler) AddNetwork(ctx context.Context, in *rpc.AddNetworkRequest) (*rpc.AddNetworkReply, error) {
	h.rep.metrics.adds.Inc()
	if err := h.checkVersion("AddNetwork", in.ClientVersion); err != nil {
		return nil, err
	}
	fields := addFields(in)
	reply := &rpc.AddNetworkReply{NetworkPolicyMode: h.set.NetworkPolicyMode}
	if reason, err := validate(fields[:]...); err != nil {
		serr := h.invalid("AddNetwork", reason, err)
		if strings.HasPrefix(reason, missingPrefix) {
			// Upstream answers a missing container ID, interface or
			// network name with OK and Success=false, not a gRPC error.
			return reply, nil
		}
		return nil, serr
	}
	if h.deps.PodSource != nil {
		// Security groups for pods: the pod is looked up before the
		// datastore, and a branch pod never reaches it.
		branch, cause, err := h.addBranch(ctx, in, reply)
		if cause != nil {
			h.reportAddFailure(ctx, in, "", *cause, err)
			return reply, nil
		}
		if branch {
			h.succeed(reply, in)
			return reply, nil
		}
	}
	if in.RequiresMultiNICAttachment && !h.set.EnableMultiNIC {
		h.rep.log.Error("multi-NIC attachment requested but ENABLE_MULTI_NIC is off", "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME)
		return reply, nil
	}
	key := datastore.IPAMKey{NetworkName: in.NetworkName, ContainerID: in.ContainerID, IfName: in.IfName}
	meta := datastore.IPAMMetadata{K8SPodNamespace: in.K8S_POD_NAMESPACE, K8SPodName: in.K8S_POD_NAME, InterfacesCount: 1}
	var err error
	if in.RequiresMultiNICAttachment {
		reply.IPAllocationMetadata, err = h.assignEach(ctx, in, key, meta)
	} else {
		reply.IPAllocationMetadata, err = h.assignOne(ctx, in, key, meta)
	}
	if err != nil {
		h.addFailed(ctx, in, key, err)
		return reply, nil
	}
	h.succeed(reply, in)
	return reply, nil
}

// assignOne gives a single-IP pod its address (card 0's, or the next
// card's when a card has none free), as the reply carries it.
func (h *cniHandler) assignOne(ctx context.Context, in *rpc.AddNetworkRequest, key datastore.IPAMKey, meta datastore.IPAMMetadata) ([]*rpc.IPAllocationMetadata, error) {
	alloc, err := h.deps.Store.Assign(key, meta)
	if errors.Is(err, datastore.ErrNoAvailableIP) && h.exhausted(ctx) {
		alloc, err = h.deps.Store.Assign(key, meta)
	}
	if err != nil {
		return nil, err
	}
	h.logAssigned(ctx, in, key, alloc)
	return []*rpc.IPAllocationMetadata{allocationMetadata(alloc)}, nil
}

// assignEach gives a multi-NIC pod one address per managed card, as the
// reply carries them: one entry per card, in card order (the plugin sets
// up one interface for each, the first as the pod's eth0).
func (h *cniHandler) assignEach(ctx context.Context, in *rpc.AddNetworkRequest, key datastore.IPAMKey, meta datastore.IPAMMetadata) ([]*rpc.IPAllocationMetadata, error) {
	allocs, err := h.deps.Store.AssignEach(key, meta)
	if errors.Is(err, datastore.ErrNoAvailableIP) && h.exhausted(ctx) {
		allocs, err = h.deps.Store.AssignEach(key, meta)
	}
	if err != nil {
		return nil, err
	}
	mds := make([]*rpc.IPAllocationMetadata, len(allocs))
	for i, a := range allocs {
		h.logAssigned(ctx, in, key, a)
		mds[i] = allocationMetadata(a)
	}
	return mds, nil
}

func (h *cniHandler) logAssigned(ctx context.Context, in *rpc.AddNetworkRequest, key datastore.IPAMKey, a datastore.Allocation) {
	if h.rep.log.Enabled(ctx, slog.LevelDebug) {
		h.rep.log.Debug("AddNetwork assigned", "key", key.String(), "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME,
			"ip", a.IP.String(), "eni", a.ENIID, "networkCard", a.NetworkCard)
	}
}

// succeed completes the reply of an ADD whose addresses are in it (from
// the datastores or a branch pod's annotation): the VPC's CIDRs of the
// family, SNAT, and (ANNOTATE_POD_IP) the first address on the pod (a
// multi-NIC pod's card 0 address).
func (h *cniHandler) succeed(reply *rpc.AddNetworkReply, in *rpc.AddNetworkRequest) {
	reply.Success = true
	if h.set.IPv6 {
		if h.set.VPCv6CIDRs != nil {
			reply.VPCv6CIDRs = h.set.VPCv6CIDRs()
		}
	} else {
		reply.UseExternalSNAT = h.set.ExternalSNAT
		reply.VPCv4CIDRs = h.replyCIDRs()
	}
	if h.deps.Pods != nil && in.K8S_POD_NAME != "" {
		h.deps.Pods.Assigned(in.K8S_POD_NAMESPACE, in.K8S_POD_NAME, address(reply.IPAllocationMetadata[0]))
	}
}

// replyCIDRs are the VPC's IPv4 CIDRs and, unless SNAT is external, the
// SNAT exclusions, as upstream's ADD reply carries them.
func (h *cniHandler) replyCIDRs() []string {
	var out []string
	if h.set.VPCCIDRs != nil {
		out = append(out, h.set.VPCCIDRs()...)
	}
	if !h.set.ExternalSNAT {
		out = append(out, h.set.ExcludeSNATCIDRs...)
	}
	return out
}

// DelNetwork releases the pod interface's addresses, on every card that
// holds one, and replies with each in card order. An unknown key is, as
// upstream, a plain error (gRPC code Unknown) whose text carries
// "datastore: unknown pod", which the plugin (ours and upstream's) treats
// as nothing to do.
func (h *cniHandler) DelNetwork(ctx context.Context, in *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	reason := in.Reason
	if !knownDelReasons[reason] {
		reason = "other"
	}
	h.rep.metrics.dels.WithLabelValues(reason).Inc()
	if err := h.checkVersion("DelNetwork", in.ClientVersion); err != nil {
		return nil, err
	}
	fields := delFields(in)
	if reason, err := validate(fields[:]...); err != nil {
		return nil, h.invalid("DelNetwork", reason, err)
	}
	key := datastore.IPAMKey{NetworkName: in.NetworkName, ContainerID: in.ContainerID, IfName: in.IfName}
	allocs, err := h.deps.Store.Release(key)
	unknown := len(allocs) == 0 && errors.Is(err, datastore.ErrUnknownPod)
	switch {
	case unknown && h.deps.PodSource != nil:
		return h.delUnknown(ctx, in)
	case unknown:
		h.rep.log.Info("DelNetwork for unknown key", "key", key.String(), "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME)
		return nil, status.Error(codes.Unknown, datastore.ErrUnknownPod.Error())
	}
	mds := make([]*rpc.IPAllocationMetadata, len(allocs))
	for i, a := range allocs {
		if h.rep.log.Enabled(ctx, slog.LevelDebug) {
			h.rep.log.Debug("DelNetwork released", "key", key.String(), "ip", a.IP.String(), "networkCard", a.NetworkCard, "reason", in.Reason)
		}
		mds[i] = allocationMetadata(a)
	}
	if len(allocs) > 0 {
		h.podReleased(in, allocs[0], mds[0])
	}
	if err != nil {
		// A card that could not record its release: the others are
		// released; the plugin's DEL queue (ours) or the reconciler
		// (upstream's plugin reports success) frees the rest.
		h.rep.errors.WithLabelValues("DelNetwork").Inc()
		h.rep.log.Error("DelNetwork failed", "key", key.String(), "released", len(allocs), "error", err)
		return nil, status.Errorf(codes.Unavailable, "release %s: %v", key, err)
	}
	return &rpc.DelNetworkReply{
		Success:              true,
		IPAllocationMetadata: mds,
		NetworkPolicyMode:    h.set.NetworkPolicyMode,
	}, nil
}

// podReleased clears the pod's address annotation (ANNOTATE_POD_IP) if it
// still names the first address released, the one an ADD put there.
func (h *cniHandler) podReleased(in *rpc.DelNetworkRequest, first datastore.Allocation, md *rpc.IPAllocationMetadata) {
	if h.deps.Pods == nil {
		return
	}
	ns, name := in.K8S_POD_NAMESPACE, in.K8S_POD_NAME
	if name == "" {
		ns, name = first.Metadata.K8SPodNamespace, first.Metadata.K8SPodName
	}
	if name != "" {
		h.deps.Pods.Released(ns, name, address(md))
	}
}

// GetNetworkPolicyConfigs answers the network-policy agent.
func (h *cniHandler) GetNetworkPolicyConfigs(context.Context, *emptypb.Empty) (*rpc.NetworkPolicyAgentConfigReply, error) {
	return &rpc.NetworkPolicyAgentConfigReply{
		NetworkPolicyMode: h.set.NetworkPolicyMode,
		MultiNICEnabled:   h.set.EnableMultiNIC,
		NodeIPv4:          h.set.NodeIPv4,
		NodeIPv6:          h.set.NodeIPv6,
		InstanceID:        h.set.InstanceID,
		Region:            h.set.Region,
	}, nil
}

// allocationMetadata is one allocation as replies carry it: the address in
// IPv4Addr, or in IPv6Addr for an IPv6 pod (IPv4Addr then empty, as
// upstream).
func allocationMetadata(a datastore.Allocation) *rpc.IPAllocationMetadata {
	md := &rpc.IPAllocationMetadata{DeviceNumber: int32(a.DeviceNumber), RouteTableId: int32(a.RouteTableID)}
	if a.IP.Is6() && !a.IP.Is4In6() {
		md.IPv6Addr = a.IP.String()
	} else {
		md.IPv4Addr = a.IP.String()
	}
	return md
}

// address is the one address md carries.
func address(md *rpc.IPAllocationMetadata) string {
	if md.IPv4Addr != "" {
		return md.IPv4Addr
	}
	return md.IPv6Addr
}

// exhausted handles an assign that found no address: the pool manager is
// woken at once, and if the reconciler holds a confirmed leak it is freed
// for this ADD (with the reconciler's own checks); true: the assign may be
// retried.
func (h *cniHandler) exhausted(ctx context.Context) bool {
	if h.deps.OnExhausted != nil {
		h.deps.OnExhausted()
	}
	return h.deps.Reclaim != nil && h.deps.Reclaim(ctx)
}

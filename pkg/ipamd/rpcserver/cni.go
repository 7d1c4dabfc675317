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

// Allocator is the part of the datastore the CNI handlers need.
type Allocator interface {
	Assign(datastore.IPAMKey, datastore.IPAMMetadata) (datastore.Allocation, error)
	Release(datastore.IPAMKey) (datastore.Allocation, error)
}

// PodAnnotator records a pod's address on the pod object (upstream's
// ANNOTATE_POD_IP). Both calls return at once: the API server is reached
// in the background, so an ADD or DEL never waits on it or fails by it.
type PodAnnotator interface {
	// Assigned sets the pod's address after a successful ADD.
	Assigned(namespace, name, ip string)
	// Released clears it after a DEL, if it still names ip.
	Released(namespace, name, ip string)
}

// cniHandler serves rpc.CNIBackend and rpc.ConfigServerBackend.
type cniHandler struct {
	rpc.UnimplementedCNIBackendServer
	rpc.UnimplementedConfigServerBackendServer
	Options
}

// Reasons the CNI plugin sends on DEL; anything else is counted as "other"
// so a client cannot blow up the metric's label set.
var knownDelReasons = map[string]bool{"": true, "PodDeleted": true, "SetupNSFailed": true}

func (h *cniHandler) checkVersion(rpcName, got string) error {
	if got == h.Version {
		return nil
	}
	h.metrics.invalid.WithLabelValues(rpcName, "version_mismatch").Inc()
	return status.Errorf(codes.FailedPrecondition, "client version %q does not match ipamd version %q", got, h.Version)
}

func (h *cniHandler) invalid(rpcName, reason string, err error) error {
	h.metrics.invalid.WithLabelValues(rpcName, reason).Inc()
	// A client can send these as fast as it likes: rate-limited per RPC
	// and reason, every one still counted by the metric above.
	h.warnings.Warn(rpcName+" "+reason, "rejected malformed request", "rpc", rpcName, "reason", reason, "error", err)
	return status.Errorf(codes.InvalidArgument, "%s: %v", rpcName, err)
}

// AddNetwork gives the pod interface an address. As upstream, failures to
// allocate are Success=false (the plugin then fails the ADD and the runtime
// retries); a gRPC error is returned only for a refused request.
func (h *cniHandler) AddNetwork(ctx context.Context, in *rpc.AddNetworkRequest) (*rpc.AddNetworkReply, error) {
	h.metrics.adds.Inc()
	if err := h.checkVersion("AddNetwork", in.ClientVersion); err != nil {
		return nil, err
	}
	fields := addFields(in)
	reply := &rpc.AddNetworkReply{NetworkPolicyMode: h.NetworkPolicyMode}
	if reason, err := validate(fields[:]...); err != nil {
		serr := h.invalid("AddNetwork", reason, err)
		if strings.HasPrefix(reason, missingPrefix) {
			// Upstream answers a missing container ID, interface or
			// network name with OK and Success=false, not a gRPC error.
			return reply, nil
		}
		return nil, serr
	}
	if in.RequiresMultiNICAttachment && !h.EnableMultiNIC {
		h.Log.Error("multi-NIC attachment requested but ENABLE_MULTI_NIC is off", "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME)
		return reply, nil
	}
	key := datastore.IPAMKey{NetworkName: in.NetworkName, ContainerID: in.ContainerID, IfName: in.IfName}
	// One interface per pod: multi-NIC pods are refused above (and at start).
	meta := datastore.IPAMMetadata{K8SPodNamespace: in.K8S_POD_NAMESPACE, K8SPodName: in.K8S_POD_NAME, InterfacesCount: 1}
	alloc, err := h.Store.Assign(key, meta)
	if errors.Is(err, datastore.ErrNoAvailableIP) {
		alloc, err = h.assignExhausted(ctx, key, meta, err)
	}
	if err != nil {
		if errors.Is(err, datastore.ErrNoAvailableIP) {
			h.metrics.noIP.Inc()
		} else {
			h.Errors.WithLabelValues("AddNetwork").Inc()
		}
		h.Log.Error("AddNetwork failed", "key", key.String(), "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME, "error", err)
		return reply, nil
	}
	if h.Log.Enabled(ctx, slog.LevelDebug) {
		h.Log.Debug("AddNetwork assigned", "key", key.String(), "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME, "ip", alloc.IP.String(), "eni", alloc.ENIID)
	}
	md := allocationMetadata(alloc)
	reply.Success = true
	reply.IPAllocationMetadata = []*rpc.IPAllocationMetadata{md}
	if h.IPv6 {
		if h.VPCv6CIDRs != nil {
			reply.VPCv6CIDRs = h.VPCv6CIDRs()
		}
	} else {
		reply.UseExternalSNAT = h.ExternalSNAT
		reply.VPCv4CIDRs = h.replyCIDRs()
	}
	if h.Pods != nil && in.K8S_POD_NAME != "" {
		h.Pods.Assigned(in.K8S_POD_NAMESPACE, in.K8S_POD_NAME, address(md))
	}
	return reply, nil
}

// replyCIDRs are the VPC's IPv4 CIDRs and, unless SNAT is external, the
// SNAT exclusions, as upstream's ADD reply carries them.
func (h *cniHandler) replyCIDRs() []string {
	var out []string
	if h.VPCCIDRs != nil {
		out = append(out, h.VPCCIDRs()...)
	}
	if !h.ExternalSNAT {
		out = append(out, h.ExcludeSNATCIDRs...)
	}
	return out
}

// DelNetwork releases the pod interface's address. An unknown key is, as
// upstream, a plain error (gRPC code Unknown) whose text carries
// "datastore: unknown pod", which the plugin (ours and upstream's) treats
// as nothing to do.
func (h *cniHandler) DelNetwork(ctx context.Context, in *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	reason := in.Reason
	if !knownDelReasons[reason] {
		reason = "other"
	}
	h.metrics.dels.WithLabelValues(reason).Inc()
	if err := h.checkVersion("DelNetwork", in.ClientVersion); err != nil {
		return nil, err
	}
	fields := delFields(in)
	if reason, err := validate(fields[:]...); err != nil {
		return nil, h.invalid("DelNetwork", reason, err)
	}
	key := datastore.IPAMKey{NetworkName: in.NetworkName, ContainerID: in.ContainerID, IfName: in.IfName}
	alloc, err := h.Store.Release(key)
	switch {
	case errors.Is(err, datastore.ErrUnknownPod):
		h.Log.Info("DelNetwork for unknown key", "key", key.String(), "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME)
		return nil, status.Error(codes.Unknown, datastore.ErrUnknownPod.Error())
	case err != nil:
		h.Errors.WithLabelValues("DelNetwork").Inc()
		h.Log.Error("DelNetwork failed", "key", key.String(), "error", err)
		return nil, status.Errorf(codes.Unavailable, "release %s: %v", key, err)
	}
	if h.Log.Enabled(ctx, slog.LevelDebug) {
		h.Log.Debug("DelNetwork released", "key", key.String(), "ip", alloc.IP.String(), "reason", in.Reason)
	}
	md := allocationMetadata(alloc)
	if h.Pods != nil {
		ns, name := in.K8S_POD_NAMESPACE, in.K8S_POD_NAME
		if name == "" {
			ns, name = alloc.Metadata.K8SPodNamespace, alloc.Metadata.K8SPodName
		}
		if name != "" {
			h.Pods.Released(ns, name, address(md))
		}
	}
	return &rpc.DelNetworkReply{
		Success:              true,
		IPAllocationMetadata: []*rpc.IPAllocationMetadata{md},
		NetworkPolicyMode:    h.NetworkPolicyMode,
	}, nil
}

// GetNetworkPolicyConfigs answers the network-policy agent.
func (h *cniHandler) GetNetworkPolicyConfigs(context.Context, *emptypb.Empty) (*rpc.NetworkPolicyAgentConfigReply, error) {
	return &rpc.NetworkPolicyAgentConfigReply{
		NetworkPolicyMode: h.NetworkPolicyMode,
		MultiNICEnabled:   h.EnableMultiNIC,
		NodeIPv4:          h.NodeIPv4,
		NodeIPv6:          h.NodeIPv6,
		InstanceID:        h.InstanceID,
		Region:            h.Region,
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

// assignExhausted handles an ADD that found no address: the pool manager is
// woken at once, and if the reconciler holds a confirmed leak it is freed
// for this ADD (with the reconciler's own checks) and the assign retried.
func (h *cniHandler) assignExhausted(ctx context.Context, key datastore.IPAMKey, meta datastore.IPAMMetadata, err error) (datastore.Allocation, error) {
	if h.OnExhausted != nil {
		h.OnExhausted()
	}
	if h.Reclaim == nil || !h.Reclaim(ctx) {
		return datastore.Allocation{}, err
	}
	return h.Store.Assign(key, meta)
}

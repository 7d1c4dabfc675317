package rpcserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podeni"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// Causes of an ADD refused by the security-groups-for-pods step, worded
// and reported as the pool's causes (addfail): the reply's trailer, the
// counter, the log and the pod's Warning event.
const (
	// The pod could not be read (ENABLE_POD_ENI looks every pod up).
	PodLookupFailed addfail.Reason = "pod_lookup_failed"
	// A branch pod, and the node has no trunk ENI yet.
	TrunkENIMissing addfail.Reason = "trunk_eni_missing"
	// A branch pod the VPC resource controller has not annotated yet.
	BranchENIPending addfail.Reason = "branch_eni_pending"
	// A branch pod whose annotation cannot be used.
	BranchENIInvalid addfail.Reason = "branch_eni_annotation_invalid"
)

// BranchReasons lists the causes above, for pre-created counters and docs.
var BranchReasons = []addfail.Reason{PodLookupFailed, TrunkENIMissing, BranchENIPending, BranchENIInvalid}

// errNoTrunkSource: ENABLE_POD_ENI without a way to find the trunk.
var errNoTrunkSource = errors.New("ipamd has no trunk ENI link to offer")

// addBranch is the security-groups-for-pods step of an ADD, taken before
// the datastore is touched: the pod is looked up (every pod, as upstream),
// and a pod that asks for a branch ENI gets reply filled from its
// annotation. branch false: a regular pod, the datastore answers. A
// non-nil cause: the ADD fails with it.
func (h *cniHandler) addBranch(ctx context.Context, in *rpc.AddNetworkRequest, reply *rpc.AddNetworkReply) (branch bool, cause *addfail.Cause, err error) {
	src := h.deps.PodSource
	pod, err := src.Get(ctx, in.K8S_POD_NAMESPACE, in.K8S_POD_NAME)
	if apierrors.IsNotFound(err) {
		// The API server has no such pod (a static pod before its mirror,
		// one deleted meanwhile): nothing asks it a branch ENI, so the pool
		// serves it, where upstream fails the ADD.
		h.rep.log.Info("AddNetwork for a pod the API server does not have: served from the pool", "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME)
		return false, nil, nil
	}
	if err != nil {
		c := causeLine(PodLookupFailed, "ipamd could not read the pod, which ENABLE_POD_ENI needs for every pod", err,
			"the runtime retries the ADD")
		return false, &c, err
	}
	if !podeni.WantsBranch(pod) {
		return false, nil, nil
	}
	link, err := h.trunkLink()
	if err != nil {
		c := causeLine(TrunkENIMissing, "the pod asks for a branch ENI and the node has no trunk ENI yet", err,
			"ipamd asks for one through the node's CNINode; the runtime retries the ADD")
		return true, &c, err
	}
	// The reply comes from the pod as the API server has it now: the cache
	// may be a moment behind the controller's annotation, or still hold an
	// earlier pod of that name (a StatefulSet's, recreated) with its
	// branch. One read per branch ADD; the cached pod if it fails.
	if fresh, ferr := src.Fresh(ctx, in.K8S_POD_NAMESPACE, in.K8S_POD_NAME); ferr == nil {
		pod = fresh
	}
	r, err := podeni.DecideAdd(pod, h.set.IPv6, link)
	switch {
	case errors.Is(err, podeni.ErrNotAnnotated):
		c := causeLine(BranchENIPending, "the pod's branch ENI is not attached yet", err,
			"the VPC resource controller annotates the pod once it is; the runtime retries the ADD")
		return true, &c, err
	case err != nil:
		c := causeLine(BranchENIInvalid, "the pod's branch ENI annotation cannot be used", err, "the runtime retries the ADD")
		return true, &c, err
	}
	reply.PodVlanId, reply.PodENIMAC, reply.PodENISubnetGW, reply.ParentIfIndex = r.VLANID, r.MAC, r.Gateway, r.ParentIfIndex
	reply.IPAllocationMetadata = []*rpc.IPAllocationMetadata{{IPv4Addr: r.IPv4, IPv6Addr: r.IPv6, DeviceNumber: -1, RouteTableId: 0}}
	return true, nil, nil
}

func (h *cniHandler) trunkLink() (int, error) {
	if h.deps.TrunkLink == nil {
		return 0, errNoTrunkSource
	}
	return h.deps.TrunkLink()
}

// delUnknown answers, with ENABLE_POD_ENI, the DEL of a pod the datastore
// does not know, as upstream: a pod the API server no longer has needs
// nothing (success); a pod of that name with another UID is an error; a
// branch pod gets its VLAN and address from its annotation; any other pod
// is the usual unknown pod.
func (h *cniHandler) delUnknown(ctx context.Context, in *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	pod, err := h.deps.PodSource.Get(ctx, in.K8S_POD_NAMESPACE, in.K8S_POD_NAME)
	switch {
	case apierrors.IsNotFound(err):
		h.rep.log.Info("DelNetwork for a pod that no longer exists: nothing to release", "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME)
		return &rpc.DelNetworkReply{Success: true}, nil
	case err != nil:
		h.rep.log.Warn("DelNetwork for unknown key: the pod could not be read", "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME, "error", err)
		return nil, status.Errorf(codes.Unavailable, "the datastore does not know the pod and the pod could not be read: %v", err)
	}
	r, ok, err := podeni.DecideDel(pod, in.K8S_POD_UID)
	switch {
	case err != nil:
		h.rep.log.Warn("DelNetwork for unknown key refused", "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME, "error", err)
		return nil, status.Error(codes.Unknown, err.Error())
	case !ok:
		h.rep.log.Info("DelNetwork for unknown key", "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME)
		return nil, status.Error(codes.Unknown, datastore.ErrUnknownPod.Error())
	}
	h.rep.log.Info("DelNetwork for a branch ENI pod: answered from its annotation", "pod", in.K8S_POD_NAMESPACE+"/"+in.K8S_POD_NAME, "vlan", r.VLANID)
	return &rpc.DelNetworkReply{Success: true, PodVlanId: r.VLANID,
		IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: r.IPv4}}}, nil
}

// causeLine words a cause as addfail does: "<reason>: <phrase> (<detail>); <next>".
func causeLine(r addfail.Reason, phrase string, err error, next string) addfail.Cause {
	detail := strings.Join(strings.Fields(err.Error()), " ")
	return addfail.Cause{Reason: r, Line: fmt.Sprintf("%s: %s (%s); %s", r, phrase, detail, next)}
}

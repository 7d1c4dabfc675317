package rpcserver

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// AddFailureTrailer is the gRPC trailer of an AddNetwork reply with
// Success=false that carries the one-line cause (addfail). The reply
// itself is upstream's, so upstream's plugin, which ignores trailers,
// works as before; ours puts the line in the CNI error the kubelet shows.
const AddFailureTrailer = "aws-vpc-cni-add-failure"

// addFailed explains an ADD that got no address: the one cause goes to
// the reply's trailer, the log, awscni_ipamd_add_failures_total and,
// rate-limited, a Warning event on the pod.
func (h *cniHandler) addFailed(ctx context.Context, in *rpc.AddNetworkRequest, key datastore.IPAMKey, err error) {
	var c addfail.Cause
	var onCard *cards.CardError
	switch {
	case errors.Is(err, datastore.ErrNoAvailableIP) && in.RequiresMultiNICAttachment &&
		errors.As(err, &onCard) && onCard.Card > 0:
		// A multi-NIC pod needs an address on every card: the one that
		// had none is explained, and named.
		h.rep.metrics.noIP.Inc()
		c = h.explainCard(onCard.Card).OnCard(onCard.Card)
	case errors.Is(err, datastore.ErrNoAvailableIP):
		h.rep.metrics.noIP.Inc()
		c = h.explain()
	default:
		h.rep.errors.WithLabelValues("AddNetwork").Inc()
		c = addfail.Failed(err)
	}
	h.reportAddFailure(ctx, in, key.String(), c, err)
}

// reportAddFailure sends and records the cause of a failed ADD: the
// reply's trailer, the log, awscni_ipamd_add_failures_total and,
// rate-limited, a Warning event on the pod. key is "" for a failure
// before the datastore.
func (h *cniHandler) reportAddFailure(ctx context.Context, in *rpc.AddNetworkRequest, key string, c addfail.Cause, err error) {
	h.rep.metrics.addFailures.WithLabelValues(string(c.Reason)).Inc()
	// A trailer that cannot be set (the stream is gone) changes nothing.
	_ = grpc.SetTrailer(ctx, metadata.Pairs(AddFailureTrailer, headerSafe(c.Line)))
	pod := in.K8S_POD_NAMESPACE + "/" + in.K8S_POD_NAME
	h.rep.log.Error("AddNetwork failed", "key", key, "pod", pod, "reason", string(c.Reason), "cause", c.Line, "error", err)
	if h.deps.Warn != nil && in.K8S_POD_NAME != "" {
		h.deps.Warn.AddFailed(in.K8S_POD_NAMESPACE, in.K8S_POD_NAME, string(c.Reason), c.Line)
	}
}

func (h *cniHandler) explain() addfail.Cause {
	if h.deps.Explain != nil {
		return h.deps.Explain()
	}
	var s datastore.Stats
	if h.deps.Stats != nil {
		s = h.deps.Stats.Stats()
	}
	return explainFigures(s)
}

// explainCard says why network card card had no address.
func (h *cniHandler) explainCard(card int) addfail.Cause {
	if h.deps.ExplainCard != nil {
		return h.deps.ExplainCard(card)
	}
	var s datastore.Stats
	if h.deps.Stats != nil {
		s, _ = h.deps.Stats.CardStats(card)
	}
	return explainFigures(s)
}

// explainFigures is the cause from a pool's figures alone, when nothing
// else about it is known.
func explainFigures(s datastore.Stats) addfail.Cause {
	st := addfail.State{Now: time.Now(), Growth: addfail.Growth{SubnetFree: -1},
		Total: s.TotalIPs, Assigned: s.AssignedIPs, Cooling: s.CooldownIPs, Pending: s.PendingIPs}
	return addfail.Explain(st)
}

// headerSafe keeps a trailer value to printable ASCII, which HTTP/2
// header values must be.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

package podip

import (
	"context"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// eventBatch collects node events while the reconciler holds its lock; they
// are posted after it is released, so a slow API server never delays a
// pass, an ADD or introspection.
type eventBatch []queuedEvent

type queuedEvent struct {
	warning              bool
	reason, action, note string
	podNS, podName       string // the pod the event is about, if any
}

// podEventPoster posts an event with a pod as its related object, so that
// events about different pods stay separate (k8sapi.NodeEvents).
type podEventPoster interface {
	NormalForPod(ctx context.Context, namespace, name, reason, action, note string) bool
}

func (b *eventBatch) warning(reason, action, note string) {
	*b = append(*b, queuedEvent{warning: true, reason: reason, action: action, note: note})
}

// normalForPod is normal about one pod (a reclaim, a leak report).
func (b *eventBatch) normalForPod(m datastore.IPAMMetadata, reason, action, note string) {
	*b = append(*b, queuedEvent{reason: reason, action: action, note: note, podNS: m.K8SPodNamespace, podName: m.K8SPodName})
}

// post sends the events in order. Call it without holding r.run or r.mu.
func (b *eventBatch) post(ctx context.Context, to EventPoster) {
	for _, e := range *b {
		pp, byPod := to.(podEventPoster)
		switch {
		case e.warning:
			to.Warning(ctx, e.reason, e.action, e.note)
		case byPod && e.podName != "":
			pp.NormalForPod(ctx, e.podNS, e.podName, e.reason, e.action, e.note)
		default:
			to.Normal(ctx, e.reason, e.action, e.note)
		}
	}
	*b = nil
}

func podRef(m datastore.IPAMMetadata) string {
	if m.K8SPodName == "" {
		return "unknown pod"
	}
	return m.K8SPodNamespace + "/" + m.K8SPodName
}

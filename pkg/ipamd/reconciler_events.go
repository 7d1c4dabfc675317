package ipamd

import "context"

// eventBatch collects node events while the reconciler holds its lock; they
// are posted after it is released, so a slow API server never delays a
// pass, an ADD or introspection.
type eventBatch []queuedEvent

type queuedEvent struct {
	warning              bool
	reason, action, note string
}

func (b *eventBatch) warning(reason, action, note string) {
	*b = append(*b, queuedEvent{warning: true, reason: reason, action: action, note: note})
}

func (b *eventBatch) normal(reason, action, note string) {
	*b = append(*b, queuedEvent{reason: reason, action: action, note: note})
}

// post sends the events in order. Call it without holding r.mu.
func (b *eventBatch) post(ctx context.Context, to eventPoster) {
	for _, e := range *b {
		if e.warning {
			to.Warning(ctx, e.reason, e.action, e.note)
		} else {
			to.Normal(ctx, e.reason, e.action, e.note)
		}
	}
	*b = nil
}

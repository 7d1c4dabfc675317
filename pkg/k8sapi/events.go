package k8sapi

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ReportingController names aws-node as the source of its events.
const ReportingController = "aws-node"

// NodeEvents posts events about this node (events.k8s.io/v1 in the
// "default" namespace, where node events live). Each reason is
// rate-limited; with no client it only logs.
type NodeEvents struct {
	client   kubernetes.Interface // nil: log only
	node     string
	instance string // reporting instance, e.g. the aws-node pod name
	minGap   time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	last    map[string]time.Time
	lastSeq int64
}

// seq returns a strictly increasing number derived from the clock, so two
// events in the same nanosecond still get distinct names.
func (e *NodeEvents) seq(now time.Time) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastSeq = max(e.lastSeq+1, now.UnixNano())
	return e.lastSeq
}

// NewNodeEvents returns an event poster for node. client may be nil.
func NewNodeEvents(client kubernetes.Interface, node, instance string, minGap time.Duration, log *slog.Logger) *NodeEvents {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &NodeEvents{client: client, node: node, instance: instance, minGap: minGap, log: log, now: time.Now, last: map[string]time.Time{}}
}

// Warning posts a Warning event unless the same reason was posted less than
// the minimum gap ago. It reports whether an event was posted.
func (e *NodeEvents) Warning(ctx context.Context, reason, action, note string) bool {
	return e.post(ctx, corev1.EventTypeWarning, reason, action, note, true)
}

// Normal posts a Normal event; per-item events (one per reclaimed address)
// are not rate-limited.
func (e *NodeEvents) Normal(ctx context.Context, reason, action, note string) bool {
	return e.post(ctx, corev1.EventTypeNormal, reason, action, note, false)
}

func (e *NodeEvents) post(ctx context.Context, typ, reason, action, note string, limit bool) bool {
	now := e.now()
	if limit {
		e.mu.Lock()
		if last, ok := e.last[reason]; ok && now.Sub(last) < e.minGap {
			e.mu.Unlock()
			return false
		}
		e.last[reason] = now
		e.mu.Unlock()
	}
	e.log.Info("node event", "type", typ, "reason", reason, "note", note)
	if e.client == nil || e.node == "" {
		return true
	}
	ev := &eventsv1.Event{
		// Named like kubelet names events: object name, a dot, a hex timestamp.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", e.node, e.seq(now)), Namespace: metav1.NamespaceDefault},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: ReportingController,
		ReportingInstance:   e.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           corev1.ObjectReference{Kind: "Node", Name: e.node, APIVersion: "v1"},
		Note:                truncate(note, 1024),
		Type:                typ,
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := e.client.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		e.log.Warn("could not post node event", "reason", reason, "error", err)
		return false
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...", s[:n-3])
}

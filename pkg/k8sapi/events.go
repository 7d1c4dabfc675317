package k8sapi

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// ReportingController names aws-node as the source of its events.
const ReportingController = "aws-node"

// maxNoteBytes is the API server's limit on an event's note.
const maxNoteBytes = 1024

// NodeEvents posts events about this node: events.k8s.io/v1, regarding the
// Node, in the "default" namespace (where the recorder puts events about
// cluster-scoped objects). Posting goes through client-go's event
// broadcaster, so it never blocks the caller on the API server, and
// repeats of an event (same type, reason and action) within a few minutes
// become one event with a series count instead of new objects; a series
// keeps its first note, every note is logged. Warnings are also limited
// per reason. With no client it only logs.
type NodeEvents struct {
	node   string
	minGap time.Duration
	log    *slog.Logger
	now    func() time.Time

	// nil without a client or node name: log only.
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
	cancel      context.CancelFunc
	stopped     atomic.Bool
	stopOnce    sync.Once

	mu   sync.Mutex
	last map[string]time.Time // reason -> last Warning posted
}

// NewNodeEvents returns an event poster for node, reporting as instance
// (e.g. the aws-node pod name). client may be nil. Call Stop when done.
func NewNodeEvents(client kubernetes.Interface, node, instance string, minGap time.Duration, log *slog.Logger) *NodeEvents {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &NodeEvents{node: node, minGap: minGap, log: log, now: time.Now, last: map[string]time.Time{}}
	if client == nil || node == "" {
		return e
	}
	sink := &nodeEventSink{sink: &events.EventSinkImpl{Interface: client.EventsV1()}, instance: instance, log: log}
	ctx, cancel := context.WithCancel(context.Background())
	b := events.NewBroadcaster(sink)
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		cancel()
		b.Shutdown()
		log.Warn("node events are only logged: could not start the event broadcaster", "error", err)
		return e
	}
	e.broadcaster, e.recorder, e.cancel = b, b.NewRecorder(scheme.Scheme, ReportingController), cancel
	return e
}

// Stop shuts the broadcaster down; events not yet posted are dropped, and
// later ones are only logged. Safe to call more than once.
func (e *NodeEvents) Stop() {
	e.stopOnce.Do(func() {
		e.stopped.Store(true)
		if e.broadcaster != nil {
			e.broadcaster.Shutdown()
			e.cancel()
		}
	})
}

// Warning posts a Warning event unless the same reason was posted less than
// the minimum gap ago. It reports whether the event was posted (handed to
// the broadcaster, or logged without a client).
func (e *NodeEvents) Warning(_ context.Context, reason, action, note string) bool {
	now := e.now()
	e.mu.Lock()
	if last, ok := e.last[reason]; ok && now.Sub(last) < e.minGap {
		e.mu.Unlock()
		return false
	}
	e.last[reason] = now
	e.mu.Unlock()
	return e.post(corev1.EventTypeWarning, reason, action, note)
}

// Normal posts a Normal event. It is not limited here; the broadcaster
// folds repeats into a series.
func (e *NodeEvents) Normal(_ context.Context, reason, action, note string) bool {
	return e.post(corev1.EventTypeNormal, reason, action, note)
}

// NormalForPod posts a Normal event on the node with the pod as its
// related object, so events about different pods are not folded into one
// series (client-go groups events by reason, action and objects, not by
// note).
func (e *NodeEvents) NormalForPod(_ context.Context, namespace, name, reason, action, note string) bool {
	return e.postRelated(corev1.EventTypeNormal, reason, action, note,
		&corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name})
}

func (e *NodeEvents) post(typ, reason, action, note string) bool {
	return e.postRelated(typ, reason, action, note, nil)
}

func (e *NodeEvents) postRelated(typ, reason, action, note string, related *corev1.ObjectReference) bool {
	e.log.Info("node event", "type", typ, "reason", reason, "note", note)
	if e.recorder == nil || e.stopped.Load() {
		return true
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.node}}
	var rel runtime.Object
	if related != nil {
		rel = related
	}
	// The note is an argument, not the format: it may hold a '%'.
	e.recorder.Eventf(node, rel, typ, reason, action, "%s", truncate(note, maxNoteBytes))
	return true
}

// postAbout posts an event regarding obj (a pod), with the node as its
// related object, through the same broadcaster.
func (e *NodeEvents) postAbout(obj runtime.Object, typ, reason, action, note string) {
	e.log.Info("pod event", "type", typ, "reason", reason, "note", note)
	if e.recorder == nil || e.stopped.Load() {
		return
	}
	node := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: e.node}
	e.recorder.Eventf(obj, node, typ, reason, action, "%s", truncate(note, maxNoteBytes))
}

// nodeEventSink writes the broadcaster's events through the events API,
// naming this pod as the reporting instance (the recorder would use the
// host name) and logging what the API server refuses.
type nodeEventSink struct {
	sink     events.EventSink
	instance string
	log      *slog.Logger
}

func (s *nodeEventSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	s.stamp(ev)
	out, err := s.sink.Create(ctx, ev)
	s.failed("create", ev, err)
	return out, err
}

func (s *nodeEventSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	s.stamp(ev)
	out, err := s.sink.Update(ctx, ev)
	s.failed("update", ev, err)
	return out, err
}

func (s *nodeEventSink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.stamp(ev)
	out, err := s.sink.Patch(ctx, ev, data)
	s.failed("patch", ev, err)
	return out, err
}

// stamp sets the reporting instance on the broadcaster's private copy.
func (s *nodeEventSink) stamp(ev *eventsv1.Event) {
	if s.instance != "" {
		ev.ReportingInstance = s.instance
	}
}

func (s *nodeEventSink) failed(op string, ev *eventsv1.Event, err error) {
	if err != nil {
		s.log.Warn("could not post node event", "op", op, "reason", ev.Reason, "error", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...", s[:n-3])
}

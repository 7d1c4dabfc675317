package k8sapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ReasonPodIPUnavailable is the event reason of a failed ADD's Warning on
// its pod. The event's action is the cause (addfail's reason, e.g.
// "max_pods"): the broadcaster folds repeats of one reason and action on
// one pod into a series, so a new cause must be a new action to be seen.
const ReasonPodIPUnavailable = "FailedAssignPodIP"

// PodWarningsOptions bound what PodWarnings posts. Zero values take the
// defaults.
type PodWarningsOptions struct {
	// MinGap is the least time between two warnings for one pod and cause
	// (1 minute): the runtime retries a failed ADD every few seconds.
	MinGap time.Duration
	// PerSecond and Burst bound the warnings of the whole node (1/s,
	// burst 10), so a node refusing a hundred pods does not flood the API
	// server; what is over is dropped (still logged and counted by the
	// caller's metric).
	PerSecond float64
	Burst     int
	// Queue bounds the warnings waiting for the API server (64).
	Queue int
}

func (o *PodWarningsOptions) setDefaults() {
	if o.MinGap <= 0 {
		o.MinGap = time.Minute
	}
	if o.PerSecond <= 0 {
		o.PerSecond = 1
	}
	if o.Burst <= 0 {
		o.Burst = 10
	}
	if o.Queue <= 0 {
		o.Queue = 64
	}
}

// PodWarnings posts why a pod's ADD failed as a Warning event regarding
// the pod (with its UID, so `kubectl describe pod` shows it next to the
// kubelet's FailedCreatePodSandBox), through the node's event broadcaster.
// AddFailed never blocks: warnings queue for one worker, which reads the
// pod's UID and posts. A pod that no longer exists gets none.
type PodWarnings struct {
	client kubernetes.Interface
	events *NodeEvents
	opts   PodWarningsOptions
	log    *slog.Logger
	now    func() time.Time
	limit  *rate.Limiter

	mu   sync.Mutex
	last map[podCause]time.Time

	queue    chan podWarning
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

type podCause struct{ namespace, name, reason string }

type podWarning struct {
	podCause
	line string
}

// NewPodWarnings starts the worker; events is the node's broadcaster.
// Call Stop when done.
func NewPodWarnings(client kubernetes.Interface, events *NodeEvents, opts PodWarningsOptions, log *slog.Logger) *PodWarnings {
	opts.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &PodWarnings{client: client, events: events, opts: opts, log: log, now: time.Now,
		limit: rate.NewLimiter(rate.Limit(opts.PerSecond), opts.Burst), last: map[podCause]time.Time{},
		queue: make(chan podWarning, opts.Queue), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// AddFailed queues a warning on the pod for the ADD's cause (reason: its
// addfail reason, line: its one line) unless one for the same pod and
// cause went out less than MinGap ago, or the node's rate is spent.
func (w *PodWarnings) AddFailed(namespace, name, reason, line string) {
	k := podCause{namespace, name, reason}
	now := w.now()
	w.mu.Lock()
	if at, ok := w.last[k]; ok && now.Sub(at) < w.opts.MinGap {
		w.mu.Unlock()
		return
	}
	if !w.limit.AllowN(now, 1) {
		w.mu.Unlock()
		w.log.Debug("pod warning dropped: the node's event rate is spent", "pod", namespace+"/"+name, "reason", reason)
		return
	}
	w.last[k] = now
	w.pruneLocked(now)
	w.mu.Unlock()
	select {
	case w.queue <- podWarning{podCause: k, line: line}:
	default:
		w.log.Debug("pod warning dropped: queue full", "pod", namespace+"/"+name, "reason", reason)
	}
}

// pruneLocked forgets pods warned about longer than MinGap ago once the
// map grows past a node's worth of pods. Requires w.mu.
func (w *PodWarnings) pruneLocked(now time.Time) {
	if len(w.last) < 1024 {
		return
	}
	for k, at := range w.last {
		if now.Sub(at) >= w.opts.MinGap {
			delete(w.last, k)
		}
	}
}

// Stop ends the worker; queued warnings are dropped. Safe to call twice.
func (w *PodWarnings) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

func (w *PodWarnings) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case pw := <-w.queue:
			w.post(pw)
		}
	}
}

// post reads the pod's UID and posts the warning regarding it.
func (w *PodWarnings) post(pw podWarning) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: pw.namespace, Name: pw.name}}
	if w.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), podIPsRequestTimeout)
		got, err := w.client.CoreV1().Pods(pw.namespace).Get(ctx, pw.name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return // gone: nobody reads its events
		case err != nil:
			w.log.Debug("could not read the pod for its warning; posting without its UID", "pod", pw.namespace+"/"+pw.name, "error", err)
		default:
			pod.UID = got.UID
		}
	}
	w.events.postAbout(pod, corev1.EventTypeWarning, ReasonPodIPUnavailable, pw.reason, pw.line)
}

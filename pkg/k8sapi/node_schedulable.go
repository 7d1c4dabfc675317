package k8sapi

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/ctxtime"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// UnschedulableTaintKey is the taint Kubernetes puts on a cordoned node
// (with effect NoSchedule); upstream's AWS_MANAGE_ENIS_NON_SCHEDULABLE
// looks for it.
const UnschedulableTaintKey = "node.kubernetes.io/unschedulable"

// NodeSchedulability follows one node's taints with a watch on that node
// alone (no informer: client-go's cache package is not linked), so asking
// costs nothing.
type NodeSchedulability struct {
	client  kubernetes.Interface
	node    string
	tainted atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
	log     *slog.Logger
}

// WatchNodeSchedulability reads node once (waiting up to syncWait), then
// follows it until Stop. Whenever the node cannot be read it counts as
// schedulable, as upstream treats a failed node lookup as "not
// unschedulable".
func WatchNodeSchedulability(ctx context.Context, c kubernetes.Interface, node string, syncWait time.Duration, log *slog.Logger) *NodeSchedulability {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &NodeSchedulability{client: c, node: node, cancel: cancel, done: make(chan struct{}), log: log}
	getCtx, stopGet := context.WithTimeout(ctx, syncWait)
	rv, err := w.read(getCtx)
	stopGet()
	if err != nil {
		log.Warn("cannot read the node's taints yet; it counts as schedulable until the API server answers", "node", node, "error", err)
	}
	go w.follow(ctx, rv)
	return w
}

// Schedulable is false while the node has the unschedulable NoSchedule
// taint.
func (w *NodeSchedulability) Schedulable() bool { return !w.tainted.Load() }

// Stop ends the watch and waits for it to end. Safe to call more than once.
func (w *NodeSchedulability) Stop() {
	w.cancel()
	<-w.done
}

// read gets the node and records its taint; it returns the resource
// version to watch from.
func (w *NodeSchedulability) read(ctx context.Context) (string, error) {
	n, err := w.client.CoreV1().Nodes().Get(ctx, w.node, metav1.GetOptions{})
	if err != nil {
		w.set(false)
		return "", err
	}
	w.set(HasUnschedulableTaint(n))
	return n.ResourceVersion, nil
}

// follow watches the node from rv, and reads it again whenever the watch
// ends (timeout, expired version, API server restart), backing off on
// errors.
func (w *NodeSchedulability) follow(ctx context.Context, rv string) {
	defer close(w.done)
	const minBackoff, maxBackoff = time.Second, 30 * time.Second
	backoff := minBackoff
	for ctx.Err() == nil {
		if rv == "" {
			var err error
			if rv, err = w.read(ctx); err != nil {
				if ctxtime.Sleep(ctx, backoff) != nil {
					return
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
		}
		wi, err := w.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", w.node).String(),
			ResourceVersion: rv,
		})
		if err != nil {
			rv = ""
			if ctxtime.Sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		rv = w.drain(ctx, wi)
	}
}

// drain applies the watch's events until it ends; it returns the version
// to resume from ("" to read the node again).
func (w *NodeSchedulability) drain(ctx context.Context, wi watch.Interface) string {
	defer wi.Stop()
	rv := ""
	for {
		select {
		case <-ctx.Done():
			return ""
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return rv
			}
			n, isNode := ev.Object.(*corev1.Node)
			switch {
			case ev.Type == watch.Error:
				return "" // e.g. version too old: start again from a fresh read
			case !isNode || n.Name != w.node:
			case ev.Type == watch.Deleted:
				w.set(false)
				rv = ""
			default:
				w.set(HasUnschedulableTaint(n))
				rv = n.ResourceVersion
			}
		}
	}
}

func (w *NodeSchedulability) set(tainted bool) {
	if w.tainted.Swap(tainted) != tainted {
		w.log.Info("node schedulability changed", "node", w.node, "unschedulableTaint", tainted)
	}
}

// HasUnschedulableTaint reports whether the node carries the taint
// node.kubernetes.io/unschedulable with effect NoSchedule (any value), the
// match upstream makes.
func HasUnschedulableTaint(n *corev1.Node) bool {
	want := corev1.Taint{Key: UnschedulableTaintKey, Effect: corev1.TaintEffectNoSchedule}
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].MatchTaint(&want) {
			return true
		}
	}
	return false
}

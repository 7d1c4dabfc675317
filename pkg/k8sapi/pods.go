package k8sapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PodGetTimeout bounds the direct read of a pod the cache does not hold.
// An ADD waits for it, so it is short; the runtime retries a failed ADD.
const PodGetTimeout = 2 * time.Second

// ErrPodNotFound: the API server says the pod does not exist. Errors
// that mean it also satisfy apierrors.IsNotFound, however they are
// wrapped (upstream wrapped the NotFound away, so a DEL of a deleted pod
// was not recognised, aws/amazon-vpc-cni-k8s#3777).
var ErrPodNotFound = errors.New("pod not found")

// PodCache serves the pods of one node (ENABLE_POD_ENI) from a watch of
// the pods whose spec.nodeName is the node, as upstream's cached client
// does. A pod the cache does not hold (not yet seen: a pod scheduled a
// moment ago; or already gone) is read directly once, bounded by
// PodGetTimeout, rather than failing the ADD as upstream does: the runtime
// would retry, but the pod would start later for nothing.
//
// It keeps only what the security-groups-for-pods decision reads (name,
// namespace, UID, annotations, the containers' resource limits).
type PodCache struct {
	client  kubernetes.Interface
	store   cache.Store
	ctrl    cache.Controller
	timeout time.Duration
	cancel  context.CancelFunc
	done    chan struct{}
	log     *slog.Logger
}

// NewPodCache starts watching node's pods until Stop. It does not wait
// for the first list: until then every Get reads directly.
func NewPodCache(ctx context.Context, client kubernetes.Interface, node string, log *slog.Logger) *PodCache {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	// The reflector streams its first list (WatchList) where the client
	// supports it; client-go's fake does not, and says so.
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, client), ObjectType: &corev1.Pod{}, Handler: cache.ResourceEventHandlerFuncs{}, Transform: trimPod,
	})
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &PodCache{client: client, store: store, ctrl: ctrl, timeout: PodGetTimeout, cancel: cancel, done: make(chan struct{}), log: log}
	go func() { defer close(c.done); ctrl.RunWithContext(ctx) }()
	log.Info("watching this node's pods for security groups for pods", "node", node)
	return c
}

// Synced reports whether the first list has been stored.
func (c *PodCache) Synced() bool { return c.ctrl.HasSynced() }

// Stop ends the watch and waits for it. Safe to call more than once.
func (c *PodCache) Stop() {
	c.cancel()
	<-c.done
}

// Get returns the pod from the cache, or else as the API server has it
// now. A pod that does not exist is an error satisfying both
// errors.Is(err, ErrPodNotFound) and apierrors.IsNotFound(err). The pod
// returned is shared: callers must not change it.
func (c *PodCache) Get(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	obj, ok, err := c.store.GetByKey(namespace + "/" + name)
	if err == nil && ok {
		if p, isPod := obj.(*corev1.Pod); isPod {
			return p, nil
		}
	}
	return c.getDirect(ctx, namespace, name)
}

// Fresh reads the pod from the API server, bypassing the cache (for a
// cached pod that may be behind, such as one the controller has just
// annotated). Errors as Get.
func (c *PodCache) Fresh(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return c.getDirect(ctx, namespace, name)
}

func (c *PodCache) getDirect(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	p, err := c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, &podNotFoundError{namespace: namespace, name: name, cause: err}
	case err != nil:
		return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	return trimmed(p), nil
}

// podNotFoundError is ErrPodNotFound for one pod, unwrapping to the API
// server's own NotFound status.
type podNotFoundError struct {
	namespace, name string
	cause           error
}

func (e *podNotFoundError) Error() string {
	return fmt.Sprintf("pod %s/%s not found: %v", e.namespace, e.name, e.cause)
}

func (e *podNotFoundError) Is(target error) bool { return target == ErrPodNotFound }
func (e *podNotFoundError) Unwrap() error        { return e.cause }

// trimPod is the informer's transform: only what is read is kept.
func trimPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return trimmed(p), nil
	}
	return obj, nil // a DeletedFinalStateUnknown tombstone
}

func trimmed(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
		ResourceVersion: p.ResourceVersion, Annotations: p.Annotations}}
	out.Spec.NodeName = p.Spec.NodeName
	for _, ctr := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers,
			corev1.Container{Name: ctr.Name, Resources: corev1.ResourceRequirements{Limits: ctr.Resources.Limits}})
	}
	return out
}

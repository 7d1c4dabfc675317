package k8sapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// PodIPsAnnotation is upstream's annotation holding a pod's IP
// (ANNOTATE_POD_IP).
const PodIPsAnnotation = "vpc.amazonaws.com/pod-ips"

// Why a pod's annotation was not written, as counted by PodIPs.OnError.
const (
	PodIPsPatchFailed = "annotatePodIP"          // the API server refused or did not answer
	PodIPsQueueFull   = "annotatePodIPQueueFull" // too many updates waiting; this one was dropped
)

// DefaultPodIPsQueue bounds the updates waiting for the API server.
const DefaultPodIPsQueue = 1024

// podIPsRequestTimeout bounds one pod update (its get and patch).
const podIPsRequestTimeout = 5 * time.Second

// PodIPs writes each pod's IP into its vpc.amazonaws.com/pod-ips annotation
// as upstream's ANNOTATE_POD_IP does: the IP after an ADD, "" after the DEL
// if the annotation still names the released IP. Unlike upstream, the
// caller never waits: updates queue for one background worker, in order
// (so a pod's clear never overtakes its set), and a failed or dropped
// update is logged and counted, never failing the ADD or DEL.
type PodIPs struct {
	client  kubernetes.Interface
	log     *slog.Logger
	onError func(reason string)

	queue    chan podIPUpdate
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

type podIPUpdate struct {
	namespace, name, ip string
	clear               bool
}

// NewPodIPs starts the worker. onError (may be nil) is told each update
// that was not written, with PodIPsPatchFailed or PodIPsQueueFull. Call
// Stop when done.
func NewPodIPs(client kubernetes.Interface, queue int, onError func(reason string), log *slog.Logger) *PodIPs {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if onError == nil {
		onError = func(string) {}
	}
	if queue < 1 {
		queue = DefaultPodIPsQueue
	}
	p := &PodIPs{client: client, log: log, onError: onError,
		queue: make(chan podIPUpdate, queue), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// Assigned queues setting the pod's annotation to ip.
func (p *PodIPs) Assigned(namespace, name, ip string) {
	p.enqueue(podIPUpdate{namespace: namespace, name: name, ip: ip})
}

// Released queues clearing the pod's annotation if it still names ip.
func (p *PodIPs) Released(namespace, name, ip string) {
	p.enqueue(podIPUpdate{namespace: namespace, name: name, ip: ip, clear: true})
}

func (p *PodIPs) enqueue(u podIPUpdate) {
	select {
	case <-p.stop:
		return
	default:
	}
	select {
	case p.queue <- u:
	default:
		p.onError(PodIPsQueueFull)
		p.log.Warn("pod IP annotation dropped: too many updates waiting for the API server",
			"pod", u.namespace+"/"+u.name, "ip", u.ip, "annotation", PodIPsAnnotation)
	}
}

// Stop writes what is already queued (for at most drain) and stops the
// worker; later updates are ignored.
func (p *PodIPs) Stop(drain time.Duration) {
	p.stopOnce.Do(func() { close(p.stop) })
	select {
	case <-p.done:
	case <-time.After(drain):
		p.log.Warn("pod IP annotations still queued at stop; left unwritten", "queued", len(p.queue))
	}
}

func (p *PodIPs) run() {
	defer close(p.done)
	for {
		select {
		case u := <-p.queue:
			p.apply(u)
		case <-p.stop:
			for {
				select {
				case u := <-p.queue:
					p.apply(u)
				default:
					return
				}
			}
		}
	}
}

func (p *PodIPs) apply(u podIPUpdate) {
	ctx, cancel := context.WithTimeout(context.Background(), podIPsRequestTimeout)
	defer cancel()
	var err error
	if u.clear {
		err = p.clear(ctx, u)
	} else {
		err = p.set(ctx, u)
	}
	if err != nil {
		p.onError(PodIPsPatchFailed)
		p.log.Warn("could not update the pod's IP annotation", "pod", u.namespace+"/"+u.name, "ip", u.ip,
			"clear", u.clear, "annotation", PodIPsAnnotation, "error", err)
	}
}

// set merge-patches the annotation to the IP, retrying on conflict.
func (p *PodIPs) set(ctx context.Context, u podIPUpdate) error {
	patch, err := annotationPatch(u.ip, "")
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		_, err := p.client.CoreV1().Pods(u.namespace).Patch(ctx, u.name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// clear empties the annotation only while it still names the released IP
// (a newer ADD of the same pod may have set another); the patch carries the
// resourceVersion it decided on, so a concurrent change is a conflict and
// the decision is taken again. A pod already gone needs nothing.
func (p *PodIPs) clear(ctx context.Context, u podIPUpdate) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		pod, err := p.client.CoreV1().Pods(u.namespace).Get(ctx, u.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Annotations[PodIPsAnnotation] != u.ip {
			return nil
		}
		patch, err := annotationPatch("", pod.ResourceVersion)
		if err != nil {
			return err
		}
		_, err = p.client.CoreV1().Pods(u.namespace).Patch(ctx, u.name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func annotationPatch(value, resourceVersion string) ([]byte, error) {
	meta := map[string]any{"annotations": map[string]string{PodIPsAnnotation: value}}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	b, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return nil, fmt.Errorf("annotation patch: %w", err)
	}
	return b, nil
}

package sgpcontroller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Controller is a running stand-in for one node. Its methods are safe for
// concurrent use.
type Controller struct {
	opts   Options
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	subnet subnetInfo
	pods   cache.Store // the node's pods, by namespace/name
	queue  workqueue.TypedRateLimitingInterface[work]
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu       sync.Mutex // guards the state below
	trunk    trunkState
	branches map[types.UID]PodENI
	vlans    map[int]bool
}

// work is one item of the controller's queue.
type work struct {
	kind string // workTrunk, workPod (key = namespace/name), workRelease (key = pod UID)
	key  string
}

const (
	workTrunk   = "trunk"
	workPod     = "pod"
	workRelease = "release"
)

// errWait is a step that must come back later (an attachment still in
// progress, a pod waiting for the trunk): requeued after retryWait.
var errWait = errors.New("not yet")

const retryWait = 100 * time.Millisecond

// Start installs the CNINode CRD if missing, creates the node's CNINode
// if missing, and runs the controller until Stop.
func Start(ctx context.Context, o Options) (*Controller, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(o.Kube)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(o.Kube)
	if err != nil {
		return nil, err
	}
	if err := installCRD(ctx, dyn); err != nil {
		return nil, err
	}
	subnet, err := describeSubnet(ctx, o.EC2, o.SubnetID)
	if err != nil {
		return nil, err
	}
	if err := createCNINode(ctx, kube, dyn, o.NodeName); err != nil {
		return nil, err
	}
	c := &Controller{opts: o, kube: kube, dyn: dyn, subnet: subnet,
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[work](50*time.Millisecond, 2*time.Second)),
		branches: map[types.UID]PodENI{}, vlans: map[int]bool{}}
	run, cancel := context.WithCancel(context.Background())
	c.cancel = cancel

	nodeOnly := fields.OneTermEqualSelector("metadata.name", o.NodeName).String()
	cnInformer := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "", func(lo *metav1.ListOptions) {
		lo.FieldSelector = nodeOnly
	}).ForResource(CNINodeGVR).Informer()
	if _, err := cnInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.cniNodeChanged,
		UpdateFunc: func(_, obj any) { c.cniNodeChanged(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	podInformer := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.NodeName).String()
	})).Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podChanged,
		UpdateFunc: func(_, obj any) { c.podChanged(obj) },
		DeleteFunc: c.podDeleted,
	}); err != nil {
		cancel()
		return nil, err
	}
	c.pods = podInformer.GetStore()
	for _, inf := range []cache.SharedIndexInformer{cnInformer, podInformer} {
		c.done.Add(1)
		go func() { defer c.done.Done(); inf.Run(run.Done()) }()
	}
	if !cache.WaitForCacheSync(ctx.Done(), cnInformer.HasSynced, podInformer.HasSynced) {
		c.Stop()
		return nil, fmt.Errorf("sgpcontroller: caches not synced: %w", ctx.Err())
	}
	c.done.Add(1)
	go func() { defer c.done.Done(); c.worker(run) }()
	o.Logger.Info("sgpcontroller started", "node", o.NodeName, "instance", o.InstanceID, "subnet", o.SubnetID)
	return c, nil
}

// Stop ends the controller and waits for it. ENIs stay as they are;
// branches still cooling down are not deleted.
func (c *Controller) Stop() {
	c.cancel()
	c.queue.ShutDown()
	c.done.Wait()
}

// createCNINode creates the node's CNINode unless it exists, owned by the
// Node when that exists (so that it goes with the Node, as in a cluster).
func createCNINode(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, name string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": CNINodeGVR.GroupVersion().String(), "kind": "CNINode",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{},
	}}
	if node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}})
	}
	_, err := dyn.Resource(CNINodeGVR).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CNINode %s: %w", name, err)
	}
	return nil
}

func (c *Controller) cniNodeChanged(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	features, _, _ := unstructured.NestedSlice(u.Object, "spec", "features")
	if hasFeature(features, FeatureSecurityGroupsForPods) {
		c.queue.Add(work{kind: workTrunk})
	}
}

func (c *Controller) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !needsBranch(pod) {
		return
	}
	c.queue.Add(work{kind: workPod, key: pod.Namespace + "/" + pod.Name})
}

func (c *Controller) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.mu.Lock()
	_, has := c.branches[pod.UID]
	c.mu.Unlock()
	if has {
		c.queue.AddAfter(work{kind: workRelease, key: string(pod.UID)}, c.opts.BranchCooldown)
	}
}

// worker runs the queue's items one at a time, so each step sees the
// previous one's state.
func (c *Controller) worker(ctx context.Context) {
	for {
		w, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		var err error
		switch w.kind {
		case workTrunk:
			err = c.ensureTrunk(ctx)
		case workPod:
			err = c.ensureBranch(ctx, w.key)
		case workRelease:
			err = c.release(ctx, types.UID(w.key))
		}
		switch {
		case err == nil:
			c.queue.Forget(w)
		case errors.Is(err, errWait):
			c.queue.Forget(w)
			c.queue.AddAfter(w, retryWait)
		case ctx.Err() != nil:
		default:
			c.opts.Logger.Warn("sgpcontroller: step failed, retrying", "kind", w.kind, "key", w.key, "err", err)
			c.queue.AddRateLimited(w)
		}
		c.queue.Done(w)
	}
}

package kubenode

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
)

// WorkloadNamespace holds the test's workloads.
const WorkloadNamespace = "default"

// Deployment creates (or scales) a Deployment of replicas pods whose one
// container is the pause image (present on the node, never pulled).
func (n *Node) Deployment(t testing.TB, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: WorkloadNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr(int64(2)),
					AutomountServiceAccountToken:  ptr(false),
					Containers: []corev1.Container{{Name: "app", Image: e2e.PauseImage,
						ImagePullPolicy: corev1.PullNever}},
				},
			},
		},
	}
	deps := n.Admin.AppsV1().Deployments(WorkloadNamespace)
	// Again on a conflict: the controller may write the Deployment's
	// status between the Get and the Update.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := deps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			_, err = deps.Create(ctx, d, metav1.CreateOptions{})
			return err
		}
		cur.Spec.Replicas = &replicas
		_, err = deps.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("kubenode: deployment %s: %v", name, err)
	}
}

// RunningWatch follows the pods of one label selector and records, for
// each pod, how long after it was first seen it was Running and Ready.
type RunningWatch struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	ready   map[string]time.Duration
	Latency e2e.Latencies
	stop    func()
}

// WatchRunning starts a watch (from now: pods that already exist count
// from now too).
func (n *Node) WatchRunning(t testing.TB, selector string) *RunningWatch {
	t.Helper()
	w, err := n.Admin.CoreV1().Pods(WorkloadNamespace).Watch(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	rw := &RunningWatch{seen: map[string]time.Time{}, ready: map[string]time.Duration{}, stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			rw.mu.Lock()
			if _, ok := rw.seen[p.Name]; !ok {
				rw.seen[p.Name] = now
			}
			if _, done := rw.ready[p.Name]; !done && Ready(p) {
				d := now.Sub(rw.seen[p.Name])
				rw.ready[p.Name] = d
				rw.Latency.Add(d)
			}
			rw.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return rw
}

// Stop ends the watch.
func (rw *RunningWatch) Stop() { rw.stop() }

// WaitRunning waits until want pods of the deployment are Ready and returns them.
func (n *Node) WaitRunning(t testing.TB, selector string, want int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	ok := poll(timeout, func() bool {
		pods, err := n.Admin.CoreV1().Pods(WorkloadNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false
		}
		ready = ready[:0]
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && Ready(&p) {
				ready = append(ready, p)
			}
		}
		return len(ready) >= want
	})
	if !ok {
		t.Fatalf("kubenode: %d of %d pods (%s) Ready after %s\n%s", len(ready), want, selector, timeout, n.Diagnose())
	}
	return ready
}

// WaitGone waits until no pod of the selector exists.
func (n *Node) WaitGone(t testing.TB, selector string, timeout time.Duration) {
	t.Helper()
	left := 0
	if !poll(timeout, func() bool {
		pods, err := n.Admin.CoreV1().Pods(WorkloadNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false
		}
		left = len(pods.Items)
		return left == 0
	}) {
		t.Fatalf("kubenode: %d pods (%s) left after %s\n%s", left, selector, timeout, n.Diagnose())
	}
}

// PodNetns opens the network namespace of a running pod (through its
// sandbox's process, which the host sees: the node shares its PID
// namespace; or, on CRI-O with no infra container, its pinned namespace
// file in the node).
func (n *Node) PodNetns(p *corev1.Pod) (ns.NetNS, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sbs, err := n.Runtime.CRI.ListPodSandbox(ctx)
	if err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		if sb.GetMetadata().GetUid() != string(p.UID) || sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		info, err := n.Runtime.CRI.PodSandboxStatus(ctx, sb.GetId())
		if err != nil {
			return nil, err
		}
		if info.PID == 0 && info.Netns != "" { // CRI-O without an infra container: its pinned netns in the node
			return ns.GetNS(n.Box.Root(info.Netns))
		}
		if info.PID == 0 {
			return nil, fmt.Errorf("pod %s: sandbox %s reports no PID", p.Name, sb.GetId())
		}
		return ns.GetNS(fmt.Sprintf("/proc/%d/ns/net", info.PID))
	}
	return nil, fmt.Errorf("pod %s: no ready sandbox", p.Name)
}

// SandboxIDs maps each ready sandbox's pod UID to its sandbox ID.
func (n *Node) SandboxIDs() (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sbs, err := n.Runtime.CRI.ListPodSandbox(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, sb := range sbs {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			out[sb.GetMetadata().GetUid()] = sb.GetId()
		}
	}
	return out, nil
}

// PodIP is the pod's IPv4 address as the API server shows it.
func PodIP(p *corev1.Pod) (netip.Addr, error) { return netip.ParseAddr(p.Status.PodIP) }

func ptr[T any](v T) *T { return &v }

// DeletePods deletes the pods with the given grace period (nil: the pod's
// own; 0: a force delete, gone from the API at once).
func (n *Node) DeletePods(t testing.TB, pods []corev1.Pod, grace *int64) {
	t.Helper()
	for _, p := range pods {
		err := n.Admin.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: grace})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("kubenode: delete pod %s: %v", p.Name, err)
		}
	}
}

// WaitPodsGone waits until none of the pods (by UID) is in the API or
// has a sandbox the runtime lists in any state (the kubelet has removed
// them: both of its DELs are done).
func (n *Node) WaitPodsGone(t testing.TB, pods []corev1.Pod, timeout time.Duration) {
	t.Helper()
	var left []string
	if !poll(timeout, func() bool {
		left = left[:0]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		sbs, err := n.Runtime.CRI.ListPodSandbox(ctx)
		cancel()
		if err != nil {
			return false
		}
		listed := map[string]bool{}
		for _, sb := range sbs {
			listed[sb.GetMetadata().GetUid()] = true
		}
		for _, p := range pods {
			_, err := n.Admin.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
			if err == nil || listed[string(p.UID)] {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0
	}) {
		t.Fatalf("kubenode: pods %v still there after %s\n%s", left, timeout, n.Diagnose())
	}
}

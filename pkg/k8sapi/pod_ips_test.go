package k8sapi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func pod(ns, name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
}

// errorLog keeps the reasons PodIPs reported.
type errorLog struct {
	mu      sync.Mutex
	reasons []string
}

func (e *errorLog) add(r string) { e.mu.Lock(); e.reasons = append(e.reasons, r); e.mu.Unlock() }
func (e *errorLog) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reasons...)
}

func annotation(t *testing.T, c *fake.Clientset, ns, name string) (string, bool) {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	v, ok := p.Annotations[PodIPsAnnotation]
	return v, ok
}

func TestPodIPsSetAndClear(t *testing.T) {
	c := fake.NewClientset(
		pod("default", "web-0", map[string]string{"team": "a"}),
		pod("default", "web-1", nil),
	)
	errs := &errorLog{}
	p := NewPodIPs(c, 8, errs.add, nil)
	p.Assigned("default", "web-0", "10.0.0.7")
	p.Assigned("default", "web-1", "10.0.0.8")
	p.Stop(5 * time.Second) // drains the queue
	v, _ := annotation(t, c, "default", "web-0")
	assert.Equal(t, "10.0.0.7", v)
	other, err := c.CoreV1().Pods("default").Get(context.Background(), "web-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "a", other.Annotations["team"], "other annotations are kept")

	p = NewPodIPs(c, 8, errs.add, nil)
	p.Released("default", "web-0", "10.0.0.7")  // still names it: cleared
	p.Released("default", "web-1", "10.0.0.99") // names another IP (a newer ADD): kept
	p.Released("default", "gone", "10.0.0.9")   // pod deleted already: nothing to do
	p.Stop(5 * time.Second)
	v, ok := annotation(t, c, "default", "web-0")
	assert.True(t, ok)
	assert.Empty(t, v, "cleared to the empty string, as upstream")
	v, _ = annotation(t, c, "default", "web-1")
	assert.Equal(t, "10.0.0.8", v)
	assert.Empty(t, errs.list())
}

// Updates apply in the order they were made, so a pod's clear never
// overtakes the set before it.
func TestPodIPsKeepOrder(t *testing.T) {
	c := fake.NewClientset(pod("ns", "p", nil))
	p := NewPodIPs(c, 16, nil, nil)
	p.Assigned("ns", "p", "10.0.0.1")
	p.Released("ns", "p", "10.0.0.1")
	p.Assigned("ns", "p", "10.0.0.2")
	p.Stop(5 * time.Second)
	v, _ := annotation(t, c, "ns", "p")
	assert.Equal(t, "10.0.0.2", v)
}

func TestPodIPsFailuresAreCountedNotFatal(t *testing.T) {
	c := fake.NewClientset(pod("ns", "p", nil))
	c.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("no patch verb"))
	})
	errs := &errorLog{}
	p := NewPodIPs(c, 8, errs.add, nil)
	p.Assigned("ns", "p", "10.0.0.1")
	p.Assigned("ns", "missing", "10.0.0.2")
	p.Stop(5 * time.Second)
	assert.Equal(t, []string{PodIPsPatchFailed, PodIPsPatchFailed}, errs.list())
}

// A slow API server never holds up the caller: with the worker stuck and
// the queue full, an update is dropped and counted at once.
func TestPodIPsNeverBlockTheCaller(t *testing.T) {
	c := fake.NewClientset(pod("ns", "p", nil))
	entered, release := make(chan struct{}, 1), make(chan struct{})
	c.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return false, nil, nil
	})
	errs := &errorLog{}
	p := NewPodIPs(c, 1, errs.add, nil)
	p.Assigned("ns", "p", "10.0.0.1")
	<-entered                         // the worker is stuck in the first patch
	p.Assigned("ns", "p", "10.0.0.2") // queued
	start := time.Now()
	p.Assigned("ns", "p", "10.0.0.3") // dropped
	assert.Less(t, time.Since(start), 100*time.Millisecond)
	assert.Equal(t, []string{PodIPsQueueFull}, errs.list())
	close(release)
	p.Stop(5 * time.Second)
	v, _ := annotation(t, c, "ns", "p")
	assert.Equal(t, "10.0.0.2", v)
	p.Assigned("ns", "p", "10.0.0.4") // after Stop: ignored
	assert.Equal(t, []string{PodIPsQueueFull}, errs.list())
}

func TestWaitForAPIServer(t *testing.T) {
	ctx := context.Background()
	t.Run("answers", func(t *testing.T) {
		require.NoError(t, WaitForAPIServer(ctx, fake.NewClientset(), time.Millisecond, time.Second, nil))
	})
	t.Run("timeouts are retried", func(t *testing.T) {
		c := fake.NewClientset()
		calls := 0
		c.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
			calls++
			if calls < 3 {
				return true, nil, apierrors.NewTimeoutError("slow", 1)
			}
			return false, nil, nil
		})
		require.NoError(t, WaitForAPIServer(ctx, c, time.Millisecond, time.Second, nil))
		assert.Equal(t, 3, calls)
	})
	t.Run("another error stops the start", func(t *testing.T) {
		c := fake.NewClientset()
		c.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewUnauthorized("bad token")
		})
		err := WaitForAPIServer(ctx, c, time.Millisecond, time.Second, nil)
		require.Error(t, err)
		assert.True(t, apierrors.IsUnauthorized(err))
	})
	t.Run("ctx ends the wait", func(t *testing.T) {
		c := fake.NewClientset()
		c.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewTimeoutError("slow", 1)
		})
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := WaitForAPIServer(ctx, c, 10*time.Millisecond, time.Second, nil)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

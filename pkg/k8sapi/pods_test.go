package k8sapi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func nodePod(ns, name, node, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + uid),
		Annotations: map[string]string{"vpc.amazonaws.com/pod-eni": `[{"vlanID":1}]`}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
}

func startPodCache(t *testing.T, c *fake.Clientset) *PodCache {
	t.Helper()
	pc := NewPodCache(context.Background(), c, "node-a", nil)
	t.Cleanup(pc.Stop)
	require.Eventually(t, pc.Synced, 10*time.Second, 5*time.Millisecond)
	return pc
}

var errAPIDown = apierrors.NewServiceUnavailable("api server down")

// A pod the cache holds is answered from it, without the API server.
func TestAPodInTheCacheIsServedWithoutTheAPIServer(t *testing.T) {
	c := fake.NewClientset(nodePod("ns", "p", "node-a", "1"))
	pc := startPodCache(t, c)
	c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, errAPIDown })
	p, err := pc.Get(context.Background(), "ns", "p")
	require.NoError(t, err)
	assert.Equal(t, "uid-1", string(p.UID))
	assert.Equal(t, `[{"vlanID":1}]`, p.Annotations["vpc.amazonaws.com/pod-eni"])
	assert.Empty(t, p.ManagedFields, "the cache keeps only what is read")
	assert.Empty(t, p.Spec.Containers[0].Image)
}

// A pod the cache has not seen yet (scheduled a moment ago) is read
// directly, so its ADD need not wait for the runtime's retry.
func TestAPodTheCacheHasNotSeenIsReadDirectly(t *testing.T) {
	c := fake.NewClientset(nodePod("ns", "new", "node-a", "2"))
	// The watch never delivers and the list is empty: the cache stays
	// without the pod.
	c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &corev1.PodList{}, nil
	})
	c.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) { return true, watch.NewFake(), nil })
	pc := startPodCache(t, c)
	p, err := pc.Get(context.Background(), "ns", "new")
	require.NoError(t, err)
	assert.Equal(t, "uid-2", string(p.UID))
	assert.Empty(t, p.ManagedFields)
}

// A pod that does not exist is NotFound however the error is wrapped
// (upstream lost it by wrapping: a DEL of a deleted pod then failed).
func TestADeletedPodIsNotFoundThroughAnyWrapping(t *testing.T) {
	c := fake.NewClientset(nodePod("ns", "p", "node-a", "1"))
	pc := startPodCache(t, c)
	require.NoError(t, c.CoreV1().Pods("ns").Delete(context.Background(), "p", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := pc.Get(context.Background(), "ns", "p")
		return err != nil
	}, 10*time.Second, 5*time.Millisecond, "the deletion reaches the cache")
	_, err := pc.Get(context.Background(), "ns", "p")
	for name, e := range map[string]error{
		"as returned":   err,
		"wrapped again": fmt.Errorf("del: %w", fmt.Errorf("lookup: %w", err)),
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, e, ErrPodNotFound)
			assert.True(t, apierrors.IsNotFound(e))
			assert.Contains(t, e.Error(), "ns/p")
		})
	}
	_, err = pc.Get(context.Background(), "ns", "never-existed")
	assert.ErrorIs(t, err, ErrPodNotFound)
}

// An API server that cannot answer is not mistaken for a deleted pod.
func TestAnUnreachableAPIServerIsNotNotFound(t *testing.T) {
	c := fake.NewClientset()
	pc := startPodCache(t, c)
	for name, failure := range map[string]error{
		"unavailable": errAPIDown,
		"forbidden":   apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("rbac")),
		"timeout":     context.DeadlineExceeded,
	} {
		t.Run(name, func(t *testing.T) {
			c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, failure })
			_, err := pc.Get(context.Background(), "ns", "p")
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrPodNotFound)
			assert.False(t, apierrors.IsNotFound(err))
			assert.ErrorIs(t, err, failure)
		})
	}
}

// The cache follows the pod: a later annotation is what Get returns.
func TestTheCacheFollowsThePodsChanges(t *testing.T) {
	c := fake.NewClientset(nodePod("ns", "p", "node-a", "1"))
	pc := startPodCache(t, c)
	p, err := c.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	require.NoError(t, err)
	p.Annotations["vpc.amazonaws.com/pod-eni"] = `[{"vlanID":9}]`
	_, err = c.CoreV1().Pods("ns").Update(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, errAPIDown })
	require.Eventually(t, func() bool {
		got, err := pc.Get(context.Background(), "ns", "p")
		return err == nil && got.Annotations["vpc.amazonaws.com/pod-eni"] == `[{"vlanID":9}]`
	}, 10*time.Second, 5*time.Millisecond)
}

package k8sapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// On a real API server the cache holds only its node's pods (the field
// selector), follows the controller's annotation, and a pod deleted from
// the server is NotFound; a pod of another node is still read directly.
func TestRealServerPodCacheIsTheNodesPods(t *testing.T) {
	s := realServer(t)
	ctx := context.Background()
	admin := adminOf(t, s)
	mk := func(name, node string) {
		_, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = admin.CoreV1().Pods("default").Delete(ctx, name, *forceDelete()) })
	}
	mk("sgp-mine", "sgp-node-a")
	mk("sgp-other", "sgp-node-b")

	c := accountWith(t, s, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}})
	eventually(t, 10*time.Second, func() bool {
		_, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil
	}, "pods list granted")
	pc := NewPodCache(ctx, c, "sgp-node-a", nil)
	t.Cleanup(pc.Stop)
	eventually(t, 30*time.Second, pc.Synced, "the first list is stored")
	assert.Equal(t, []string{"default/sgp-mine"}, pc.store.ListKeys(), "only the node's pods")

	mine, err := pc.Get(ctx, "default", "sgp-mine")
	require.NoError(t, err)
	other, err := pc.Get(ctx, "default", "sgp-other")
	require.NoError(t, err, "another node's pod is read directly")
	assert.Equal(t, "sgp-node-b", other.Spec.NodeName)

	patch := []byte(`{"metadata":{"annotations":{"vpc.amazonaws.com/pod-eni":"[{\"vlanID\":5}]"}}}`)
	_, err = admin.CoreV1().Pods("default").Patch(ctx, "sgp-mine", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, func() bool {
		p, err := pc.Get(ctx, "default", "sgp-mine")
		return err == nil && p.Annotations["vpc.amazonaws.com/pod-eni"] == `[{"vlanID":5}]` && p.UID == mine.UID
	}, "the annotation reaches the cache")

	require.NoError(t, admin.CoreV1().Pods("default").Delete(ctx, "sgp-mine", *forceDelete()))
	eventually(t, 30*time.Second, func() bool {
		_, err := pc.Get(ctx, "default", "sgp-mine")
		return err != nil
	}, "the deletion reaches the cache")
	_, err = pc.Get(ctx, "default", "sgp-mine")
	assert.ErrorIs(t, err, ErrPodNotFound)
	assert.True(t, apierrors.IsNotFound(err))
}

func forceDelete() *metav1.DeleteOptions {
	zero := int64(0)
	return &metav1.DeleteOptions{GracePeriodSeconds: &zero}
}

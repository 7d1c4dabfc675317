package k8sapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func cordon(value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: UnschedulableTaintKey, Value: value, Effect: effect}
}

func TestHasUnschedulableTaint(t *testing.T) {
	for _, tt := range []struct {
		taints []corev1.Taint
		want   bool
	}{
		{nil, false},
		{[]corev1.Taint{cordon("", corev1.TaintEffectNoSchedule)}, true},
		{[]corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}, cordon("any-value", corev1.TaintEffectNoSchedule)}, true},
		{[]corev1.Taint{cordon("", corev1.TaintEffectNoExecute)}, false},
		{[]corev1.Taint{cordon("", corev1.TaintEffectPreferNoSchedule)}, false},
		{[]corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}, false},
	} {
		n := &corev1.Node{Spec: corev1.NodeSpec{Taints: tt.taints}}
		assert.Equal(t, tt.want, HasUnschedulableTaint(n), "%+v", tt.taints)
	}
}

func setTaints(t *testing.T, c *fake.Clientset, name string, taints ...corev1.Taint) {
	t.Helper()
	ctx := context.Background()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	n.Spec.Taints = taints
	_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestNodeSchedulabilityFollowsTheTaint(t *testing.T) {
	tainted := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{cordon("", corev1.TaintEffectNoSchedule)}}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	c := fake.NewClientset(tainted, other)
	w := WatchNodeSchedulability(context.Background(), c, "n1", 5*time.Second, nil)
	t.Cleanup(w.Stop)
	assert.False(t, w.Schedulable(), "known at once: the first read is synchronous")

	setTaints(t, c, "n1")
	require.Eventually(t, w.Schedulable, 10*time.Second, 5*time.Millisecond, "uncordoned")

	setTaints(t, c, "n2", cordon("", corev1.TaintEffectNoSchedule))
	time.Sleep(50 * time.Millisecond)
	assert.True(t, w.Schedulable(), "another node's taint does not count")

	setTaints(t, c, "n1", cordon("x", corev1.TaintEffectNoSchedule))
	require.Eventually(t, func() bool { return !w.Schedulable() }, 10*time.Second, 5*time.Millisecond, "cordoned again")

	require.NoError(t, c.CoreV1().Nodes().Delete(context.Background(), "n1", metav1.DeleteOptions{}))
	require.Eventually(t, w.Schedulable, 10*time.Second, 5*time.Millisecond, "a node that cannot be seen counts as schedulable")
	w.Stop()
	w.Stop()
}

func TestNodeSchedulabilityWithoutTheNode(t *testing.T) {
	c := fake.NewClientset()
	w := WatchNodeSchedulability(context.Background(), c, "missing", time.Second, nil)
	defer w.Stop()
	assert.True(t, w.Schedulable())
}

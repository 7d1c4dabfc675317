package k8sapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func node(name, pods string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if pods != "" {
		n.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)}
	}
	return n
}

func TestNodeMaxPods(t *testing.T) {
	c := fake.NewSimpleClientset(node("n1", "62"), node("n2", ""), node("n3", "0"))
	n, err := NodeMaxPods(context.Background(), c, "n1")
	require.NoError(t, err)
	assert.Equal(t, 62, n)
	for _, name := range []string{"n2", "n3", "missing"} {
		_, err := NodeMaxPods(context.Background(), c, name)
		assert.Error(t, err, name)
	}
}

func TestNodeEventsRateLimitAndShape(t *testing.T) {
	c := fake.NewSimpleClientset()
	ev := NewNodeEvents(c, "ip-10-0-0-1", "aws-node-abcde", time.Minute, nil)
	clock := time.Unix(1_700_000_000, 0)
	ev.now = func() time.Time { return clock }
	ctx := context.Background()

	assert.True(t, ev.Warning(ctx, "PodIPLeakSuspected", "Reconcile", "pool full"))
	assert.False(t, ev.Warning(ctx, "PodIPLeakSuspected", "Reconcile", "again"), "same reason within the gap is dropped")
	assert.True(t, ev.Warning(ctx, "OtherReason", "Reconcile", "x"), "reasons are limited separately")
	clock = clock.Add(61 * time.Second)
	assert.True(t, ev.Warning(ctx, "PodIPLeakSuspected", "Reconcile", "later"))
	assert.True(t, ev.Normal(ctx, "PodIPReclaimed", "Release", "one"))
	assert.True(t, ev.Normal(ctx, "PodIPReclaimed", "Release", "two"), "normal per-item events are not limited")

	list, err := c.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 5)
	e := list.Items[0]
	assert.Equal(t, "Node", e.Regarding.Kind)
	assert.Equal(t, "ip-10-0-0-1", e.Regarding.Name)
	assert.Equal(t, ReportingController, e.ReportingController)
	assert.Equal(t, "aws-node-abcde", e.ReportingInstance)
}

func TestNodeEventsWithoutClientOnlyLog(t *testing.T) {
	ev := NewNodeEvents(nil, "n", "p", time.Minute, nil)
	assert.True(t, ev.Warning(context.Background(), "R", "A", "note"))
}

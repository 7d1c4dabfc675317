package k8sapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

func testPod(ns, name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
}

func TestPodWarningsLandOnThePodOncePerGap(t *testing.T) {
	c := fake.NewSimpleClientset(testPod("web", "front-1", "uid-1"), testPod("web", "front-2", "uid-2"))
	ev := NewNodeEvents(c, "ip-10-0-0-1", "aws-node-x", time.Minute, nil)
	t.Cleanup(ev.Stop)
	clk := clocktest.New()
	w := NewPodWarnings(c, ev, PodWarningsOptions{}, nil)
	w.now = clk.Now
	t.Cleanup(w.Stop)

	w.AddFailed("web", "front-1", "max_pods", "max_pods: the node is at max pods (...)")
	w.AddFailed("web", "front-1", "max_pods", "max_pods: again, within the gap") // folded
	w.AddFailed("web", "front-1", "cooling_down", "cooling_down: another cause")
	w.AddFailed("web", "front-2", "max_pods", "max_pods: another pod")
	w.AddFailed("web", "gone", "max_pods", "max_pods: a deleted pod") // none

	require.Eventually(t, func() bool {
		l, err := c.EventsV1().Events("web").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		return len(l.Items) >= 3
	}, 30*time.Second, 20*time.Millisecond, "three events")
	time.Sleep(200 * time.Millisecond) // nothing more comes
	l, err := c.EventsV1().Events("web").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, l.Items, 3, "one per pod and cause; none for a pod that is gone")
	notes := map[string]string{}
	for _, e := range l.Items {
		assert.Equal(t, "Warning", e.Type)
		assert.Equal(t, ReasonPodIPUnavailable, e.Reason)
		assert.Equal(t, e.Note[:len(e.Action)], e.Action, "the action is the cause")
		assert.Equal(t, "Pod", e.Regarding.Kind)
		assert.Equal(t, "Node", e.Related.Kind)
		assert.Equal(t, "ip-10-0-0-1", e.Related.Name)
		notes[e.Regarding.Name+" "+string(e.Regarding.UID)+" "+e.Note] = e.Note
	}
	assert.Contains(t, notes, "front-1 uid-1 max_pods: the node is at max pods (...)")
	assert.Contains(t, notes, "front-1 uid-1 cooling_down: another cause")
	assert.Contains(t, notes, "front-2 uid-2 max_pods: another pod")

	clk.Advance(time.Minute) // the gap is over: the same cause is posted again
	w.AddFailed("web", "front-1", "max_pods", "max_pods: a minute later")
	require.Eventually(t, func() bool {
		l, err := c.EventsV1().Events("web").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range l.Items {
			if e.Note == "max_pods: a minute later" || (e.Series != nil && e.Series.Count >= 2) {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "posted again after the gap")
}

func TestPodWarningsNodeRateDropsTheExcess(t *testing.T) {
	ev := NewNodeEvents(nil, "", "", time.Minute, nil)
	clk := clocktest.New()
	w := NewPodWarnings(nil, ev, PodWarningsOptions{PerSecond: 1, Burst: 3, Queue: 100}, nil)
	w.now = clk.Now
	t.Cleanup(w.Stop)
	for i := range 10 {
		w.AddFailed("ns", "pod-"+string(rune('a'+i)), "max_pods", "line")
	}
	w.mu.Lock()
	assert.Len(t, w.last, 3, "the burst, then the node's rate")
	w.mu.Unlock()
	clk.Advance(2 * time.Second)
	w.AddFailed("ns", "pod-z", "max_pods", "line")
	w.AddFailed("ns", "pod-y", "max_pods", "line")
	w.AddFailed("ns", "pod-x", "max_pods", "line")
	w.mu.Lock()
	assert.Len(t, w.last, 5, "two seconds refill two")
	w.mu.Unlock()
}

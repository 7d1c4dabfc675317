package k8sapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// landed lists the node events with reason in the default namespace.
func landed(t *testing.T, c *fake.Clientset, reason string) []eventsv1.Event {
	t.Helper()
	list, err := c.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// waitLanded polls (the broadcaster is asynchronous) until ok holds for
// reason's events, and returns them.
func waitLanded(t *testing.T, c *fake.Clientset, reason string, ok func([]eventsv1.Event) bool) []eventsv1.Event {
	t.Helper()
	var got []eventsv1.Event
	require.Eventually(t, func() bool {
		got = landed(t, c, reason)
		return ok(got)
	}, 30*time.Second, 20*time.Millisecond, "events with reason %s: %+v", reason, got)
	return got
}

func count(n int) func([]eventsv1.Event) bool {
	return func(es []eventsv1.Event) bool { return len(es) == n }
}

func TestNodeEventsLandRegardingTheNode(t *testing.T) {
	c := fake.NewSimpleClientset()
	ev := NewNodeEvents(c, "ip-10-0-0-1", "aws-node-abcde", time.Minute, nil)
	t.Cleanup(ev.Stop)

	assert.True(t, ev.Warning(context.Background(), "PodIPLeakSuspected", "ReconcilePodIPs", "pool 100% full"))
	e := waitLanded(t, c, "PodIPLeakSuspected", count(1))[0]
	assert.Equal(t, metav1.NamespaceDefault, e.Namespace)
	assert.Equal(t, "Node", e.Regarding.Kind)
	assert.Equal(t, "v1", e.Regarding.APIVersion)
	assert.Equal(t, "ip-10-0-0-1", e.Regarding.Name)
	assert.Equal(t, ReportingController, e.ReportingController)
	assert.Equal(t, "aws-node-abcde", e.ReportingInstance)
	assert.Equal(t, "Warning", e.Type)
	assert.Equal(t, "ReconcilePodIPs", e.Action)
	assert.Equal(t, "pool 100% full", e.Note, "the note is not a format string")
	assert.False(t, e.EventTime.IsZero())
	assert.True(t, strings.HasPrefix(e.Name, "ip-10-0-0-1."), e.Name)

	long := strings.Repeat("x", 2*maxNoteBytes)
	assert.True(t, ev.Normal(context.Background(), "LongNote", "Test", long))
	e = waitLanded(t, c, "LongNote", count(1))[0]
	assert.Len(t, e.Note, maxNoteBytes)
}

func TestNodeEventsWarningGapPerReason(t *testing.T) {
	c := fake.NewSimpleClientset()
	ev := NewNodeEvents(c, "n1", "p", time.Minute, nil)
	t.Cleanup(ev.Stop)
	clock := time.Unix(1_700_000_000, 0)
	ev.now = func() time.Time { return clock }
	ctx := context.Background()

	assert.True(t, ev.Warning(ctx, "PodIPLeakSuspected", "Reconcile", "pool full"))
	assert.False(t, ev.Warning(ctx, "PodIPLeakSuspected", "Reconcile", "again"), "same reason within the gap is dropped")
	assert.True(t, ev.Warning(ctx, "OtherReason", "Reconcile", "x"), "reasons are limited separately")
	clock = clock.Add(61 * time.Second)
	assert.True(t, ev.Warning(ctx, "PodIPLeakSuspected", "Reconcile", "later"))
	assert.True(t, ev.Normal(ctx, "PodIPReclaimed", "Release", "one"))
	assert.True(t, ev.Normal(ctx, "PodIPReclaimed", "Release", "two"), "normal events are not limited here")
	waitLanded(t, c, "OtherReason", count(1))
}

func TestNodeEventsRepeatsBecomeASeries(t *testing.T) {
	c := fake.NewSimpleClientset()
	ev := NewNodeEvents(c, "n1", "p", time.Minute, nil)
	t.Cleanup(ev.Stop)
	ctx := context.Background()

	require.True(t, ev.Normal(ctx, "PodIPReclaimed", "ReleasePodIP", "released 10.0.0.1"))
	waitLanded(t, c, "PodIPReclaimed", count(1))
	for i := range 50 {
		require.True(t, ev.Normal(ctx, "PodIPReclaimed", "ReleasePodIP", fmt.Sprintf("released 10.0.0.%d", i+2)))
	}
	got := waitLanded(t, c, "PodIPReclaimed", func(es []eventsv1.Event) bool {
		return len(es) == 1 && es[0].Series != nil
	})
	assert.GreaterOrEqual(t, got[0].Series.Count, int32(2))
	assert.Equal(t, "released 10.0.0.1", got[0].Note, "a series keeps its first note")
	// Nothing more arrives: 51 events made one object.
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, landed(t, c, "PodIPReclaimed"), 1)
}

func TestNodeEventsNeverBlockOnTheAPIServer(t *testing.T) {
	c := fake.NewSimpleClientset()
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	c.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release // an API server that does not answer
		return false, nil, nil
	})
	ev := NewNodeEvents(c, "n1", "p", 0, nil)
	t.Cleanup(ev.Stop)

	began := time.Now()
	for i := range 20 {
		ev.Warning(context.Background(), "Stuck", "Test", fmt.Sprint(i))
		ev.Normal(context.Background(), "StuckToo", "Test", "n")
	}
	assert.Less(t, time.Since(began), time.Second, "posting returns without waiting for the API server")
	unblock()
	waitLanded(t, c, "Stuck", count(1))
}

func TestNodeEventsWithoutClientOnlyLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ev := NewNodeEvents(nil, "n", "p", time.Minute, log)
	assert.True(t, ev.Warning(context.Background(), "R", "A", "note"))
	assert.True(t, ev.Normal(context.Background(), "N", "A", "note"))
	ev.Stop()
	ev.Stop()
	assert.Contains(t, buf.String(), "reason=R")
	assert.Contains(t, buf.String(), "reason=N")

	// A client but no node name: nothing to regard, so log only as well.
	c := fake.NewSimpleClientset()
	ev = NewNodeEvents(c, "", "p", time.Minute, nil)
	assert.True(t, ev.Warning(context.Background(), "R", "A", "note"))
	ev.Stop()
	assert.Empty(t, landed(t, c, "R"))
}

func TestNodeEventsAfterStopOnlyLog(t *testing.T) {
	c := fake.NewSimpleClientset()
	ev := NewNodeEvents(c, "n1", "p", time.Minute, nil)
	ev.Stop()
	assert.True(t, ev.Normal(context.Background(), "Late", "A", "note"))
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, landed(t, c, "Late"))
}

// Events about different pods name the pod as the related object, so each
// pod's reclaim stays its own event instead of joining another pod's series.
func TestNodeEventsForDifferentPodsStaySeparate(t *testing.T) {
	c := fake.NewSimpleClientset()
	ev := NewNodeEvents(c, "n1", "p", time.Minute, nil)
	t.Cleanup(ev.Stop)
	ctx := context.Background()
	for i := range 3 {
		require.True(t, ev.NormalForPod(ctx, "prod", fmt.Sprintf("web-%d", i), "PodIPReclaimed", "ReleasePodIP", fmt.Sprintf("released 10.0.0.%d", i)))
	}
	got := waitLanded(t, c, "PodIPReclaimed", count(3))
	pods := map[string]bool{}
	for _, e := range got {
		require.NotNil(t, e.Related)
		assert.Equal(t, "Pod", e.Related.Kind)
		assert.Equal(t, "prod", e.Related.Namespace)
		assert.Equal(t, "Node", e.Regarding.Kind)
		pods[e.Related.Name] = true
	}
	assert.Len(t, pods, 3)
}

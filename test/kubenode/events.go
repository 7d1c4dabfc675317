package kubenode

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SeenEvent is an event and when the test saw it (the API's times have
// one-second precision).
type SeenEvent struct {
	At              time.Time
	Pod             string
	Reason, Message string
}

// EventLog records the core/v1 events of the workload namespace from the
// moment it starts (the kubelet posts FailedCreatePodSandBox there).
type EventLog struct {
	mu     sync.Mutex
	events []SeenEvent
}

// WatchEvents starts an EventLog until the test ends.
func (n *Node) WatchEvents(t testing.TB) *EventLog {
	t.Helper()
	// From the list's version: a watch without one first replays every
	// event that exists.
	list, err := n.Admin.CoreV1().Events(WorkloadNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := n.Admin.CoreV1().Events(WorkloadNamespace).Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &EventLog{}
	go func() {
		for ev := range w.ResultChan() {
			e, ok := ev.Object.(*corev1.Event)
			if !ok {
				continue
			}
			l.mu.Lock()
			l.events = append(l.events, SeenEvent{At: time.Now(), Pod: e.InvolvedObject.Name, Reason: e.Reason, Message: e.Message})
			l.mu.Unlock()
		}
	}()
	return l
}

// Since is every event with the reason seen at or after from.
func (l *EventLog) Since(from time.Time, reason string) []SeenEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []SeenEvent
	for _, e := range l.events {
		if !e.At.Before(from) && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

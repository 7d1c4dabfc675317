package clocktest

import (
	"sync"
	"testing"
	"time"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	c := New()
	if got := c.Now(); !got.Equal(Start) {
		t.Fatalf("new clock shows %v, want %v", got, Start)
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), Start.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("after Advance: %v, want %v", got, want)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c.Set(at)
	if got := c.Now(); !got.Equal(at) {
		t.Fatalf("after Set: %v, want %v", got, at)
	}
}

func TestClockConcurrentAdvance(t *testing.T) {
	c := New()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got, want := c.Now(), Start.Add(800*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after 800 concurrent 1ms steps: %v, want %v", got, want)
	}
}

func TestAfterFuncRunsDueTimersInOrder(t *testing.T) {
	c := New()
	var got []string
	c.AfterFunc(3*time.Second, func() { got = append(got, "3s") })
	c.AfterFunc(time.Second, func() { got = append(got, "1s") })
	c.AfterFunc(time.Hour, func() { got = append(got, "1h") })
	c.Advance(500 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("timers ran before their time: %v", got)
	}
	c.Advance(3 * time.Second)
	if want := []string{"1s", "3s"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("after 3.5s ran %v, want %v", got, want)
	}
	c.Set(Start.Add(2 * time.Hour))
	if len(got) != 3 || got[2] != "1h" {
		t.Fatalf("Set past the last timer ran %v", got)
	}
	// A timer may use the clock itself without deadlocking.
	c.AfterFunc(time.Second, func() { _ = c.Now(); got = append(got, "reentrant") })
	c.Advance(time.Second)
	if got[len(got)-1] != "reentrant" {
		t.Fatalf("re-entrant timer did not run: %v", got)
	}
}

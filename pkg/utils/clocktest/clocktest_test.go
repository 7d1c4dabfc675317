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
